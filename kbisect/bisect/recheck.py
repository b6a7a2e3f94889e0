"""The one re-check of a bisection's answer: fresh samples of the answer and its parent,
taken a pair at a time (the one with fewer first, the parent on a tie) until confirm.py's
rule says more than "more". Fresh: the bisection's own samples chose the answer, so they
would flatter it; they are stored apart and never reused by another bisection.

- `--method git` fixes the rule at `--recheck-samples` pairs (least = most) and judges
  them with stats.verdict on the robust ratio (fixed): it only flags the culprit;
- `--method posterior` uses the adaptive rule (until the ratio's interval clears the
  minimum effect, or rules it out, or `--recheck-samples` pairs) and feeds the samples to
  the posterior (posterior/search.py), which goes on when the answer no longer holds.

For a range (skipped neighbours hide the boundary) the posterior's answer re-checked is
the group's one testable member, the others' common descendant, against the first
revision below the group on its first-parent line; git's is the newest good and bad
marks around it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbisect.bisect import check, samples
from kbisect.bisect.git.log import Outcome
from kbisect.bisect.posterior.posterior import Answer, Posterior
from kbisect.bisect.request import Options
from kbisect.bisect.state import Run
from kbisect.core import progress
from kbisect.core.exceptions import BenchmarkError, BootError
from kbisect.source import git
from kbisect.stats import confirm, ratio, robust


def folder(run_dir: Path, culprit: str, commit: str) -> Path:
    """Where the posterior's re-check of culprit stores commit's fresh samples."""
    return run_dir / "recheck" / culprit / commit


def pair(post: Posterior, answer: Answer) -> tuple[str, str]:
    """(parent, culprit) to re-check for an answer that holds the confidence."""
    g = post.graph
    members = {g.index[c] for c, _ in answer.candidates}
    top = next(i for i in members if all(g.anc[i] >> j & 1 for j in members))
    below = g.commits[top]
    while below in g.index and g.index[below] in members:
        below = g.first_parent(below)
    return below, g.commits[top]


def due(run: Run, answer: Answer) -> bool:
    """Whether the answer still needs its re-check (not done, or interrupted)."""
    if answer.kind == "undecided":
        return False
    members = {c for c, _ in answer.candidates}
    done = [rc for c, rc in run.rechecks.items() if c in members]
    return not done or any(rc.kind == "running" for rc in done)


def adaptive(opts: Options) -> confirm.Rule:
    """The posterior method's rule."""
    return confirm.Rule(
        least=3,
        most=opts.recheck_samples,
        confidence=opts.confidence,
        higher_is_better=opts.higher_is_better,
    )


def fixed(opts: Options) -> confirm.Rule:
    """The git method's rule: exactly --recheck-samples pairs."""
    n = opts.recheck_samples
    return confirm.Rule(least=n, most=n, higher_is_better=opts.higher_is_better)


def sample(
    parent: str,
    culprit: str,
    rule: confirm.Rule,
    fresh: Callable[[str], list[float]],
    draw: Callable[[str], object],
) -> tuple[confirm.Step, list[float], list[float]]:
    """Draw (draw(commit): one more fresh sample) until the rule decides on the fresh
    samples so far (fresh(commit)); the decision and the samples of parent and culprit.
    The rule looks once per complete pair (each time the shorter side grows), never
    between the two draws of a pair: at most most - least + 1 looks from `least` pairs
    on, the number its Bonferroni split assumes (looks.py)."""
    looked = -1
    while True:
        a, b = fresh(parent), fresh(culprit)
        pairs = min(len(a), len(b))
        if pairs != looked:
            looked = pairs
            step = confirm.decide(a, b, rule)
            if step.kind != "more":
                return step, a, b
        draw(parent if len(a) <= len(b) else culprit)


