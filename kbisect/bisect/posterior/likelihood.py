"""How much the samples support one split of the revisions into good and bad: the
bisection's side of it. The model, its EM and its evidence are statistics
(stats/split.py, stats/evidence.py, the two-part noise mixture of stats/mixture.py); here
is what a bisection puts in: Model, its settings (stored with a run), and the regressors
its samples bring.

With `trend` the samples' time t_j is a regressor, with a normal prior on the slope (sd: a
change of `drift_sd` over the samples' time span).

d_j is the load of sample j: the share of the CPUs other work took while it ran, as
measured (targets/monitor.py: others' share of the host where the kernel runs on it, steal
time inside the kernel). A hog that starts halfway is a step, not a slope: the trend
alone cannot explain it, and good revisions then look bad (seen for real: scripts/drift-demo);
with the load as a regressor (prior sd `load_sd` per unit of load) the samples taken under
it stay evidence. It enters only when the loads differ by at least LOAD_SPREAD (a run with
disturbed samples kept).

With a pool of machines (Model `machines`, docs/statistics.md "Bisection over a pool of
machines") each sample's machine enters the same way: one indicator per machine, centred,
with a N(0, machine_sd²) prior on its log offset, so that a machine a few percent faster
is not read as a level change; with one machine there is none (today's model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kbisect.stats import evidence
from kbisect.stats.mixture import WIDE
from kbisect.stats.split import MACHINE, Fit, Noise, Regressor

SIDE_SD = 0.5  # prior sd of log(sigma_bad / sigma_good) when the outlier part is fitted


@dataclass(frozen=True)
class Model:
    """The posterior's model as a bisection sets it (stored with a run): the noise
    mixture's outlier weight (None: fitted) and width, the prior sd of the two sides' log
    noise ratio (None: SIDE_SD when the weight is fitted, else 0: one sigma), and which
    regressors enter (time, load, machines) with their priors."""

    outlier: float | None = None
    outlier_scale: float = WIDE
    trend: bool = False
    drift_sd: float = 0.2  # prior sd of the slope: this change over the samples' time span
    load: bool = True  # the measured load is a regressor when the samples' loads differ
    load_sd: float = 2.0  # prior sd of beta: log tps change per unit of load
    side_sd: float | None = None
    machines: bool = False  # each sample's machine a multiplicative offset (a pool)
    machine_sd: float = 0.05  # prior sd of a machine's log offset: a 5% machine effect

    @property
    def fitted(self) -> bool:
        """Is the outlier weight fitted (and integrated), not fixed."""
        return self.outlier is None

    @property
    def side(self) -> float:
        """The prior sd of delta, the log of sigma_bad / sigma_good; 0: one sigma."""
        if self.side_sd is not None:
            return self.side_sd
        return SIDE_SD if self.fitted else 0.0

    def as_dict(self) -> dict[str, float | bool | None]:
        return {
            "outlier": self.outlier,
            "outlier_scale": self.outlier_scale,
            "trend": self.trend,
            "drift_sd": self.drift_sd,
            "load": self.load,
            "load_sd": self.load_sd,
            "side_sd": self.side_sd,
        } | ({"machines": True, "machine_sd": self.machine_sd} if self.machines else {})


LOAD_SPREAD = 0.05  # loads closer than this (a quiet run's background) add no regressor


def machine_columns(model: Model, machine: Sequence[str] | None) -> list[tuple[str, list[float]]]:
    """Each machine's indicator (name, values) where the model has machine offsets and the
    samples come from more than one machine; none otherwise (one machine: today's model).
    Every machine has its own offset, centred, with a proper prior (model.machine_sd): a
    machine effect is integrated out like the other regressors, never read as a level."""
    if not model.machines or not machine or len(set(machine)) < 2:
        return []
    return [(MACHINE + m, [1.0 if x == m else 0.0 for x in machine]) for m in sorted(set(machine))]


def loaded(model: Model, load: Sequence[float] | None) -> bool:
    """Does the load enter as a regressor: asked for, and the samples' loads differ."""
    return bool(model.load and load and max(load) - min(load) >= LOAD_SPREAD)


def fit(
    x: Sequence[float],
    z: Sequence[bool],
    model: Model,
    t: Sequence[float] | None = None,
    start: Fit | None = None,
    load: Sequence[float] | None = None,
    machine: Sequence[str] | None = None,
) -> Fit:
    """evidence.fit under the model, with the time (where it trends), the load (where it
    is loaded) and the machines (a pool) as regressors."""
    regressors = []
    if model.trend and t is not None:
        span = max(t) - min(t)
        # the slope's prior precision: drift_sd over the span is one standard deviation
        regressors.append(Regressor("t", t, (span / model.drift_sd) ** 2 if span else 1e12))
    if load is not None and loaded(model, load):
        regressors.append(Regressor("load", load, 1.0 / model.load_sd**2))
    for name, values in machine_columns(model, machine):
        regressors.append(Regressor(name, values, 1.0 / model.machine_sd**2))
    noise = Noise(model.outlier, model.outlier_scale, model.side)
    return evidence.fit(x, z, regressors, noise, start)
