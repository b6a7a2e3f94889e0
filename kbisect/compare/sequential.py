"""`kbisect compare --boots auto`: the rule a plan records, the loop that boots its slots
and looks after each complete pair (the stopping rule itself is stats/stopping.py), and
the verdict at the rule's level. run.py boots through `play`; scripts/simulate-sequential
plays the same loop with drawn samples.

The plan holds the order of the most boots (`max_boots` a side, interleaved as a fixed
compare's); the run stops at the first look that settles the ratio. A resumed run looks
at what it has before its next boot, so it stops where the rule says and boots no slot
the rule would not have.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kbisect.compare import machines
from kbisect.stats import means, stopping

AUTO = "auto"
FLAG = "--max-boots"  # what a sequential run's warnings tell the user to raise


def plan_fields(rule: stopping.Rule | None) -> dict[str, Any]:
    """What plan.json records of the rule (nothing for a fixed count)."""
    if rule is None:
        return {}
    return {"boots": AUTO, "max_boots": rule.most, "least": rule.least}


def rule_of(plan: Mapping[str, Any]) -> stopping.Rule | None:
    """The plan's rule, None for a fixed count."""
    if plan.get("boots") != AUTO:
        return None
    return stopping.Rule(
        float(plan.get("min_effect", 0.02)), int(plan["least"]), int(plan["max_boots"])
    )


def play(
    order: Sequence[str],
    start: int,
    take: Callable[[int], object],
    counted: Callable[[], tuple[Sequence[float], Sequence[float]]],
    rule: stopping.Rule | None,
) -> tuple[stopping.Stop | None, int]:
    """Boot slots start.. of `order` (`take(i)` boots slot i; `counted()` is the tps of
    each side's boots that count so far). With a rule, look after each complete pair
    whenever the shorter side has grown, and at the plan's end, and stop at the first
    final look; a run resumed at a pair's end looks first. The last look (None without
    a rule) and the slots the run got to."""
    if rule is None:
        for i in range(start, len(order)):
            take(i)
        return None, len(order)
    looked = -1

    def look(i: int) -> stopping.Stop | None:
        nonlocal looked
        a, b = counted()
        last = i >= len(order)
        if min(len(a), len(b)) == looked and not last:
            return None
        looked = min(len(a), len(b))
        return stopping.decide(a, b, rule, last=last)

    stop = look(start) if start > 0 and start % 2 == 0 else None
    i = start
    while i < len(order) and not (stop and stop.final):
        take(i)
        i += 1
        if i % 2 == 0 or i == len(order):
            stop = look(i) or stop
    if stop is None or not stop.final:  # a plan done before this run (nothing to take)
        stop = stopping.decide(*counted(), rule, last=True)
    return stop, i


def verdict(
    a: Sequence[float],
    b: Sequence[float],
    *,
    min_effect: float,
    confidence: float,
    planned: int | None,
    most: int | None,
    interval: machines.Interval | None = None,
) -> means.Verdict:
    """A compare's verdict at `confidence`: a fixed one's (`planned` boots a side), or a
    sequential one's (at most `most` boots a side: the few-boots warning is for a run
    that could not have had more, and the warnings point at --max-boots). `interval`:
    a pool's, within machines (machines.py); None, the single-target one."""
    if most is None:
        return means.verdict(
            a, b, min_effect=min_effect, confidence=confidence, planned=planned, interval=interval
        )
    return means.verdict(
        a,
        b,
        min_effect=min_effect,
        confidence=confidence,
        planned=most,
        boots_flag=FLAG,
        interval=interval,
    )
