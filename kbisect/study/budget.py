"""What a study will cost before it starts: cells, builds, boots, estimated time; and
the budget it may not exceed without --yes.

A boot's time is the scenario's pgbench time (warm-up and measured runs) plus an
overhead measured here under TCG (docs/examples/demo-bisect: 9 s to the harness, 17 s
template restore, the rest pgbench's own start and vacuum: about 35 s), so a
simple-update-2vcpu boot is about 2.6 minutes. A build is counted at a ccache-warm
minimal build's minute; a cold one takes 7-10 minutes here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kbisect.core.exceptions import UserError
from kbisect.scenario.check import bench_seconds
from kbisect.scenario.scenario import Scenario

BOOT_OVERHEAD_S = 35.0
BUILD_S = 60.0


class OverBudget(UserError):
    """The estimated time exceeds the study's budget and --yes was not given."""


def boot_seconds(scen: Scenario) -> float:
    return BOOT_OVERHEAD_S + float(bench_seconds(scen.data["pgbench"]))


@dataclass(frozen=True)
class Estimate:
    kernels: int
    cells: int
    builds: int
    boots: int  # planned, without retries
    seconds: float

    @property
    def hours(self) -> float:
        return self.seconds / 3600

    def line(self) -> str:
        return (
            f"{self.kernels} kernel(s) x {self.cells} cell(s), {self.builds} build(s), "
            f"{self.boots} boots: about {hm(self.seconds)}"
        )


def hm(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def estimate(kernels: int, builds: int, scens: Sequence[Scenario], boots: int) -> Estimate:
    """`scens`: one scenario per cell (each cell's own durations count)."""
    per_round = sum(boot_seconds(s) for s in scens) * kernels
    seconds = builds * BUILD_S + per_round * boots
    return Estimate(kernels, len(scens), builds, kernels * len(scens) * boots, seconds)


def check(est: Estimate, budget_hours: float, yes: bool) -> None:
    if est.hours > budget_hours and not yes:
        raise OverBudget(
            f"{est.line()}, over the budget of {budget_hours:g} h: "
            "pass --yes to run it anyway, or --budget HOURS"
        )
