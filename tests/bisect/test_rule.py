"""The posterior bisection's decision rule (kbisect/bisect/rule.py): one test per branch
on views built by hand, and one through the driver on the fake tree and target."""

from __future__ import annotations

import json
import re

import pytest

from kbisect.bisect import rule
from kbisect.bisect.posterior.posterior import Answer
from kbisect.stats import stopping
from tests.bisect import test_posterior_method
from tests.bisect.test_bisect import history, kbisect, run_dirs
from tests.bisect.test_verify import args

env = test_posterior_method.env  # the fixture: the fake tree and target, 5% noise

HELD = Answer("culprit", (("c5", 0.97),))


def view(**given: object) -> rule.View:
    base: dict[str, object] = {
        "answer": None,
        "culprit": None,
        "budget": 10,
        "reference": None,
        "best": ("c3", "c7"),
    }
    return rule.View(**{**base, **given})  # type: ignore[arg-type]


def held(**given: object) -> rule.View:
    return view(answer=HELD, culprit="c5", **given)


def test_no_answer_measures_the_best_tests():
    assert rule.decide(view()) == rule.Measure(("c3", "c7"), "the most information per cost")


def test_no_answer_and_a_reference_due_boots_the_reference_first():
    assert rule.decide(view(reference="good")) == rule.Reference("good")


def test_no_answer_and_no_test_that_splits_the_rest_gives_up():
    assert rule.decide(view(best=())) == rule.GiveUp("no test can split the rest")


def test_no_answer_and_the_budget_spent_gives_up():
    got = rule.decide(view(budget=0))
    assert isinstance(got, rule.GiveUp) and "--max-boots" in got.why


def test_an_answer_whose_check_has_not_begun_begins_it_even_past_the_budget():
    assert rule.decide(held()) == rule.Verify("c5", ())
    assert rule.decide(held(budget=0)) == rule.Verify("c5", ())


def test_a_running_check_boots_the_revert_until_it_catches_up_with_bad():
    """bad's stored samples count: the revert boots first, one more a round; even, the
    revert then bad; over four machines a round of four."""
    bad = (750.0, 760.0, 740.0)
    got = rule.decide(held(check=rule.Check("running", bad, (1000.0,))))
    assert got == rule.Verify("c5", ("revert",))
    even = rule.Check("running", (700.0, 800.0, 750.0), (720.0, 900.0, 650.0))  # not decided
    assert rule.decide(held(check=even)) == rule.Verify("c5", ("revert", "bad"))
    pool = rule.decide(held(check=even, width=4))
    assert pool == rule.Verify("c5", ("revert", "bad", "revert", "bad"))


def test_a_check_the_sequential_rule_has_decided_asks_no_more_boots():
    """What the running branch never sees: sides() is [] once stopping.decide is final
    (the loop then records the check's kind)."""
    from kbisect.bisect import verify

    bad = [750.0 * (1 + 0.001 * i) for i in range(stopping.LEAST)]
    reverted = [1000.0 * (1 + 0.001 * i) for i in range(stopping.LEAST)]
    assert verify.sides([1000.0] * 3, bad, reverted, 1) == []


def test_a_revert_that_restores_the_gap_stops_confirmed():
    got = rule.decide(held(check=rule.Check("all")))
    assert isinstance(got, rule.Stop) and got.confirmed and got.answer == HELD


def test_a_revert_too_noisy_to_say_stops_not_confirmed():
    got = rule.decide(held(check=rule.Check("unclear")))
    assert isinstance(got, rule.Stop) and not got.confirmed and got.why == rule.WHY["unclear"]


@pytest.mark.parametrize("kind", ["part", "none"])
def test_a_revert_that_leaves_a_rest_bisects_the_rest_with_it_reverted(kind):
    got = rule.decide(held(check=rule.Check(kind)))
    assert got == rule.Rest("c5", f"{rule.WHY[kind]}: bisecting the rest with it reverted")
    later = rule.decide(held(check=rule.Check(kind), reverted=("c9",), gap="regression"))
    assert isinstance(later, rule.Rest) and later.culprit == "c5"


