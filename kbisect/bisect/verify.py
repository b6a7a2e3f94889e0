"""The revert check that ends a bisection, either method: the bad endpoint with the
answer reverted, made in kbisect's own repository as `kbisect compare --revert` makes it
(source/worktree.py `revert_onto`: a merge against its first parent; the --patch files
on top, as on every revision), measured against the bad endpoint under compare's
sequential rule (stats/stopping.py, at most its MOST boots a side, on the ratio robust to
an outlier boot; the bad endpoint's stored samples count, so the revert is booted until it
has as many, then the two take turns, the revert first), and the share of the good-to-bad
gap the revert restores with its 95% CI (stats/ratio.py `restored`, each side's level
robust to an outlier boot, the three fitted together):

- all: the interval covers 100% (or lies above it) and excludes 0, at PART_LEVEL (99%)
  too (else the check goes on, to at most MOST boots a side, and then says unclear), and
  bad is significantly slower than good (in a rest, the gap left may be noise):
  confirmed (exit 0);
- part: the interval lies between 0 and 100%: the answer explains part of the gap, the
  rest is elsewhere (the posterior search bisects the rest with it reverted: rule.Rest).
  Before part is said, good is booted until it has as many boots as the revert (the
  endpoint check may have stopped on a few good boots that made the gap look wide), and
  the check goes on while the interval at PART_LEVEL (99%) still covers 100%, to at most
  MOST boots a side;
- part or none, the check ends as soon as the interval at PART_LEVEL lies below half the
  gap (SHORT; whatever compare's rule says: either sends the search after the rest);
- none: the interval covers 0 and not 100%, or there is no gap:
  the answer is not why the bad endpoint is slow (a step a later commit undid), never
  exit 0 on it (the posterior search bisects the rest with it reverted);
- unclear: the interval covers both;
- no-revert: the revert does not apply, does not build, its boots fail, or one ran
  disturbed by other work (kept by --count-disturbed: the check has no load model): one
  line says so, the culprit/parent re-check (recheck.py) says whether the answer is a
  step at all, and the answer is not confirmed (exit 1): a regression a later commit
  undid is a step too, and its revert is what does not apply.

In a rest (an earlier answer reverted everywhere), bad's samples are the check's own: the
earlier check's samples of the revert chose the rest because they looked slow, and would
read any revert as a help.

The check reaches builds and boots through a Bench (posterior/bench.py: the driver's Store
for either method, keeping the revert's samples and the bad endpoint's fresh ones in the
run's verify/<culprit>/ folder; the simulator's in its modelled world). Its steps are
begin() (the revert built, the samples so far read), sides() (the next round, [] once
the sequential rule is final) and take() (one round); the posterior search takes them
as its rule's Verify actions (bisect/rule.py), verify() takes them in turn for the git
method. state.json's "verification" (state.Verification) records the check after every
round, so `--resume` goes on from the samples stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kbisect.bisect.posterior.bench import Bench
from kbisect.bisect.state import MEASURED, Run, Verification
from kbisect.core import progress
from kbisect.stats import means, ratio, stopping

UNVERIFIED = (
    "not confirmed; the culprit/parent re-check says whether it is a step, not whether it "
    "is why bad is slow"
)
LEVEL = 0.95  # the share's interval
# "part" sends the search after the rest of the gap: claimed only where the share's
# interval at this level lies below 100% too (else the check goes on to its MOST a side)
PART_LEVEL = 0.99
SHORT = 0.5  # a share whose PART_LEVEL interval lies below this ends the check (_short)
RULE = stopping.Rule.upto(stopping.MOST)  # compare's sequential rule, at most MOST a side
REVERT, BAD, GOOD = "revert", "bad", "good"  # the sides of a check's boot


def measured_record(s: Mapping[str, Any]) -> bool:
    """Whether a summary's revert check measured the revert (as `measured`)."""
    return str((s.get("verification") or {}).get("kind")) in MEASURED