def explained(
    parent_tps: list[float],
    culprit_tps: list[float],
    good_tps: list[float],
    bad_tps: list[float],
    rule: confirm.Rule,
) -> dict[str, Any]:
    """Whether the re-checked step accounts for the endpoints' difference
    (confirm.explains on the robust estimates of culprit/parent from the fresh pairs and
    of bad/good from the endpoint samples): the record for the re-check's "explains"."""
    step = robust.estimate(parent_tps, culprit_tps)
    ends = robust.estimate(good_tps, bad_tps)
    return confirm.explains(step, ends, rule).as_dict()


def judged(
    parent: str, culprit: str, tp: list[float], tc: list[float], opts: Options
) -> dict[str, Any]:
    """The git method's record of its re-check: stats.verdict on the fresh samples, judged
    on the robust ratio (robust.py) as the endpoint check is."""
    v = ratio.verdict(
        tp,
        tc,
        higher_is_better=opts.higher_is_better,
        boots_flag="--recheck-samples",
        interval=ratio.ROBUST,
    )
    r = v.ratio
    return {
        "parent": parent,
        "culprit": culprit,
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


def git_pair(top: Path, outcome: Outcome) -> tuple[str, str]:
    """(last good, first bad): the culprit and its first parent, or, when git could only
    name a range, the newest good and bad marks around it."""
    if outcome.first_bad:
        return git.rev_parse(top, f"{outcome.first_bad}^"), outcome.first_bad
    goods = [m.commit for m in outcome.marks if m.verdict == "good"]
    bads = [m.commit for m in outcome.marks if m.verdict == "bad"]
    return goods[-1], bads[-1]


def run_git(
    ctx: samples.Context, top: Path, run_dir: Path, opts: Options, outcome: Outcome
) -> dict[str, Any]:
    """The git method's re-check: the culprit against its parent, --recheck-samples fresh
    samples each, interleaved, in RUN_DIR/recheck/<commit>/."""
    parent, culprit = git_pair(top, outcome)
    progress.step(
        f"re-checking {culprit[:12]} against {parent[:12]}, "
        f"{opts.recheck_samples} fresh samples each"
    )
    out = run_dir / "recheck"
    revs = {c: check.revision(ctx, top, c, opts, out / c) for c in (parent, culprit)}
    try:
        _, tp, tc = sample(
            parent,
            culprit,
            fixed(opts),
            lambda c: samples.top_up(ctx, revs[c], 0),
            lambda c: samples.draw(ctx, revs[c]),
        )
    except (BootError, BenchmarkError) as exc:
        return {"parent": parent, "culprit": culprit, "confirmed": False, "error": str(exc)}
    return judged(parent, culprit, tp, tc, opts)


def git_line(rc: dict[str, Any]) -> str:
    """The git method's re-check in one line, as the driver prints it."""
    if "error" in rc:
        return f"re-check failed: {rc['error']}: NOT CONFIRMED"
    word = "confirmed" if rc["confirmed"] else "NOT CONFIRMED"
    before = sum(rc["parent_tps"]) / len(rc["parent_tps"])
    after = sum(rc["culprit_tps"]) / len(rc["culprit_tps"])
    return (
        f"re-check: {before:.1f} -> {after:.1f} tps, ratio {rc['ratio']:.3f} "
        f"[{rc['low']:.3f}, {rc['high']:.3f}] (95% CI): {rc['kind']}, {word}"
    )


def line(culprit: str, rc: dict[str, Any]) -> str:
    """The posterior's re-check in one line, as the driver prints it."""
    if "error" in rc:
        return f"re-check of {culprit[:12]} failed: {rc['error']}: NOT CONFIRMED"
    word = "confirmed" if rc["confirmed"] else f"{rc['kind']}, NOT CONFIRMED"
    before = sum(rc["parent_tps"]) / len(rc["parent_tps"])
    after = sum(rc["culprit_tps"]) / len(rc["culprit_tps"])
    return (
        f"re-check: {before:.1f} -> {after:.1f} tps ({rc['n']} fresh pairs), ratio "
        f"{rc['ratio']:.3f} [{rc['low']:.3f}, {rc['high']:.3f}] "
        f"({rc['level']:.1%} CI): {word}"
    )
