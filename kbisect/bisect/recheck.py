"""The posterior method's adaptive re-check in the driver: fresh pairs of the answer and
its parent (confirm.py's rule: until the ratio's interval clears the minimum effect, or
rules it out, or `--recheck-samples` pairs), stored in RUN_DIR/recheck/<answer>/<commit>/
(never reused by another bisection: they must be fresh), and fed to the posterior.

For a range (skipped neighbours hide the boundary) the answer re-checked is the group's
one testable member, the others' common descendant, against the first revision below
the group on its first-parent line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbisect.bisect import check, samples
from kbisect.bisect.posterior.posterior import Answer, Posterior
from kbisect.bisect.state import Run
from kbisect.core import progress
from kbisect.core.exceptions import BenchmarkError, BootError, BuildError
from kbisect.stats import confirm

if TYPE_CHECKING:
    from kbisect.bisect.posterior.search import Search


def folder(run_dir: Path, culprit: str, commit: str) -> Path:
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
    return not done or any(rc["kind"] == "running" for rc in done)


def run(search: Search, answer: Answer) -> None:
    """Fresh pairs of the answer and its parent until confirm.decide says more than
    "more"; the result in the state's rechecks, the samples in the posterior."""
    parent, culprit = pair(search.post, answer)
    run, opts = search.run, search.opts
    if run.first_stop is None:
        run.first_stop = {"commit": culprit, "p": answer.probability, "kind": answer.kind}
    rc = run.rechecks.setdefault(culprit, {"parent": parent, "kind": "running"})
    rule = confirm.Rule(
        least=3,
        most=opts.recheck_samples,
        confidence=opts.confidence,
        higher_is_better=opts.higher_is_better,
    )
    progress.step(
        f"{culprit[:12]} holds P = {answer.probability:.3f}: re-checking it against "
        f"{parent[:12]}, fresh pairs until the ratio is clear (at most {rule.most})"
    )
    out = {c: folder(search.run_dir, culprit, c) for c in (parent, culprit)}
    try:
        revs = {c: check.revision(search.ctx, search.top, c, opts, out[c]) for c in out}
    except BuildError as exc:
        search.fail(parent, f"build failed: {exc}")
        rc.update(kind="error", error=str(exc), confirmed=False)
        return
    while True:
        a, b = samples.stored(out[parent])[0], samples.stored(out[culprit])[0]
        step = confirm.decide(a, b, rule)
        if step.kind != "more":
            break
        commit = parent if len(a) <= len(b) else culprit
        try:
            samples.draw(search.ctx, revs[commit])
        except (BootError, BenchmarkError) as exc:
            search.feed(commit, out[commit], "recheck")
            rc.update(kind="error", error=str(exc), confirmed=False)
            return
        search.feed(commit, out[commit], "recheck")
        search.save()
    rc.update(
        step.as_dict(),
        parent_tps=a,
        culprit_tps=b,
        confirmed=step.kind == "confirmed",
        level=rule.level,
        min_effect=rule.min_effect,
    )
    progress.step(line(culprit, rc))


def line(culprit: str, rc: dict[str, Any]) -> str:
    """The re-check in one line, as the driver prints it."""
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