def kind_of(share: means.RatioCI, strict: means.RatioCI, gap: bool = True) -> str:
    """all, part, none or unclear, from the share's interval at LEVEL and at PART_LEVEL
    (strict; module docstring): all needs the strict interval above 0 too (exit 0 on a
    revert that restores nothing is the error that must stay rarest); all or part only
    where there is a gap (bad significantly slower than good: in a rest, the gap left may
    be noise, and any revert would seem to fill it)."""
    if share.low > 0 and gap:
        if share.high < 1:
            return "part"
        return "all" if strict.low > 0 else "unclear"
    return "none" if share.high < 1 else "unclear"


def shares(
    good: Sequence[float], bad: Sequence[float], reverted: Sequence[float]
) -> tuple[means.RatioCI, means.RatioCI] | None:
    """The share of the gap the revert restores at LEVEL and at PART_LEVEL, each side's
    level robust to an outlier boot (ratio.restored: one fit); None without a figure."""
    try:
        found = ratio.restored(good, bad, reverted, LEVEL, robust=True)
    except means.StatsError:
        return None
    return found, ratio.at(found, PART_LEVEL)


def share(v: Verification) -> means.RatioCI | None:
    """The share of the gap the revert restores, from the samples the check recorded."""
    found = shares(v.good_tps or [], v.bad_tps or [], v.reverted_tps or [])
    return found[0] if found else None


def _decided(
    found: tuple[means.RatioCI, means.RatioCI] | None,
    good: Sequence[float],
    bad: Sequence[float],
    reverted: Sequence[float],
) -> bool:
    """Whether the check is over, the share so far `found` (shares()): compare's
    sequential rule final on bad against the revert (robust to an outlier boot), or MOST
    boots a side; a share that reads part (_part) or is in doubt (_doubt) with good as
    many boots as the revert (the endpoint check may have stopped on few good boots that
    made the gap look wide); and the share no longer in doubt, or MOST boots a side."""
    n = min(len(bad), len(reverted))
    if (_part(found) or _doubt(found)) and _wants_good(good, reverted):
        return False
    if n < RULE.most and _doubt(found):
        return False
    if _short(found):
        return True
    return n >= RULE.most or stopping.decide(bad, reverted, RULE, interval=ratio.ROBUST).final


def _short(found: tuple[means.RatioCI, means.RatioCI] | None) -> bool:
    """The share far short of the whole gap, its PART_LEVEL interval below SHORT: part or
    none, either sends the search after the rest (rule.Rest), so the check ends there (a
    revert with no effect would else boot until compare's rule calls "no difference", up
    to MOST a side). Only far short: a check that ends as soon as the interval lies below
    100% reads part or none on a revert that restores all more often (in the simulator,
    2.7% of design-point runs without an answer became 4.3%)."""
    return found is not None and found[1].high < SHORT


def _gap(good: Sequence[float], bad: Sequence[float]) -> bool:
    """Whether bad is significantly slower than good (the ratio robust to an outlier boot,
    at LEVEL): a rest's gap left may be noise, and a share of it means nothing."""
    try:
        return ratio.ratio_ci(good, bad, LEVEL, robust=True).high < 1
    except means.StatsError:
        return False


def _doubt(found: tuple[means.RatioCI, means.RatioCI] | None) -> bool:
    """The share not yet clear at both levels: part at LEVEL but the PART_LEVEL interval
    reaches 100%, or all at LEVEL but the PART_LEVEL interval reaches 0."""
    if found is None or found[0].low <= 0:
        return False
    share, strict = found
    return strict.high >= 1 if share.high < 1 else strict.low <= 0


def _part(found: tuple[means.RatioCI, means.RatioCI] | None) -> bool:
    """The share reads part at LEVEL: its interval between 0 and 100%."""
    return found is not None and found[0].low > 0 and found[0].high < 1


def _wants_good(good: Sequence[float], reverted: Sequence[float]) -> bool:
    return len(good) < min(len(reverted), RULE.most)


