"""A finished bisection's report files, either method: summary.json built once from the
state (state.py's Run) and the stored samples, then report.md, the plots and (the
posterior method) git-bisect.log rendered from summary.json alone, so that `kbisect
report RUN_DIR` renders them again to the same bytes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.bisect.report import git, markdown, posterior
from kbisect.bisect.state import Run
from kbisect.core import atomic, progress
from kbisect.measure import results

REPORT = "report.md"


def _posterior(s: Mapping[str, Any]) -> bool:
    """Whether the summary is the posterior method's (a git one has no "method": it is
    older than the posterior)."""
    return s.get("method") == "posterior"


def summary(top: Path, run_dir: Path, run: Run) -> dict[str, Any]:
    """The run's summary.json, not yet written: everything the report shows."""
    if run.options.method == "posterior":
        return posterior.build(top, run_dir, run)
    return git.build(top, run)


def render(run_dir: Path, s: Mapping[str, Any]) -> Path:
    """report.md, the plots and (posterior) git-bisect.log from the summary; the report's
    path."""
    method = posterior if _posterior(s) else git
    try:
        method.plots(s, run_dir)
    except ImportError as exc:
        progress.warn(f"no plot ({exc}): install matplotlib (scripts/setup)")
    if _posterior(s):
        atomic.write_text(run_dir / posterior.LOG, s["bisect_log"])
    atomic.write_text(run_dir / REPORT, markdown.page(s, method.sections(s)))
    return run_dir / REPORT


def write(run_dir: Path, s: dict[str, Any]) -> Path:
    """summary.json (validated), then everything render writes; the report's path."""
    results.write_summary(run_dir, s)
    return render(run_dir, s)


def rerender(run_dir: Path) -> Path:
    """Everything render writes, from the run's summary.json (`kbisect report`)."""
    return render(run_dir, results.load_summary(run_dir))
