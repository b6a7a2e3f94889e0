"""The two A/B checks around a bisection, both with stats.verdict on interleaved samples:

- before: the endpoints must differ significantly, good better than bad; the threshold
  is then the one given (which must lie between their means) or their geometric mean;
- after: the first bad commit against its parent, with fresh samples (the bisection's
  own samples chose the commit, so they would flatter it).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from kbisect.bisect import samples
from kbisect.bisect.git import step
from kbisect.bisect.git.log import Outcome
from kbisect.bisect.git.run import SLOT
from kbisect.bisect.state import Options
from kbisect.core import progress
from kbisect.core.exceptions import BenchmarkError, BootError, UserError
from kbisect.source import git, worktree
from kbisect.stats import looks, means
from kbisect.targets.base import Kernel

ENDPOINT_ALPHA = 0.05  # stats.verdict's, as `kbisect compare` uses it


class BadEndpoints(UserError):
    """The good and bad revisions cannot be bisected between."""


def revision(
    ctx: samples.Context, top: Path, commit: str, opts: Options, out: Path
) -> samples.Revision:
    """Build commit in the driver's worktree (in place, cached per commit)."""
    wt = worktree.checkout(top, commit, SLOT)
    built = step.build_here(wt, ctx.target.arch, opts.configs, opts.base_config)
    return samples.Revision(commit, Kernel(built.image, built.manifest), out)


def endpoint_confidence(runs_min: int, runs_max: int) -> float:
    """The level of stats.verdict's interval at each look of the endpoint check. Looking
    again after every extra pair inflates the false-alarm rate, so compare's two-sided 5%
    is split over the possible looks (looks.py: the verdict is a two-sided claim)."""
    return looks.level(ENDPOINT_ALPHA, runs_min, runs_max, one_sided=False)


def measure_endpoints(
    ctx: samples.Context, top: Path, store: Path, opts: Options, good: str, bad: str
) -> means.Verdict:
    """runs-min samples of each, then one more of each until the difference is
    significant (at a confidence adjusted for the repeated looks) or runs-max is reached."""
    progress.step(f"measuring the endpoints: good {good[:12]}, bad {bad[:12]}")
    g = revision(ctx, top, good, opts, samples.commit_dir(store, good))
    b = revision(ctx, top, bad, opts, samples.commit_dir(store, bad))
    n = opts.runs_min
    confidence = endpoint_confidence(opts.runs_min, opts.runs_max)
    while True:
        tg, tb = samples.interleaved(ctx, g, b, n)
        v = means.verdict(
            tg,
            tb,
            higher_is_better=opts.higher_is_better,
            confidence=confidence,
            boots_flag="--runs-max",
        )
        if v.kind == "regression" or n >= opts.runs_max:
            return v
        n += 1


def check_endpoints(v: means.Verdict) -> None:
    """BadEndpoints, one line with the numbers, unless good is significantly better."""
    if v.kind == "regression":
        return
    r = v.ratio
    numbers = (
        f"good {v.a.mean:.1f} tps (n={v.a.n}), bad {v.b.mean:.1f} tps (n={v.b.n}), "
        f"ratio {r.ratio:.3f} [{r.low:.3f}, {r.high:.3f}]"
    )
    if v.kind == "improvement":
        raise BadEndpoints(f"bad is better than good: {numbers}; swapped --good/--bad?")
    raise BadEndpoints(f"the endpoints do not differ significantly: {numbers}")


def pick_threshold(given: float | None, good_mean: float, bad_mean: float) -> tuple[float, str]:
    """The threshold and where it came from."""
    if given is None:
        return math.sqrt(good_mean * bad_mean), "geometric mean of the endpoint means"
    low, high = sorted((good_mean, bad_mean))
    if not low < given < high:
        raise BadEndpoints(
            f"--threshold {given:g} is outside the endpoints' range ({low:.1f} .. {high:.1f} tps)"
        )
    return given, "given"


def recheck_pair(top: Path, outcome: Outcome) -> tuple[str, str]:
    """(last good, first bad): the culprit and its first parent, or, when git could only
    name a range, the newest good and bad marks around it."""
    if outcome.first_bad:
        return git.rev_parse(top, f"{outcome.first_bad}^"), outcome.first_bad
    goods = [m.commit for m in outcome.marks if m.verdict == "good"]
    bads = [m.commit for m in outcome.marks if m.verdict == "bad"]
    return goods[-1], bads[-1]


def recheck(
    ctx: samples.Context, top: Path, run_dir: Path, opts: Options, outcome: Outcome
) -> dict[str, Any]:
    """The culprit against its parent: --recheck-samples fresh samples each, interleaved."""
    parent, culprit = recheck_pair(top, outcome)
    progress.step(
        f"re-checking {culprit[:12]} against {parent[:12]}, "
        f"{opts.recheck_samples} fresh samples each"
    )
    out = run_dir / "recheck"
    p = revision(ctx, top, parent, opts, out / parent)
    c = revision(ctx, top, culprit, opts, out / culprit)
    result: dict[str, Any] = {"parent": parent, "culprit": culprit}
    try:
        tp, tc = samples.interleaved(ctx, p, c, opts.recheck_samples)
    except (BootError, BenchmarkError) as exc:
        return {**result, "confirmed": False, "error": str(exc)}
    v = means.verdict(
        tp, tc, higher_is_better=opts.higher_is_better, boots_flag="--recheck-samples"
    )
    r = v.ratio
    return {
        **result,
        "parent_tps": tp,
        "culprit_tps": tc,
        "kind": v.kind,
        "ratio": r.ratio,
        "low": r.low,
        "high": r.high,
        "method": r.method,
        "warnings": list(v.warnings),
        "confirmed": v.kind == "regression",
    }


def recheck_line(rc: dict[str, Any]) -> str:
    if "error" in rc:
        return f"re-check failed: {rc['error']}: NOT CONFIRMED"
    word = "confirmed" if rc["confirmed"] else "NOT CONFIRMED"
    before = sum(rc["parent_tps"]) / len(rc["parent_tps"])
    after = sum(rc["culprit_tps"]) / len(rc["culprit_tps"])
    return (
        f"re-check: {before:.1f} -> {after:.1f} tps, ratio {rc['ratio']:.3f} "
        f"[{rc['low']:.3f}, {rc['high']:.3f}] (95% CI): {rc['kind']}, {word}"
    )
