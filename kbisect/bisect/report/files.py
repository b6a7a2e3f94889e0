"""A finished bisection's report files, either method: summary.json built once from the
state (state.py's Run) and the stored samples, then report.md, the plots and (the
posterior method) git-bisect.log rendered from summary.json alone, so that `kbisect
report RUN_DIR` renders them again to the same bytes.

A stored summary.json is checked whole before anything renders it (`check`): the
fields every renderer reads, typed (measure/schemas/bisect-summary.json), and what a
schema cannot say (posterior.py's `mismatch`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.bisect import samples, state, verify
from kbisect.bisect.report import answer, git, markdown, posterior
from kbisect.core import atomic, progress
from kbisect.measure import preempt, results

REPORT = "report.md"
SCHEMA = "bisect-summary"


def _posterior(s: Mapping[str, Any]) -> bool:
    """Whether the summary is the posterior method's (a git one has no "method": it is
    older than the posterior)."""
    return s.get("method") == "posterior"


def summary(top: Path, run_dir: Path, run: state.Run) -> dict[str, Any]:
    """The run's summary.json, not yet written: everything the report shows."""
    s = (
        posterior.build(top, run_dir, run)
        if run.options.method == "posterior"
        else git.build(top, run)
    )
    if warned := preempt_warnings(run.store, [str(r["commit"]) for r in s["revisions"]]):
        s["preempt"] = warned
    if run.passes:  # the answers whose revert left a rest, in order
        s["passes"] = [
            {**verify.record(p.verification, run.bad), **({"gap": p.gap} if p.gap else {})}
            for p in run.passes
        ]
    if run.verification is not None:  # a run from before the revert check has none
        s["verification"] = verify.record(run.verification, run.bad)
        # the revert decides, never the re-check alone (verify.py: no-revert)
        s["confirmed"] = run.verification.kind == "all"
        s["verdict"]["kind"] = "regression" if s["confirmed"] else "not confirmed"
    return s


def preempt_warnings(store: Path, commits: list[str]) -> list[str]:
    """The revisions whose boots ran another preemption model than they asked for
    (measure/preempt.py), one line each, from their stored samples."""
    out = []
    for commit in dict.fromkeys(commits):
        where = samples.commit_dir(store, commit)
        if where.is_dir():
            found = results.load_samples(where)
            out += preempt.first_warnings(found, [(None, f"revision {commit[:12]}")])
    return out


def render(run_dir: Path, s: Mapping[str, Any]) -> Path:
    """report.md, the plots and (posterior) git-bisect.log from the summary; the report's
    path."""
    method = answer if _posterior(s) else git
    try:
        method.plots(s, run_dir)
    except ImportError as exc:
        progress.warn(f"no plot ({exc}): install matplotlib (scripts/setup)")
    if _posterior(s):
        atomic.write_text(run_dir / posterior.LOG, posterior.replay_file(s))
    atomic.write_text(run_dir / REPORT, markdown.page(s, method.sections(s)))
    return run_dir / REPORT


def recover(run_dir: Path) -> str:
    """How to get a good summary.json back: the driver writes it again from the run's
    state and stored samples when the finished run is resumed without its report."""
    if (run_dir / state.STATE_FILE).is_file():
        return (
            f"remove {run_dir / REPORT} and run kbisect bisect --resume {run_dir}: it "
            f"writes summary.json again from {state.STATE_FILE} and the stored samples"
        )
    return f"restore it from a copy: the run has no {state.STATE_FILE} to write it again from"


def _validate(s: Mapping[str, Any], where: str) -> None:
    """InvalidResult, naming the first field the report could not render."""
    for name in ("summary", SCHEMA):
        results.validate(s, name, where)
    if problem := posterior.mismatch(s):
        raise results.InvalidResult(f"{where}: not a valid {SCHEMA}: {problem}")


def check(s: Mapping[str, Any], path: Path) -> None:
    """A stored summary.json (at `path`), whole, before it is rendered; InvalidResult
    (exit 3), one line naming the file and the field, ending with how to recover."""
    try:
        _validate(s, str(path))
    except results.InvalidResult as exc:
        raise results.InvalidResult(f"{exc}; {recover(path.parent)}") from None


def write(run_dir: Path, s: dict[str, Any]) -> Path:
    """summary.json (validated as `check` reads it back), then everything render writes;
    the report's path."""
    _validate(s, SCHEMA)
    results.write_summary(run_dir, s)
    return render(run_dir, s)


def rerender(run_dir: Path) -> Path:
    """Everything render writes, from the run's summary.json, checked (`kbisect report`)."""
    s = results.read_summary(run_dir)
    check(s, run_dir / results.SUMMARY)
    return render(run_dir, s)
