"""The one-split likelihood (kbisect/bisect/posterior/likelihood.py) outside its own
model: noise per side, the outlier weight fitted, and the evidence against exact
integration where there are few samples."""

from __future__ import annotations

import functools
import itertools
import json
import math
import random
from typing import Any

import numpy as np
import pytest

from kbisect.bisect.posterior import likelihood
from kbisect.bisect.posterior.likelihood import Model, fit
from kbisect.stats import mixture

ROBUST = Model()  # the outlier weight fitted, the noise per side


def exact_log_evidence(x: list[float], z: list[bool], model: Model) -> float:
    """log ∫ likelihood × prior, without Laplace: the mixture expanded into its 2^n
    assignments of samples to the core and the wide part; given one, the levels integrate
    in closed form (flat priors, normal noise of known relative scales), w's integral is
    one dimension (its truncated Beta prior times w^m·(1 - w)^(n - m)), and the two log
    sigmas (flat on the good side's, N(0, tau²) on their difference) are a 2-D grid."""
    xs = np.asarray(x)
    zs = np.asarray(z)
    n, k, tau = len(xs), model.outlier_scale, model.side
    a, b = mixture.OUTLIERS.a, mixture.OUTLIERS.b
    lo, hi = mixture.OUTLIERS.lo, mixture.OUTLIERS.hi
    wg = np.linspace(lo, hi, 40001)
    prior = wg ** (a - 1) * (1 - wg) ** (b - 1)
    prior /= np.trapezoid(prior, wg)
    log_w = [math.log(np.trapezoid(prior * wg**m * (1 - wg) ** (n - m), wg)) for m in range(n + 1)]
    centre = math.log(np.std(xs) + 1e-3)
    step = 0.03
    s = np.arange(centre - 10, centre + 18, step)
    kernel = np.exp(-0.5 * ((s[None, :] - s[:, None]) / tau) ** 2) / (tau * math.sqrt(2 * math.pi))
    rows_g, rows_b, consts = [], [], []
    for out in itertools.product((False, True), repeat=n):
        kappa = np.where(out, k, 1.0)
        const = log_w[sum(out)]
        logf = []
        for side in (False, True):
            xi, ki = xs[zs == side], kappa[zs == side]
            prec = ki**-2.0
            mean = float(prec @ xi / prec.sum())
            q = float(prec @ (xi - mean) ** 2)
            m = len(xi)
            const += -0.5 * (m - 1) * math.log(2 * math.pi) - float(np.log(ki).sum())
            const -= 0.5 * math.log(prec.sum())
            logf.append(-(m - 1) * s - 0.5 * q * np.exp(-2 * s))
        rows_g.append(logf[0])
        rows_b.append(logf[1])
        consts.append(const)
    fg, fb = np.asarray(rows_g), np.asarray(rows_b)
    top_g, top_b = fg.max(axis=1, keepdims=True), fb.max(axis=1, keepdims=True)
    inner = np.einsum("ai,ij,aj->a", np.exp(fg - top_g), kernel, np.exp(fb - top_b)) * step**2
    logs = np.log(inner) + top_g[:, 0] + top_b[:, 0] + np.asarray(consts)
    top = float(logs.max())
    return top + math.log(float(np.exp(logs - top).sum()))


def samples(n: int, seed: int, outlier: bool) -> tuple[list[float], list[bool]]:
    """n samples, half good (tps 1000) and half bad (750) at CV 10%; with one good boot
    at half speed."""
    rng = random.Random(seed)
    z = [i >= n // 2 for i in range(n)]
    x = [math.log((750 if bad else 1000) * (1 + 0.1 * rng.gauss(0, 1))) for bad in z]
    if outlier:
        x[0] = math.log(500.0)
    return x, z


CASES = [(n, seed, out) for n in (4, 6, 8, 10) for seed in (1, 2) for out in (False, True)]


@functools.cache
def exact(n: int, seed: int, outlier: bool) -> float:
    x, z = samples(n, seed, outlier)
    return exact_log_evidence(x, z, ROBUST)


@pytest.mark.parametrize(("n", "seed", "outlier"), CASES)
def test_the_evidence_matches_exact_integration_for_few_samples(n, seed, outlier):
    x, z = samples(n, seed, outlier)
    f = fit(x, z, ROBUST)
    assert f.log_evidence == pytest.approx(exact(n, seed, outlier), abs=0.1)


def test_laplace_alone_is_off_where_samples_are_few():
    """Why the sampler: Laplace's evidence of the mixture, per side, with w fitted, is off
    by more than 0.1 nat in some of the cases above (the sampler is not)."""
    worst = 0.0
    for n, seed, outlier in CASES:
        x, z = samples(n, seed, outlier)
        f = fit(x, z, ROBUST)
        assert f.laplace is not None
        worst = max(worst, abs(f.laplace - exact(n, seed, outlier)))
    assert worst > 0.1


def sides(n: int, cv_good: float, cv_bad: float, seed: int = 1) -> tuple[list[float], list[bool]]:
    rng = random.Random(seed)
    z = [i % 2 == 1 for i in range(n)]
    x = [
        math.log(750 if bad else 1000) + (cv_bad if bad else cv_good) * rng.gauss(0, 1) for bad in z
    ]
    return x, z


def test_each_side_has_its_own_noise():
    """The good side at 5%, the bad side at 15%: both fitted; one sigma in the fixed
    model of earlier runs."""
    x, z = sides(60, 0.05, 0.15)
    f = fit(x, z, ROBUST)
    assert f.sigma(False) == pytest.approx(0.05, rel=0.3)
    assert f.sigma(True) == pytest.approx(0.15, rel=0.3)
    old = fit(x, z, Model(outlier=0.05))
    assert old.log_sigma_bad is None and old.sigma(True) == old.sigma(False)


def test_the_outlier_weight_follows_the_boots():
    x, z = sides(40, 0.05, 0.05)
    clean = fit(x, z, ROBUST)
    for i in range(0, 40, 6):  # 7 boots of 40 at half speed
        x[i] += math.log(0.5)
    far = fit(x, z, ROBUST)
    assert clean.outlier < 0.05 < 0.1 < far.outlier <= mixture.OUTLIERS.hi
    assert far.sigma(False) == pytest.approx(0.05, rel=0.3)  # the far boots are not noise


def test_the_fit_does_not_depend_on_the_fits_before_it():
    """A stored run re-renders to the figures it showed live: the fitted model's maximum
    comes from fixed starts, not from the last fit of a similar split."""
    x, z = samples(10, 2, True)
    other = fit(x, [not b for b in z], ROBUST)
    assert fit(x, z, ROBUST, start=other) == fit(x, z, ROBUST)


def test_stored_runs_keep_the_fixed_mixture():
    """A state.json written before the weight was fitted names it: the model it describes
    is the old one (one sigma, fixed w, Laplace); a new state names none."""
    stored: dict[str, Any] = {"outlier": 0.05, "outlier_scale": 8.0, "trend": True}
    old = Model(**stored)
    assert not old.fitted and old.side == 0.0
    new = Model(trend=True)
    assert new.fitted and new.side == likelihood.SIDE_SD
    assert Model(**json.loads(json.dumps(new.as_dict()))) == new
    x, z = samples(8, 1, True)
    f = fit(x, z, old, t=[float(i) for i in range(8)])
    assert f.laplace is None and f.outlier == 0.05
