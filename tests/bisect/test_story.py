"""The whole range's story (bisect/posterior/story.py) on generated linear histories."""

from __future__ import annotations

import math
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kbisect.bisect.posterior import story
from kbisect.bisect.posterior.graph import Graph
from kbisect.bisect.posterior.likelihood import Model
from kbisect.bisect.posterior.posterior import Posterior
from kbisect.simulate import histories
from kbisect.stats import changes, hypotheses, mixture


def _graph(n: int) -> Graph:
    return Graph.from_parents(histories.linear(n), f"c{n - 1}", ["good"])


def _levels(changes: dict[int, float]):
    """tps of a revision: 1000 times each change (index -> factor) among its ancestors."""

    def tps(commit: str) -> float:
        i = -1 if commit == "good" else int(commit[1:])
        level = 1000.0
        for at, factor in changes.items():
            if i >= at:
                level *= factor
        return level

    return tps


def _told(n: int, changes: dict[int, float], tested: list[str], each: int, cv: float, seed: int):
    g = _graph(n)
    tps = _levels(changes)
    rng = random.Random(seed)
    post = Posterior(g)
    for _ in range(each):
        for c in ["good", g.bad, *tested]:
            post.update(c, tps(c) * math.exp(cv * rng.gauss(0, 1)))
    samples = [(s.commit, s.tps, s.t, s.load) for s in post.samples]
    return story.RangeModel.build(g, post.partition(), samples, post.model)


def test_one_clean_step_is_a_single_story_with_its_size():
    m = _told(24, {10: 0.75}, ["c5", "c9", "c10", "c12", "c17", "c21"], 3, 0.05, 1)
    told = m.story()
    # not higher: a fix and a regression could still cancel inside a stretch no test split
    assert told.kind == "single" and told.p_single > story.ALONE
    (step,) = told.changes
    assert step.members == ("c10",) and step.p > 0.95
    assert step.low < 0.75 < step.high and step.high < 0.9
    assert told.settled(0.95) and not told.notes


def test_a_fix_inside_the_range_is_told_with_the_culprit_after_it():
    # c10 -15%, fixed by c15, the real culprit c19: c12 is bad, c17 good again
    changes = {10: 0.85, 15: 1 / 0.85, 19: 0.85}
    tested = ["c5", "c9", "c10", "c12", "c14", "c15", "c17", "c18", "c19", "c21"]
    m = _told(24, changes, tested, 4, 0.04, 2)
    told = m.story()
    assert told.kind == "several" and told.p_single < 0.01
    named = {s.commit: s for s in told.changes}
    assert set(named) == {"c10", "c15", "c19"}
    assert named["c15"].ratio > 1 > named["c19"].ratio
    assert named["c10"].high < 1 and named["c15"].low > 1
    assert told.notes and "one step cannot explain both" in told.notes[0]


def test_two_culprits_are_both_named_and_the_single_story_is_refused():
    changes = {6: 0.85, 17: 0.85}
    tested = ["c3", "c5", "c6", "c8", "c12", "c16", "c17", "c20"]
    m = _told(24, changes, tested, 4, 0.04, 3)
    told = m.story()
    assert told.kind == "several"
    assert [s.commit for s in told.changes] == ["c6", "c17"]
    assert story.Story.from_dict(told.as_dict()) == told  # as state.json holds it


def test_a_boot_far_off_does_not_make_a_second_change():
    g = _graph(16)
    tps = _levels({8: 0.75})
    rng = random.Random(4)
    post = Posterior(g)
    for _ in range(3):
        for c in ["good", g.bad, "c4", "c7", "c8", "c11"]:
            post.update(c, tps(c) * math.exp(0.05 * rng.gauss(0, 1)))
    post.update("c4", 500.0)  # one boot at half speed, as TCG's slow first boots are
    samples = [(s.commit, s.tps, s.t, s.load) for s in post.samples]
    told = story.RangeModel.build(g, post.partition(), samples, post.model).story()
    assert told.kind == "single" and told.changes[0].commit == "c8"
    assert told.outlier > mixture.OUTLIERS.lo


def test_stretch_probes_the_long_untested_stretch_after_the_step():
    g = _graph(32)
    post = Posterior(g)
    for c in ["good", g.bad, "c3", "c4", "c5", "c8"]:
        post.update(c, 1000.0 if c in ("good", "c3") else 750.0)
    step = story.Change(("c4",), 0.99, 0.75, 0.7, 0.8, 1.0)
    probe = story.stretch(g, post.partition(), step, set())
    assert probe is not None and 8 < int(probe[1:]) < 31  # the middle of c9..c31
    for c in [f"c{i}" for i in range(9, 31, 3)]:
        post.update(c, 750.0)
    assert story.stretch(g, post.partition(), step, set()) is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=7))
