"""The posterior bisection's decision rule, in one place: what the default search does
next, from a small view of the posterior and the run. The search's loop
(posterior/search.py) builds the View, takes the Action, and asks again; a pool's loop
packs the actions into rounds. No I/O here, nothing raised.

Each step:

1. an answer holds `--confidence` (one commit, or a group no test can split): its revert
   check (verify.py: BAD with the answer, a group's every commit, reverted against BAD):
   - not begun (or not yet in this process: a resumed run): Verify it with no boot (its
     revert built, the samples stored so far read);
   - running: Verify, the next round of boots (verify.sides), until compare's sequential
     rule (stats/stopping.decide) is final; the check has its own cap (stopping.MOST a
     side) and goes on when `--max-boots` is spent;
   - all: Stop, confirmed (in a later pass: the answers found together restore the gap);
   - no-revert (it does not apply, build or boot): Recheck, the adaptive culprit/parent
     re-check (recheck.py), the fallback; then Stop on its word;
   - part, none: Rest, the rest bisected at once with the answer reverted on every
     revision that contains it (a new posterior over the same range; a revision where
     the revert does not apply or build is untestable), its answer checked against bad
     with the earlier answers reverted; Stop, not confirmed, after PASSES passes or with
     `--max-boots` spent;
   - unclear: Stop, not confirmed; so too an answer an earlier pass reverted already;
2. a rest begun: Gap, its endpoint check on fresh boots of good and of bad with the
   earlier answers reverted (an answer's revert whose share read part by chance leaves
   no gap, and a search for a step that is not there would spend `--max-boots`); GiveUp
   when they do not differ significantly;
3. no answer: GiveUp when `--max-boots` is spent; a Reference boot when one is due
   (references.Schedule); else Measure the tests the posterior offers (posterior.batch,
   the most joint information per cost); GiveUp when no test can split the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbisect.bisect import verify
from kbisect.bisect.posterior.posterior import Answer

NOT_BEGUN = ""  # Check.kind / View.recheck: nothing done yet
PASSES = 3  # passes of the search at most: its first and two rests


@dataclass(frozen=True)
class Check:
    """The revert check of the answer as the rule sees it: its kind (NOT_BEGUN, running,
    all, part, none, unclear, no-revert) and, running, the samples it has (bad's, the
    revert's, good's)."""

    kind: str = NOT_BEGUN
    bad: tuple[float, ...] = ()
    reverted: tuple[float, ...] = ()
    good: tuple[float, ...] = ()


@dataclass(frozen=True)
class View:
    """What the rule decides on."""

    answer: Answer | None  # the answer at the confidence, or None
    culprit: str | None  # the commit the answer's checks are of (recheck.pair)
    budget: int  # boots left of --max-boots
    reference: str | None  # the endpoint whose reference boot is due, or None
    best: tuple[str, ...]  # the tests the posterior offers, best first (posterior.batch)
    check: Check = Check()
    recheck: str = NOT_BEGUN  # the culprit/parent re-check's kind (state.Recheck)
    width: int = 1  # the machines a round boots on
    reverted: tuple[str, ...] = ()  # the earlier passes' answers, reverted in this one
    gap: str = NOT_BEGUN  # a rest's endpoint check: NOT_BEGUN, or its verdict's kind


@dataclass(frozen=True)
class Measure:
    """Boot these tests (their stored samples first)."""

    commits: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Reference:
    """A reference boot of this endpoint."""

    commit: str


@dataclass(frozen=True)
class Verify:
    """The revert check of culprit: begun (sides ()), or one round of these boots."""

    culprit: str
    sides: tuple[str, ...]  # verify.REVERT: BAD with culprit reverted, BAD, GOOD; (): begin


@dataclass(frozen=True)
class Recheck:
    """The culprit/parent re-check, the revert check unmeasured (it takes its rounds)."""

    culprit: str
    answer: Answer


@dataclass(frozen=True)
class Rest:
    """Bisect the rest with culprit reverted wherever it is (its revert restored part of
    the gap, or none of it)."""

    culprit: str
    why: str


@dataclass(frozen=True)
class Gap:
    """A rest's endpoint check: fresh boots of good and of bad with the earlier answers
    reverted, as every bisection's endpoints are checked (check.endpoint_verdict)."""


@dataclass(frozen=True)
class Stop:
    """The search ends on answer: confirmed by its checks, or not."""

    answer: Answer
    why: str
    confirmed: bool = False


@dataclass(frozen=True)
class GiveUp:
    """The search ends without an answer at the confidence."""

    why: str


Action = Measure | Reference | Verify | Recheck | Rest | Gap | Stop | GiveUp

WHY = {
    "part": "the revert restores part of the gap: the rest is elsewhere",
    "none": "the revert restores nothing: it is not why bad is slow",
    "unclear": "too noisy to say how much of the gap the revert restores",
}


def decide(view: View) -> Action:
    """The next action (module docstring)."""
    if view.reverted and view.gap == NOT_BEGUN:
        return Gap()
    if view.reverted and view.gap != "regression":
        return GiveUp("the gap left is not significant: nothing left to bisect")
    if view.answer is not None and view.culprit is not None:
        return _checked(view, view.answer, view.culprit)
    if view.budget <= 0:
        return GiveUp("--max-boots spent before any answer held the confidence")
    if view.reference is not None:
        return Reference(view.reference)
    if view.best:
        return Measure(view.best, "the most information per cost")
    return GiveUp("no test can split the rest")


def _checked(view: View, answer: Answer, culprit: str) -> Action:
    """An answer holds: its revert check, and the re-check where the revert failed."""
    check = view.check
    if culprit in view.reverted:
        return Stop(answer, "the rest points at an answer already reverted")
    if check.kind == NOT_BEGUN:
        return Verify(culprit, ())
    if check.kind == "running":
        return Verify(
            culprit, tuple(verify.sides(check.good, check.bad, check.reverted, view.width))
        )
    if check.kind == "all":
        return Stop(answer, "reverting it restores the whole gap", confirmed=True)
    why = WHY.get(check.kind, check.kind)
    if check.kind in ("part", "none") and len(view.reverted) + 1 < PASSES:
        if view.budget > 0:
            return Rest(culprit, f"{why}: bisecting the rest with it reverted")
        return Stop(answer, f"{why}; --max-boots spent before the rest was bisected")
    if check.kind != "no-revert":
        return Stop(answer, why)
    if view.recheck in (NOT_BEGUN, "running"):
        return Recheck(culprit, answer)
    # a step at the answer is not yet why bad is slow (a regression fixed later is one too,
    # and its revert is what does not apply): never exit 0 without a measured revert
    return Stop(answer, f"the revert was not measured (the re-check: {view.recheck})")