def record(v: Verification, bad: str) -> dict[str, Any]:
    """summary.json's "verification": the state's record, the bad endpoint and the share
    computed from the samples."""
    found = share(v)
    figures = {"share": found.ratio, "low": found.low, "high": found.high} if found else {}
    return {**v.as_dict(), "bad": bad, **figures}


def sides(
    good: Sequence[float], bad: Sequence[float], reverted: Sequence[float], width: int
) -> list[str]:
    """The next round of a running check (REVERT, BAD or GOOD boots), or [] once it is
    decided (_decided). Good is booted while a share that reads part has fewer good
    boots than _decided asks; else the revert and bad take turns, the shorter first (the
    revert first when even: bad's stored samples count, so the revert catches up first),
    each round at least until the shorter side has one boot more (the rule looks once per
    count of the shorter side), on `width` machines at once."""
    found = shares(good, bad, reverted)
    if _decided(found, good, bad, reverted):
        return []
    if (_part(found) or _doubt(found)) and _wants_good(good, reverted):
        return [GOOD] * max(1, width)
    a, b = len(reverted), len(bad)
    n, out = min(a, b), list[str]()
    while len(out) < width or min(a, b) <= n:
        side = a <= b
        out.append(REVERT if side else BAD)
        a, b = a + side, b + (not side)
    return out


def begin(bench: Bench, v: Verification, bad: str) -> None:
    """The check of v.culprit begun (or resumed): its revert built, the samples stored so
    far read; no-revert when the revert does not apply or build."""
    if bench.say():
        what = f"{len(v.members)} commits of the range" if v.members else v.culprit[:12]
        progress.step(f"verifying: reverting {what} on bad {bad[:12]}")
    if (why := bench.revert(v.culprit, v.members or ())) is not None:
        _cannot(bench, v, why)
    else:
        _read(bench, v, bad)


def take(bench: Bench, v: Verification, round_: list[str], bad: str, clock: progress.Clock) -> None:
    """One round of the check's boots (sides()), counted on the check's clock (made once
    its revert is built); a failed or disturbed boot ends it as no-revert, else the share
    so far is said after every boot, with the time the boots left at most take, and the
    kind settled once the sequential rule is final."""
    got = bench.verify_round(v.culprit, round_)
    clock.done += len(round_)
    if failed := next((x for x in got if isinstance(x, BaseException)), None):
        v.good_tps, v.bad_tps, v.reverted_tps = bench.verify_tps(v.culprit)
        _cannot(bench, v, f"a boot of the revert check failed: {failed}")
    else:
        _read(bench, v, bad, round_, clock)


def verify(bench: Bench, run: Run, save: Callable[[], None]) -> Verification:
    """The revert check of run.verification's culprit (begun, or resumed from its
    samples), round after round until it is decided; saved after every round."""
    v = run.verification
    assert v is not None
    if v.kind == "running":
        begin(bench, v, run.bad)
    clock = progress.Clock()
    while v.kind == "running":
        got = (v.good_tps or [], v.bad_tps or [], v.reverted_tps or [])
        take(bench, v, sides(*got, bench.width()), run.bad, clock)
        save()
    return v


def _read(
    bench: Bench,
    v: Verification,
    bad: str,
    booted: Sequence[str] = (),
    clock: progress.Clock | None = None,
) -> None:
    """The check's samples into v, a line for each boot just taken (booted: their sides),
    and its kind once the sequential rule is final."""
    v.good_tps, v.bad_tps, v.reverted_tps = bench.verify_tps(v.culprit)
    found = shares(v.good_tps, v.bad_tps, v.reverted_tps)
    final = _decided(found, v.good_tps, v.bad_tps, v.reverted_tps)
    if bench.say():
        for side in booted:
            progress.step(_boot_line(v, side, final, found[0] if found else None, clock))
    if final:
        stop = stopping.decide(v.bad_tps, v.reverted_tps, RULE, interval=ratio.ROBUST)
        v.stop = stopping.reason(stop, RULE)
        if _short(found) and not stop.final:
            v.stop = f"stopped: the share's {PART_LEVEL:.0%} interval lies below {SHORT:.0%}"
        v.kind = "unclear" if found is None else kind_of(*found, _gap(v.good_tps, v.bad_tps))
        if bench.say():
            progress.step(line(record(v, bad)))


