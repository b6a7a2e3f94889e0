"""`kbisect compare --boots auto`: the rule a plan records, the loop that boots its slots
round by round and looks after each (the stopping rule itself is stats/stopping.py), and
the verdict at the rule's level. run.py boots through `play`, one target (a round is a
pair) and a pool alike; scripts/simulate-sequential and scripts/simulate-pool play the
same loop with drawn samples.

The plan holds the order of the most boots (`max_boots` a side, interleaved as a fixed
compare's); the run stops at the first look that settles the ratio. A resumed run looks
at what it has before its next boot, so it stops where the rule says and boots no slot
the rule would not have.

One target looks after each pair whenever the shorter side has grown. Over a pool the
machines boot at once, so the rule looks once per round (`rule.at`):
a round is one more pair on every machine (the plan's pairs alternate AB and BA within
a machine, schedule.order, so every second round completes an ABBA block on each
machine); each machine has then measured both sides equally often, which is what the
machine fixed effect needs to stay out of the ratio. The look is the blocked interval
(machines.interval) at the level looks.py gives K looks, K the rounds from the first
with `least` boots a side (`over_pool`); the plan records them (`look_at`).

A single-target run's noise prior (stats/prior.py) is chosen once, after its first pair
(run.py `_choose_prior`: the machine is known only from a boot), and recorded in the
plan ("noise_prior", with the `least` it allows); `rule_of` reads it back, so a resumed
run and the report (`recorded_interval`) use the same one. A pool's plan has none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kbisect.compare import machines
from kbisect.stats import means, ratio, stopping
from kbisect.stats import prior as priors

AUTO = "auto"
FLAG = "--max-boots"  # what a sequential run's warnings tell the user to raise


def plan_fields(rule: stopping.Rule | None) -> dict[str, Any]:
    """What plan.json records of the rule (nothing for a fixed count)."""
    if rule is None:
        return {}
    return {
        "boots": AUTO,
        "max_boots": rule.most,
        "least": rule.least,
        **({"look_at": list(rule.at)} if rule.at else {}),
        **({"noise_prior": rule.prior_dict()} if rule.prior or rule.no_prior else {}),
    }


def asked(rule: stopping.Rule, mode: str) -> tuple[stopping.Rule, bool]:
    """A new single-target plan's rule, and whether its noise prior is still to be
    chosen (auto: after the first pair, run.py); with --noise-prior off, none."""
    if mode == AUTO:
        return rule, True
    return dataclasses.replace(rule, no_prior="turned off (--noise-prior off)"), False


def prior_of(recorded: Any) -> tuple[priors.Prior | None, str]:
    """A plan's or summary's "noise_prior": the prior, or why none was used ("" when
    the run did not ask: an older run, a pool)."""
    if not isinstance(recorded, Mapping):
        return None, ""
    if "none" in recorded:
        return None, str(recorded["none"])
    return priors.Prior.from_dict(recorded), ""


def recorded_interval(
    summary: Mapping[str, Any], a: Sequence[float], b: Sequence[float]
) -> means.Interval | None:
    """The interval a finished run's verdict used when its summary records a noise prior
    (None: ratio_ci's): the guard replayed on the same boots drops it where the run did."""
    seq = summary.get("sequential")
    if not isinstance(seq, Mapping):
        return None
    prior, _ = prior_of(seq.get("noise_prior"))
    return None if prior is None else stopping.with_prior(prior, a, b, int(seq["least"]))


def rule_of(plan: Mapping[str, Any]) -> stopping.Rule | None:
    """The plan's rule, None for a fixed count."""
    if plan.get("boots") != AUTO:
        return None
    prior, why = prior_of(plan.get("noise_prior"))
    return stopping.Rule(
        float(plan.get("min_effect", 0.02)),
        int(plan["least"]),
        int(plan["max_boots"]),
        at=tuple(int(n) for n in plan.get("look_at") or ()),
        prior=prior,
        no_prior=why,
    )


def rounds(where: Sequence[str]) -> list[int]:
    """The boots a side a pool's plan has dealt after each of its rounds (a round: every
    machine its next pair; `where` is each slot's machine, two slots a pair, the rounds
    one after another as schedule.order lays them out)."""
    seen: dict[str, int] = {}
    ends: dict[int, int] = {}
    for i in range(0, len(where), 2):
        k = seen[where[i]] = seen.get(where[i], 0) + 1
        ends[k] = i // 2 + 1
    return [ends[k] for k in sorted(ends)]


def over_pool(rule: stopping.Rule, where: Sequence[str]) -> stopping.Rule:
    """The rule over a pool's plan: a look after each round with `least` boots a side or
    more (the last round's is the plan's end, `most`)."""
    at = tuple(n for n in rounds(where) if n >= rule.least)
    pooled = dataclasses.replace(rule, at=at)
    pooled.check()
    return pooled


Looked = tuple[Sequence[float], Sequence[float], machines.Interval | None]


def play(
    rule: stopping.Rule | None,
    ends: Sequence[int],
    start: int,
    take: Callable[[int, int], object],
    counted: Callable[[], Looked],
) -> tuple[stopping.Stop | None, int]:
    """Boot the plan's rounds (`ends`: the slot each round ends at; `take(lo, hi)` boots
    the slots lo..hi-1 still to take) from slot `start` (the first not settled). With a
    rule, look after each round (`counted()`: each side's tps that count, in the stored
    order, and the blocked interval for them, or None on one machine), whenever the
    shorter side has grown, and at the plan's end; a pool's rule looks after the rounds
    of `rule.at` only, each the look of its index. Stop at the first final look; a run
    resumed at a look's round end looks first. The last look (None without a rule) and
    the slots the run got to."""
    if rule is None:
        take(start, ends[-1])
        return None, ends[-1]
    marks = [2 * n for n in rule.at] or list(ends)
    looked = -1

    def look(end: int) -> stopping.Stop | None:
        nonlocal looked
        a, b, interval = counted()
        last = end >= marks[-1]
        if min(len(a), len(b)) == looked and not last and not rule.at:
            return None
        looked = min(len(a), len(b))
        k = marks.index(end) + 1 if rule.at else None
        return stopping.decide(a, b, rule, last=last, interval=interval, look=k)

    stop = look(start) if start in marks else None
    lo = start
    for end in marks:
        if end <= start or (stop is not None and stop.final):
            continue
        take(lo, end)
        lo = end
        stop = look(end) or stop
    if stop is None or not stop.final:  # a plan done before this run (nothing to take)
        a, b, interval = counted()
        stop = stopping.decide(a, b, rule, last=True, interval=interval)
    return stop, lo


def verdict(
    a: Sequence[float],
    b: Sequence[float],
    *,
    min_effect: float,
    confidence: float,
    planned: int | None,
    most: int | None,
    interval: machines.Interval | None = None,
    blocks: tuple[Sequence[str], Sequence[str]] | None = None,
) -> means.Verdict:
    """A compare's verdict at `confidence`: a fixed one's (`planned` boots a side), or a
    sequential one's (at most `most` boots a side: the few-boots warning is for a run
    that could not have had more, and the warnings point at --max-boots); no warning asks
    for boots once the interval settles the question (ratio.settles). `interval`:
    a pool's, within machines (machines.py); None, the single-target one; `blocks`, a
    pool's machines of each side's boots (machines.blocks), for warnings within them."""
    return ratio.verdict(
        a,
        b,
        min_effect=min_effect,
        confidence=confidence,
        planned=planned if most is None else most,
        boots_flag="--boots" if most is None else FLAG,
        interval=interval,
        blocks=blocks,
        settled_asks=False,
    )