def test_the_prior_over_hypotheses_sums_to_one(sizes):
    hyps = hypotheses.hypotheses(sizes, sum(sizes))
    total = [float(v) for _, prior in hyps.values() for v in np.exp(prior)]
    assert math.isclose(math.fsum(total), 1.0, rel_tol=1e-9)


def test_laplace_evidence_against_importance_sampling_at_small_n():
    """Laplace's log evidence of two hypotheses against an importance-sampling estimate of
    the same integral (a t proposal around the mode, many draws): their difference, which
    is what the posterior uses, agrees within a few tenths of a nat at n = 8."""
    g = _graph(6)
    rng = random.Random(5)
    post = Posterior(g)
    tps = _levels({3: 0.8})
    for c in ["good", g.bad, "c1", "c3", "good", g.bad, "c1", "c3"]:
        post.update(c, tps(c) * math.exp(0.08 * rng.gauss(0, 1)))
    samples = [(s.commit, s.tps, s.t, s.load) for s in post.samples]
    parts = post.partition()
    d = story.data(g, parts, samples, Model())
    mix = changes.Mixture()
    idx = np.array([[c] for c in range(len(parts))], dtype=np.int64)
    f = changes.fit(d, idx, mix)
    exact = [_importance(d, f, row, mix) for row in range(len(parts))]
    laplace = f.log_evidence
    for a in range(len(parts)):
        for b in range(a + 1, len(parts)):
            gap = (laplace[a] - laplace[b]) - (exact[a] - exact[b])
            assert abs(gap) < 0.35, (a, b, gap)


def _importance(d: story.Data, f: changes.Fits, row: int, mix: changes.Mixture) -> float:
    """log ∫ likelihood × proper priors over (mu, d, s0, s1), by importance sampling."""
    gen = np.random.default_rng(7)
    mode = np.concatenate([f.theta[row], f.s[row]])
    cov = f.cov[row]
    nu, draws = 5, 40000
    chol = np.linalg.cholesky(cov)
    z = gen.standard_normal((draws, len(mode)))
    scale = np.sqrt(nu / gen.chisquare(nu, draws))[:, None]
    theta = mode + (z @ chol.T) * scale
    p = len(mode)
    _, logdet = np.linalg.slogdet(cov)
    quad = np.einsum("ij,ij->i", z, z)
    logq = (
        math.lgamma((nu + p) / 2)
        - math.lgamma(nu / 2)
        - 0.5 * p * math.log(nu * math.pi)
        - 0.5 * logdet
        - 0.5 * (nu + p) * np.log1p(quad / nu)
    )
    zc = d.z[:, f.idx[row]]  # (N, 1)
    mean = theta[:, :1] + theta[:, 1:2] * zc[:, 0]
    ls = theta[:, 2:3] + theta[:, 3:4] * zc[:, 0]
    e = d.x[None, :] - mean
    _, ll = changes._parts(e, ls, mix)
    lam_d, lam_s = 1 / changes.TAU**2, 1 / changes.NOISE_SD**2
    prior = (
        0.5 * math.log(lam_d / (2 * math.pi))
        - 0.5 * lam_d * theta[:, 1] ** 2
        + 0.5 * math.log(lam_s / (2 * math.pi))
        - 0.5 * lam_s * theta[:, 3] ** 2
    )
    logw = ll.sum(1) + prior - logq
    top = logw.max()
    return float(top + np.log(np.exp(logw - top).mean()))


def test_a_hypothesis_fits_the_same_alone_as_in_its_batch():
    """Each hypothesis is iterated until its own objective stops moving: the slow ones of
    a batch (K = 3 over many classes) do not move the others' fits, so a hypothesis
    fitted alone has the fit and evidence it has in the batch."""
    steps = {6: 0.85, 17: 0.85}
    tested = ["c3", "c5", "c6", "c8", "c12", "c16", "c17", "c20"]
    m = _told(24, steps, tested, 3, 0.08, 4)
    idx, _ = hypotheses.hypotheses([mask.bit_count() for mask, _ in m.classes], m.graph.n)[3]
    batch = changes.fit(m.d, idx, m.mix)
    for row in range(0, len(idx), max(1, len(idx) // 12)):
        alone = changes.fit(m.d, idx[row : row + 1], m.mix)
        assert np.allclose(alone.theta[0], batch.theta[row], rtol=0, atol=1e-12)
        assert np.allclose(alone.s[0], batch.s[row], rtol=0, atol=1e-12)
        assert math.isclose(alone.log_evidence[0], batch.log_evidence[row], abs_tol=1e-9)
