"""The posterior over the culprit (kbisect/bisect/posterior.py, likelihood.py, choice.py)
and the adaptive re-check (confirm.py), on generated linear and merge histories."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from kbisect.bisect.posterior.choice import Cost
from kbisect.bisect.posterior.graph import Graph
from kbisect.bisect.posterior.likelihood import Model, fit
from kbisect.bisect.posterior.posterior import Posterior
from kbisect.core.exceptions import UserError
from kbisect.simulate import histories
from kbisect.stats import confirm

NORMAL = Model(outlier=1e-9)  # the plain normal likelihood: closed form to check against


def linear(n: int) -> Graph:
    return Graph.from_parents(histories.linear(n), f"c{n - 1}", ["good"])


def merges(n: int, seed: int) -> Graph:
    parents = histories.merges(n, random.Random(seed))
    return Graph.from_parents(parents, next(reversed(parents)), ["good"])


def feed(p: Posterior, samples: Sequence[tuple[str, float]]) -> Posterior:
    for commit, tps in samples:
        p.update(commit, tps)
    return p


def evidence_by_hand(g: Graph, samples: list[tuple[str, float]], culprit: str) -> float:
    """log m for a normal likelihood, flat priors on both levels and on log sigma:
    -1/2 log(n_good n_bad) - (n - 2)/2 log S."""
    groups: dict[bool, list[float]] = {False: [], True: []}
    for commit, tps in samples:
        groups[g.is_bad(commit, culprit)].append(math.log(tps))
    rss = sum(sum((x - sum(xs) / len(xs)) ** 2 for x in xs) for xs in groups.values())
    n = len(samples)
    return -0.5 * math.log(len(groups[False]) * len(groups[True])) - (n - 2) / 2 * math.log(rss)


@pytest.mark.parametrize("graph", [linear(12), merges(40, 3)], ids=["linear", "merges"])
def test_posterior_equals_the_closed_form_for_normal_noise(graph):
    rng = random.Random(1)
    culprit = graph.commits[graph.n // 2]
    samples = [("good", 1000 * (1 + 0.1 * rng.gauss(0, 1))) for _ in range(3)]
    samples += [(graph.bad, 750 * (1 + 0.1 * rng.gauss(0, 1))) for _ in range(3)]
    for _ in range(8):
        r = rng.choice(graph.commits)
        level = 750 if graph.is_bad(r, culprit) else 1000
        samples.append((r, level * (1 + 0.1 * rng.gauss(0, 1))))
    probs = feed(Posterior(graph, NORMAL), samples).probabilities()
    logs = [evidence_by_hand(graph, samples, c) for c in graph.commits]
    top = max(logs)
    expected = [math.exp(v - top) for v in logs]
    total = sum(expected)
    for got, want in zip(probs, expected, strict=True):
        assert got == pytest.approx(want / total, rel=1e-6, abs=1e-12)


def test_clear_evidence_names_the_culprit():
    g = linear(8)
    samples = [("good", t) for t in (1000, 1040, 980)] + [("c7", t) for t in (750, 730, 770)]
    samples += [("c3", t) for t in (1010, 990, 1020)] + [("c4", t) for t in (760, 745, 735)]
    p = feed(Posterior(g), samples)
    answer = p.stop(0.95)
    assert answer is not None and answer.kind == "culprit"
    assert answer.candidates[0][0] == "c4"
    assert p.p_bad("c3") < 0.05 < 0.95 < p.p_bad("c4")
    assert p.p_bad("good") == 0.0 and p.p_bad("c7") == pytest.approx(1.0)
    assert p.summary()["levels"]["good_tps"] == pytest.approx(1000, rel=0.05)


def test_no_evidence_leaves_the_prior_and_no_answer():
    g = linear(10)
    p = feed(Posterior(g), [("good", 1000.0), ("c9", 700.0)])
    assert p.probabilities() == pytest.approx([0.1] * 10)
    assert p.stop(0.95) is None
    undecided = p.answer(0.95)
    assert undecided.kind == "undecided" and undecided.probability >= 0.95


def test_first_revision_splits_a_linear_range_in_half():
    g = linear(16)
    p = feed(Posterior(g), [("good", 1000.0), ("good", 1010.0), ("c15", 750.0), ("c15", 760.0)])
    first = p.next(Cost())
    assert first is not None and abs(p.p_bad(first) - 0.5) <= 1 / 16


def test_after_a_good_middle_the_next_revision_is_in_the_upper_half():
    g = linear(16)
    samples = [("good", 1000.0), ("good", 990.0), ("c15", 750.0), ("c15", 760.0)]
    samples += [("c7", t) for t in (1005.0, 995.0, 1010.0)]
    p = feed(Posterior(g), samples)
    nxt = p.next(Cost())
    assert nxt is not None and int(nxt[1:]) > 7


def test_merge_graph_split_is_near_half():
    g = merges(120, 7)
    p = feed(Posterior(g), [("good", 1000.0), ("good", 990.0), (g.bad, 750.0), (g.bad, 740.0)])
    first = p.next(Cost())
    assert first is not None and abs(p.p_bad(first) - 0.5) < 0.1


def test_a_built_revision_wins_when_building_is_dear():
    g = linear(16)
    p = feed(Posterior(g), [("good", 1000.0), ("good", 990.0), ("c15", 750.0), ("c15", 760.0)])
    p.built("c4")  # P(c4 bad) = 5/16, further from 1/2 than the middle's 8/16
    assert p.next(Cost(build=0.0)) != "c4"
    assert p.next(Cost(build=5.0)) == "c4"


def test_failed_revisions_are_never_chosen_and_hide_the_boundary():
    g = linear(12)
    p = Posterior(g)
    for c in ("c5", "c6"):
        p.failed(c)
    culprit = "c6"
    rng = random.Random(4)
    feed(p, [("good", 1000 * (1 + 0.05 * rng.gauss(0, 1))) for _ in range(3)])
    feed(p, [("c11", 750 * (1 + 0.05 * rng.gauss(0, 1))) for _ in range(3)])
    answer = None
    for _ in range(40):
        answer = p.stop(0.95)
        if answer is not None:
            break
        nxt = p.next(Cost())
        assert nxt not in ("c5", "c6")
        if nxt is None:
            break
        p.update(nxt, (750 if g.is_bad(nxt, culprit) else 1000) * (1 + 0.05 * rng.gauss(0, 1)))
    answer = answer or p.answer(0.95)
    assert answer.kind == "range"
    assert {c for c, _ in answer.candidates} == {"c5", "c6", "c7"}


def test_one_outlier_boot_does_not_decide():
    """A good revision with one boot at half speed stays good under the mixture; under a
    plain normal likelihood the same samples would make it look bad."""
    g = linear(8)
    base = [("good", t) for t in (1000, 1030, 970, 1010)] + [("c7", t) for t in (750, 740, 760)]
    samples = [*base, ("c3", 1005.0), ("c3", 995.0), ("c3", 500.0)]
    robust = feed(Posterior(g), samples)
    plain = feed(Posterior(g, NORMAL), samples)
    assert robust.p_bad("c3") < 0.2
    assert plain.p_bad("c3") > robust.p_bad("c3") + 0.3


def test_state_round_trips_through_json():
    g = merges(60, 2)
    rng = random.Random(9)
    p = Posterior(g)
    for _ in range(10):
        c = rng.choice([*g.commits, "good"])
        p.update(c, 1000 * (1 + 0.1 * rng.gauss(0, 1)), float(rng.randint(0, 100)))
    p.failed(g.commits[3])
    again = Posterior.from_dict(g, json.loads(json.dumps(p.as_dict())))
    assert again.probabilities() == pytest.approx(p.probabilities(), rel=1e-6, abs=1e-9)
    assert again.untestable == p.untestable
    assert again.summary()["samples"] == 10


def test_bad_input_is_a_user_error():
    p = Posterior(linear(4))
    with pytest.raises(UserError):
        p.update("elsewhere", 100.0)
    with pytest.raises(UserError):
        p.update("c1", -3.0)


def test_trend_model_fits_a_drift():
    rng = random.Random(3)
    t = [float(i) for i in range(40)]
    z = [i % 2 == 1 for i in range(40)]
    x = [
        math.log((750 if b else 1000) * (1 + 0.004 * u)) + 0.05 * rng.gauss(0, 1)
        for b, u in zip(z, t, strict=True)
    ]
    f = fit(x, z, Model(trend=True), t)
    assert f.coef[2] == pytest.approx(0.004, abs=0.0015)
    assert math.exp(f.level(False, 0.0)) == pytest.approx(1000, rel=0.05)


# --- the adaptive re-check -----------------------------------------------------------


def test_recheck_confirms_a_clear_regression_and_refutes_none():
    rule = confirm.Rule()
    rng = random.Random(5)
    parent = [1000 * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(10)]
    culprit = [750 * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(10)]
    assert confirm.decide(parent[:2], culprit[:2], rule).kind == "more"
    steps = [confirm.decide(parent[:n], culprit[:n], rule).kind for n in range(3, 11)]
    assert "confirmed" in steps
    same = [1000 * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(10)]
    kinds = {confirm.decide(parent[:n], same[:n], rule).kind for n in range(3, 11)}
    assert "confirmed" not in kinds and kinds & {"refuted", "unclear"}


def test_recheck_gives_up_at_the_maximum():
    rule = confirm.Rule(least=3, most=4)
    noisy = [1000.0, 600.0, 1400.0, 900.0]
    assert confirm.decide(noisy, [900.0, 1300.0, 700.0, 1000.0], rule).kind == "unclear"
    assert rule.level == pytest.approx(1 - 2 * 0.05 / 2)


def test_a_hog_halfway_is_explained_by_the_measured_load():
    """The real drift-demo run (tests/data/drift-demo-hog.json): the search named the
    culprit at P = 0.992, then two CPU hogs halved every figure. A step is no slope: with
    the trend alone good revisions under the hog looked bad and the culprit's P fell to
    0.48 (the run never stopped); with each sample's measured load as a regressor, the
    same samples keep it above 0.95 from the hog's first sample on."""
    data = json.loads((Path(__file__).parents[1] / "data" / "drift-demo-hog.json").read_text())
    g = linear(data["commits"])
    culprit = g.commits[data["culprit"]]
    trails: dict[bool, list[float]] = {}
    for load in (True, False):
        p = Posterior(g, Model(trend=True, load=load))
        trails[load] = []
        for i, tps, t, share in data["samples"]:
            p.update("good" if i < 0 else g.commits[i], tps, t, share)
            trails[load].append(p.probabilities()[g.index[culprit]])
        if load:
            answer = p.stop(0.95)
            assert answer is not None and answer.candidates[0][0] == culprit
            f = p.levels()
            assert f is not None and f.regressors == ("t", "load")
            assert -2.0 < f.coef[3] < -1.0  # log(0.5) / 0.45: the hog halved tps
            again = Posterior.from_dict(g, json.loads(json.dumps(p.as_dict())))
            assert again.probabilities() == pytest.approx(p.probabilities())
    hog = next(k for k, (_, _, _, share) in enumerate(data["samples"]) if share > 0.3)
    assert trails[False][hog - 1] > 0.95 and trails[True][hog - 1] > 0.95  # found, quiet
    assert min(trails[False][hog:]) < 0.1 and trails[False][-1] < 0.7  # lost to the step
    assert min(trails[True][hog:]) > 0.95  # kept


def test_a_quiet_run_has_no_load_regressor():
    g = linear(8)
    p = Posterior(g, Model(trend=True))
    for i, (commit, load) in enumerate([("good", 0.0), (g.bad, 0.03)] * 3):
        p.update(commit, 1000.0 if commit == "good" else 700.0 + i, float(i), load)
    f = p.levels()
    assert f is not None and f.regressors == ("t",)