@pytest.mark.parametrize("kind", ["part", "none"])
def test_a_rest_with_the_budget_spent_stops_not_confirmed(kind):
    got = rule.decide(held(check=rule.Check(kind), budget=0))
    assert isinstance(got, rule.Stop) and not got.confirmed and "--max-boots" in got.why


def test_after_the_last_pass_a_revert_that_leaves_a_rest_stops_not_confirmed():
    gone = tuple(f"c{9 + i}" for i in range(rule.PASSES - 1))
    got = rule.decide(held(check=rule.Check("part"), reverted=gone, gap="regression"))
    assert isinstance(got, rule.Stop) and not got.confirmed and got.why == rule.WHY["part"]


def test_a_rest_that_points_at_an_answer_already_reverted_stops_not_confirmed():
    """Its revert check is not begun: the earlier pass's already measured it."""
    got = rule.decide(held(reverted=("c5",), gap="regression"))
    assert isinstance(got, rule.Stop) and not got.confirmed and "already reverted" in got.why


def test_a_rest_begins_with_its_endpoint_check_and_gives_up_without_a_gap():
    """Before any test or check of the rest: Gap; endpoints that do not differ (the
    answer's share read part by chance): GiveUp, whatever the posterior holds."""
    assert rule.decide(view(reverted=("c9",))) == rule.Gap()
    assert rule.decide(held(reverted=("c9",))) == rule.Gap()
    for kind in ("no significant difference", "improvement"):
        got = rule.decide(held(reverted=("c9",), gap=kind))
        assert isinstance(got, rule.GiveUp) and "not significant" in got.why
    assert rule.decide(view(reverted=("c9",), gap="regression")) == rule.Measure(
        ("c3", "c7"), "the most information per cost"
    )


def test_a_revert_that_cannot_be_measured_falls_back_to_the_recheck_then_stops():
    """The re-check says whether the answer is a step; confirmed or not, the answer is
    not confirmed without a measured revert (a regression a later commit undid is a step
    whose revert does not apply)."""
    no = rule.Check("no-revert")
    assert rule.decide(held(check=no)) == rule.Recheck("c5", HELD)
    assert rule.decide(held(check=no, recheck="running")) == rule.Recheck("c5", HELD)
    got = rule.decide(held(check=no, recheck="confirmed"))
    assert isinstance(got, rule.Stop) and not got.confirmed and "confirmed" in got.why
    got = rule.decide(held(check=no, recheck="refuted"))
    assert isinstance(got, rule.Stop) and not got.confirmed and "refuted" in got.why


def test_the_driver_verifies_inside_the_search_with_no_recheck(env, capsys):
    """Through the CLI: the default search's answer is verified by revert inside its loop
    (no re-check boots, no probes), every boot of the check says what the rule expects."""
    shas = history(env["repo"], 12, 7)
    assert kbisect(*args(env, shas[1], shas[-1], "posterior")) == 0
    (run,) = run_dirs(env["results"])
    st = json.loads((run / "state.json").read_text())
    assert st["phase"] == "done" and st["verification"]["kind"] == "all"
    assert st["verification"]["culprit"] == shas[7]
    assert not st["rechecks"] and not st.get("probes") and not (run / "recheck").exists()
    assert "story" not in st["options"]  # the default, not saved
    said = capsys.readouterr().err
    lines = [line for line in said.splitlines() if "verify: " in line]
    assert lines and all("the rule" in line for line in lines)
    assert "the rule is decided" in lines[-1]
    # a boot before the decision says the boots left at most and the time they take
    assert len(lines) >= 2 and all(
        re.search(r"at most 10: \d+ boots, ~\d+ s left", x) for x in lines[:-1]
    )