def _cannot(bench: Bench, v: Verification, why: str) -> None:
    v.kind, v.error = "no-revert", why
    if bench.say():
        progress.step(f"{why}: {UNVERIFIED}")


def _boot_line(
    v: Verification,
    side: str,
    final: bool,
    found: means.RatioCI | None,
    clock: progress.Clock | None,
) -> str:
    """One verification boot: what was measured, the share restored so far, what the
    sequential rule now expects, and the boots left at most (MOST a side, good's
    included) with the time they take."""
    assert v.reverted_tps is not None and v.bad_tps is not None
    tps = {REVERT: v.reverted_tps, BAD: v.bad_tps, GOOD: v.good_tps or []}[side]
    what = f"{side} {tps[-1]:.1f} tps (n={len(tps)})"
    so_far = (
        f"restores {_pct(found.ratio)} of the gap so far [{_pct(found.low)}, {_pct(found.high)}]"
        if found
        else "the share restored needs 2 boots of the revert"
    )
    n = min(len(v.bad_tps), len(v.reverted_tps))
    if final:
        return f"verify: {what}; {so_far}; the rule is decided"
    most = sum(max(0, RULE.most - len(x)) for x in (v.bad_tps, v.reverted_tps, v.good_tps or []))
    when = clock.left(most) if clock is not None else ""
    return (
        f"verify: {what}; {so_far}; the rule looks again at {max(n + 1, RULE.least)} "
        f"boots a side (at most {RULE.most}: {most} boots{when and ', '}{when})"
    )


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def figure(rec: Mapping[str, Any]) -> str:
    """`reverting X on bad B restores N% of the good-to-bad gap [lo, hi] (...)`; in a
    rest, `reverting Y on bad B (X reverted) restores N% of the gap left [...]`."""
    earlier = ", ".join(c[:12] for c in rec.get("without") or [])
    return (
        f"reverting {rec['culprit'][:12]} on bad {rec['bad'][:12]}"
        f"{f' ({earlier} reverted)' if earlier else ''} restores "
        f"{_pct(rec['share'])} of {'the gap left' if earlier else 'the good-to-bad gap'} "
        f"[{_pct(rec['low'])}, {_pct(rec['high'])}] (95% CI, "
        f"{len(rec['reverted_tps'])} boots of the revert, {len(rec['bad_tps'])} of bad)"
    )


def line(rec: Mapping[str, Any]) -> str:
    """The verification in maintainers' words, one line: the figure and what it means."""
    x = rec["culprit"][:12]
    if rec["kind"] == "no-revert":
        return f"{rec['error']}: {UNVERIFIED}"
    if "share" not in rec:
        return f"the revert check of {x} gave no figure: not confirmed"
    rest = "explains the rest" if rec.get("without") else "is why bad is slow"
    return figure(rec) + {
        "all": f": {x} {rest}, confirmed",
        "part": f": {x} explains {_pct(rec['share'])}; the rest is elsewhere",
        "none": f": {x} is not why bad is slow (a step a later commit undid?), not confirmed",
        "unclear": ": too noisy to say how much of the gap it explains, not confirmed",
    }.get(rec["kind"], ": not finished")


def lines(s: Mapping[str, Any]) -> list[str]:
    """Every revert check of a summary in maintainers' words, one line each: the earlier
    passes' (each answer whose revert left a rest), then the last answer's, or that the
    rest named no commit."""
    passes = s.get("passes") or []
    last = [line(s["verification"])] if s.get("verification") else []
    if passes and not last:
        gone = ", ".join(p["culprit"][:12] for p in passes)
        last = [f"bisecting the rest with {gone} reverted named no commit at the confidence"]
        if passes[-1].get("gap", "regression") != "regression":
            last = [f"with {gone} reverted, bad no longer differs significantly from good"]
    return [line(p) for p in passes] + last
