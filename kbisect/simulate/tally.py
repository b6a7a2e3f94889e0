"""What the simulation counts of each setting and method (matrix.py): the answers, right
and wrong, the boots by phase, the rounds of a pool, and the stated probabilities binned
against how often they were right; and when an answer's claim is true (claim_right)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kbisect.bisect.posterior.story import Change
from kbisect.simulate import histories, methods

BINS = ((0.95, 0.99), (0.99, 0.999), (0.999, 1.0 + 1e-9))


@dataclass
class Tally:
    runs: int = 0
    refused: int = 0
    boots_bisect: int = 0
    boots: int = 0
    builds: int = 0
    wrong: int = 0
    ranges: int = 0
    warned: int = 0
    confirmed: int = 0
    bins: dict[int, list[int]] = field(default_factory=dict)  # bin -> [answers, right]
    first_bins: dict[int, list[int]] = field(default_factory=dict)  # the same at the stop
    # the story's named changes: each one's stated P, right when it is a true change in its
    # direction (a regression, or a fix): the whole range's claims, not git's single one
    story_bins: dict[int, list[int]] = field(default_factory=dict)
    refused_boots: int = 0
    seconds: float = 0.0
    undecided: int = 0
    wrong_single: int = 0  # a single culprit named that is not a true culprit
    wrong_confirmed: int = 0  # exit 0 on a claim that is not true (claim_right)
    exit_ok: int = 0  # exit 0 (Result.confirmed)
    boots_recheck: int = 0
    boots_after: int = 0  # search boots after the first stop (the story's tests, probes)
    boots_story: int = 0  # test boots the search spent on the story ...
    boots_probes: int = 0  # ... and on probes of untested stretches
    boots_all: int = 0  # every boot, refused runs' included
    # change kind -> [runs with such changes, runs whose answer names every one of them]
    reported: dict[str, list[int]] = field(default_factory=dict)
    rounds: int = 0  # a pool's rounds of answered runs (wall-clock: one boot's time each)
    rounds_all: int = 0  # refused runs' included
    # the revert check (the bad endpoint with the answer reverted): its boots and builds,
    # apart from the search's; the runs where a revert restored all of the gap; with
    # several culprits, [runs, runs naming every culprit, each one's revert measured
    # restoring the gap or part of it]
    boots_verify: int = 0
    builds_verify: int = 0
    verified_all: int = 0
    named_verified: list[int] = field(default_factory=lambda: [0, 0])
    checks: dict[str, int] = field(default_factory=dict)  # the revert checks by kind

    def add(self, r: methods.Result, history: histories.History) -> None:
        self.runs += 1
        self.boots_all += r.boots
        self.rounds_all += r.rounds
        self.exit_ok += r.confirmed
        truth = history.truth()
        if r.kind == "refused":
            self.refused += 1
            self.refused_boots += r.boots
            return
        right = bool(set(r.candidates) & truth)
        self.undecided += r.kind == "undecided"
        self.boots += r.boots
        self.rounds += r.rounds
        self.boots_bisect += r.boots_bisect
        self.boots_recheck += r.recheck_boots
        self.boots_after += r.after_first
        self.boots_story += (r.tested or {}).get("story", 0)
        self.boots_probes += sum((r.tested or {}).get(k, 0) for k in ("probe", "check"))
        self.builds += r.builds
        self.boots_verify += r.verify_boots
        self.builds_verify += r.verify_builds
        verified = r.verified or {}
        self.verified_all += "all" in verified.values()
        for kind in verified.values():
            self.checks[kind] = self.checks.get(kind, 0) + 1
        self.wrong += not right
        single_wrong = r.kind == "culprit" and not right
        self.wrong_single += single_wrong
        self.wrong_confirmed += r.confirmed and not claim_right(r, history)
        self.ranges += right and len(r.candidates) > 1
        self.warned += r.warned
        self.confirmed += r.recheck == "confirmed"
        if r.p is not None and len(r.candidates) == 1:
            _binned(self.bins, r.p, right)
        if r.first is not None:
            _binned(self.first_bins, r.first[1], r.first[0] in truth)
        for step in r.story.changes if r.story else ():
            _binned(self.story_bins, step.p, step_right(step, history))
        if len(truth) > 1:
            self.named_verified[0] += 1
            named = r.named()
            self.named_verified[1] += all(
                c in named and verified.get(c) in ("all", "part") for c in truth
            )
        if len(history.culprits) > 1:
            named = r.named()
            for kind in sorted(set(history.kinds().values())):
                changes = [c for c, k in history.kinds().items() if k == kind]
                entry = self.reported.setdefault(kind, [0, 0])
                entry[0] += 1
                entry[1] += all(c in named for c in changes)

    @property
    def answered(self) -> int:
        return self.runs - self.refused

    @property
    def no_answer(self) -> int:
        """Refused, undecided or not confirmed: every run that does not exit 0."""
        return self.runs - self.exit_ok


def step_right(step: Change, history: histories.History) -> bool:
    """Whether a story's named change is a true one, in its direction: exactly one of its
    members is a true change, a regression named with a ratio below 1, a fix above."""
    effects = dict(zip(history.culprits, history.effects, strict=True))
    true = [c for c in set(step.members) if c in effects]
    if len(true) != 1:
        return False
    return (effects[true[0]] > 0) == (step.ratio < 1.0)


def claim_right(r: methods.Result, history: histories.History) -> bool:
    """Whether what exit 0 claims is true: a single step's story, that its commit is a
    culprit; a story of several changes, that each named change is a true one in its
    direction (a regression, or a fix) and one of them a culprit that reaches the bad
    endpoint. (Git's single first bad commit, r.candidates, is not the claim when the
    story has several changes: the report gives it with its caveat.)"""
    if r.story is None or r.story.kind != "several" or not r.story.changes:
        return bool(set(r.candidates) & history.truth())
    steps = r.story.changes
    if not all(step_right(step, history) for step in steps):
        return False
    named = {c for step in steps for c in step.members}
    return bool(named & history.truth())


def _binned(bins: dict[int, list[int]], p: float, right: bool) -> None:
    for k, (low, high) in enumerate(BINS):
        if low <= p < high:
            entry = bins.setdefault(k, [0, 0])
            entry[0] += 1
            entry[1] += right
