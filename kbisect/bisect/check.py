"""The check before a bisection, on interleaved samples: the endpoints must differ
significantly, good better than bad. It is stats.verdict judged on stats/robust.py's
ratio: the two sides' core levels, an outlier boot set apart and each side its own
noise, so that one half-speed boot cannot hide the difference. Its claim has a direction
(bad worse than good: the only one a bisection can go on with), so it is a one-sided
test at 5% over the looks (endpoint_confidence). The threshold is then the one given
(which must lie between their means) or their geometric mean. (The check after it, the
re-check of the answer, is recheck.py.)

revision(): a commit built in the driver's worktree, for every phase of the driver.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from kbisect.bisect import round as pool_round
from kbisect.bisect import samples
from kbisect.bisect.git import step
from kbisect.bisect.git.run import SLOT
from kbisect.bisect.request import Options
from kbisect.core import progress
from kbisect.core.exceptions import UserError
from kbisect.source import worktree
from kbisect.stats import looks, means, ratio
from kbisect.targets.base import Kernel
from kbisect.targets.pool import dispatch

ENDPOINT_ALPHA = 0.05  # the chance of passing endpoints that do not differ: one-sided


class BadEndpoints(UserError):
    """The good and bad revisions cannot be bisected between."""


def revision(
    ctx: samples.Context, top: Path, commit: str, opts: Options, out: Path
) -> samples.Revision:
    """Build commit in the driver's worktree (in place, cached per commit)."""
    wt = worktree.checkout(top, commit, SLOT)
    built = step.build_here(wt, ctx.target.arch, opts.configs, opts.base_config, ctx.patches)
    return samples.Revision(commit, Kernel(built.image, built.manifest), out)


def pairs_a_look(width: int) -> int:
    """The pairs each look of the endpoint check adds: one on one machine; over a pool of
    `width` machines width/2, so that a look's boots fill a round (every machine one boot:
    a look a pair at a time would leave all but two of them idle)."""
    return max(1, width // 2)


def first_look(runs_min: int, runs_max: int, every: int = 1) -> int:
    """The samples a side of the check's first look: runs-min, rounded up to whole looks of
    `every` pairs over a pool (4 a side on 4 or 8 machines at runs-min 3: the first rounds
    full), never past runs-max."""
    return min(runs_max, -(-runs_min // every) * every)


def endpoint_confidence(runs_min: int, runs_max: int, every: int = 1) -> float:
    """The level of the verdict's interval at each look of the endpoint check. The check
    passes on one claim only, bad worse than good (the user names which side is good;
    "bad is better" and "no difference" both refuse), so it is a one-sided test: each
    look's interval is the two-sided 1 - 2α/K one, its bad end a one-sided bound at α/K
    (looks.py, as the bisect step's "good" and "bad"), and endpoints that do not differ
    pass with probability at most α = ENDPOINT_ALPHA over the K looks: from first_look()
    a side, then every `every` pairs, to runs-max. (Until 2026-11-29 it was compare's
    two-sided 5%, 2.5% on the side that passes: it refused 16 of 300 t(3) endpoint pairs
    with a true 25% difference, 10 at the one-sided level; docs/statistics.md "The
    endpoint check's level".)"""
    first = first_look(runs_min, runs_max, every)
    k = looks.count(first, runs_max, every)
    return looks.level(ENDPOINT_ALPHA, 1, k, one_sided=True)


def measure_endpoints(
    ctx: samples.Context, top: Path, store: Path, opts: Options, good: str, bad: str
) -> means.Verdict:
    """The endpoints measured (endpoint_verdict) from the store, built in the driver's
    worktree."""
    progress.step(f"measuring the endpoints: good {good[:12]}, bad {bad[:12]}")
    revs = {c: revision(ctx, top, c, opts, samples.commit_dir(store, c)) for c in (good, bad)}
    width = pool_round.width(ctx.target, opts.batch)
    every = pairs_a_look(width)
    first = first_look(opts.runs_min, opts.runs_max, every)

    def top_up(commit: str, n: int) -> list[float]:
        if width > 1:  # a look's samples at once: the first look's, then k/2 pairs a look
            fill(ctx, [revs[good], revs[bad]], max(n, first))
        return samples.top_up(ctx, revs[commit], n)

    return endpoint_verdict(top_up, good, bad, opts, every)


def fill(ctx: samples.Context, revs: list[samples.Revision], n: int) -> None:
    """Over a pool: the boots that bring each revision to n stored samples, taken at once
    (bisect/round.py). Each machine measures every revision: turn t's boot of the j-th
    revision is bound to machine (t + j) mod k, so that over k turns each machine takes
    one of each (left to free machines, the first would take every good boot and the
    second every bad one, and the machine's offset would pass for the step). A boot that
    fails here is left to samples.top_up, which retries or refuses it as it would have
    one boot at a time."""
    live = [m.name for m in dispatch.members(ctx.target)]
    have = [len(samples.stored(r.out)[0]) for r in revs]  # a resumed look keeps the turns
    order = sorted(
        (t, j, live[(t + j) % len(live)]) for j in range(len(revs)) for t in range(have[j], n)
    )
    if order:
        pool_round.take_round(
            ctx.target, [samples.drawer(ctx, revs[j]) for _, j, _ in order], [m for *_, m in order]
        )


def endpoint_verdict(
    top_up: Callable[[str, int], list[float]],
    good: str,
    bad: str,
    opts: Options,
    every: int = 1,
) -> means.Verdict:
    """runs-min samples of each, then `every` more of each (one; over a pool, k/2:
    pairs_a_look) until the difference is significant (at a confidence adjusted for the
    repeated looks) or runs-max is reached. top_up(commit, k): at least k samples of
    commit (stored ones count), taken good first, then bad, so that drift hits both
    alike."""
    n = first_look(opts.runs_min, opts.runs_max, every)
    confidence = endpoint_confidence(opts.runs_min, opts.runs_max, every)
    while True:
        for k in range(1, n + 1):
            tg, tb = top_up(good, k), top_up(bad, k)
        v = ratio.verdict(
            tg,
            tb,
            higher_is_better=opts.higher_is_better,
            confidence=confidence,
            boots_flag="--runs-max",
            interval=ratio.ROBUST,
        )
        if v.kind == "regression" or n >= opts.runs_max:
            return v
        n = min(n + every, opts.runs_max)


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
