"""The revert check that ends a bisection, either method: the bad endpoint with the
answer reverted, made in kbisect's own repository as `kbisect compare --revert` makes it
(source/worktree.py `revert_onto`: a merge against its first parent; the --patch files
on top, as on every revision), measured against the bad endpoint under compare's
sequential rule (stats/stopping.py, at most its MOST boots a side; the bad endpoint's
stored samples count, so the revert is booted until it has as many, then the two take
turns, the revert first), and
the share of the good-to-bad gap the revert restores with its 95% CI
(stats/ratio.py `restored`):

- all: the interval covers 100% (or lies above it) and excludes 0: confirmed (exit 0);
- part: the interval lies between 0 and 100%: the answer explains part of the gap, the
  rest is elsewhere (not confirmed: bisecting the rest with the answer reverted is a
  later step);
- none: the interval covers 0 and not 100%: the answer is not why the bad endpoint is
  slow (a step a later commit undid), never exit 0;
- unclear: the interval covers both;
- no-revert: the revert does not apply, does not build, its boots fail, or one ran
  disturbed by other work (kept by --count-disturbed: the check has no load model): one
  line says so and the answer stands on the culprit/parent re-check (recheck.py).

The revert's samples and the bad endpoint's fresh ones are stored in the run's
verify/<culprit>/ folder; state.json's "verification" (state.Verification) records
the check after every boot, so `--resume` goes on from the samples stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kbisect.bisect import check, samples
from kbisect.bisect.state import MEASURED, Run, Verification
from kbisect.core import progress
from kbisect.core.exceptions import BenchmarkError, BootError, BuildError
from kbisect.measure import results
from kbisect.source import worktree
from kbisect.stats import means, ratio, stopping

LEVEL = 0.95  # the share's interval
# a disturbed boot (--count-disturbed keeps it) set against the bad endpoint's quiet ones
# would read the host's load as the revert's effect; the check has no load model
DISTURBED = "a boot of the revert check ran while other work took the host"


def folder(run_dir: Path, culprit: str) -> Path:
    """Where the revert check of culprit stores its samples (`reverted/`, `bad/`)."""
    return run_dir / "verify" / culprit


def measured_record(s: Mapping[str, Any]) -> bool:
    """Whether a summary's revert check measured the revert (as `measured`)."""
    return str((s.get("verification") or {}).get("kind")) in MEASURED


def kind_of(share: means.RatioCI) -> str:
    """all, part, none or unclear, from the share's interval (module docstring)."""
    if share.low > 0:
        return "all" if share.high >= 1 else "part"
    return "none" if share.high < 1 else "unclear"


def share(v: Verification) -> means.RatioCI | None:
    """The share of the gap the revert restores, from the samples the check recorded."""
    if not (v.good_tps and v.bad_tps and v.reverted_tps):
        return None
    try:
        return ratio.restored(v.good_tps, v.bad_tps, v.reverted_tps, LEVEL)
    except means.StatsError:
        return None


def record(v: Verification, bad: str) -> dict[str, Any]:
    """summary.json's "verification": the state's record, the bad endpoint and the share
    computed from the samples."""
    found = share(v)
    figures = {"share": found.ratio, "low": found.low, "high": found.high} if found else {}
    return {**v.as_dict(), "bad": bad, **figures}


def verify(
    ctx: samples.Context,
    top: Path,
    run_dir: Path,
    run: Run,
    save: Callable[[], None],
) -> Verification:
    """The revert check of run.verification's culprit (begun, or resumed from its
    samples); the result in run.verification, saved after every boot."""
    v = run.verification
    assert v is not None
    if v.kind != "running":
        return v
    culprit, opts = v.culprit, run.options
    out = folder(run_dir, culprit)
    progress.step(f"verifying: reverting {culprit[:12]} on bad {run.bad[:12]}")
    try:
        v.reverted = worktree.revert_onto(top, run.bad, culprit)
        reverted = check.revision(ctx, top, v.reverted, opts, out / "reverted")
        bad = check.revision(ctx, top, run.bad, opts, out / "bad")
    except worktree.RevertConflict:
        return _cannot(v, f"the revert of {culprit[:12]} does not apply on bad {run.bad[:12]}")
    except BuildError as exc:
        return _cannot(v, f"BAD with {culprit[:12]} reverted does not build: {exc}")
    v.good_tps = samples.stored(samples.commit_dir(run.store, run.good))[0]
    stored_bad = samples.stored(samples.commit_dir(run.store, run.bad))[0]
    rule = stopping.Rule.upto(stopping.MOST)

    def counted() -> tuple[list[float], list[float]]:
        return stored_bad + samples.stored(bad.out)[0], samples.stored(reverted.out)[0]

    looked = -1
    while True:
        v.bad_tps, v.reverted_tps = counted()
        n = min(len(v.bad_tps), len(v.reverted_tps))
        if n != looked:
            looked = n
            stop = stopping.decide(v.bad_tps, v.reverted_tps, rule)
            if stop.final:
                break
        which = reverted if len(v.reverted_tps) <= len(v.bad_tps) else bad
        try:
            samples.draw(ctx, which)
        except (BootError, BenchmarkError) as exc:
            return _cannot(v, f"a boot of the revert check failed: {exc}")
        if results.load_samples(which.out)[-1].disturbed:  # counted: --count-disturbed
            return _cannot(v, DISTURBED)
        v.bad_tps, v.reverted_tps = counted()
        progress.step(_boot_line(v, which is reverted))
        save()
    v.stop = stopping.reason(stop, rule)
    found = share(v)
    v.kind = "unclear" if found is None else kind_of(found)
    save()
    progress.step(line(record(v, run.bad)))
    return v


def _cannot(v: Verification, why: str) -> Verification:
    v.kind, v.error = "no-revert", why
    progress.step(f"{why}: the answer stands on the culprit/parent re-check")
    return v


def _boot_line(v: Verification, of_revert: bool) -> str:
    """One verification boot: what was measured, and the share restored so far."""
    assert v.reverted_tps is not None and v.bad_tps is not None
    what = (
        f"revert {v.reverted_tps[-1]:.1f} tps (n={len(v.reverted_tps)})"
        if of_revert
        else f"bad {v.bad_tps[-1]:.1f} tps (n={len(v.bad_tps)})"
    )
    found = share(v)
    so_far = (
        f"restores {_pct(found.ratio)} of the gap so far [{_pct(found.low)}, {_pct(found.high)}]"
        if found
        else "the share restored needs 2 boots of the revert"
    )
    return f"verify: {what}; {so_far}"


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def figure(rec: Mapping[str, Any]) -> str:
    """`reverting X on bad B restores N% of the good-to-bad gap [lo, hi] (...)`."""
    return (
        f"reverting {rec['culprit'][:12]} on bad {rec['bad'][:12]} restores "
        f"{_pct(rec['share'])} of the good-to-bad gap "
        f"[{_pct(rec['low'])}, {_pct(rec['high'])}] (95% CI, "
        f"{len(rec['reverted_tps'])} boots of the revert, {len(rec['bad_tps'])} of bad)"
    )


def line(rec: Mapping[str, Any]) -> str:
    """The verification in maintainers' words, one line: the figure and what it means."""
    x = rec["culprit"][:12]
    if rec["kind"] == "no-revert":
        return f"{rec['error']}: the answer stands on the culprit/parent re-check"
    if "share" not in rec:
        return f"the revert check of {x} gave no figure: not confirmed"
    return figure(rec) + {
        "all": f": {x} is why bad is slow, confirmed",
        "part": f": {x} explains {_pct(rec['share'])}; the rest is elsewhere (not confirmed; "
        "bisecting the rest with it reverted is not done yet)",
        "none": f": {x} is not why bad is slow (a step a later commit undid?), not confirmed",
        "unclear": ": too noisy to say how much of the gap it explains, not confirmed",
    }.get(rec["kind"], ": not finished")
