"""`kbisect report`: a stored run's report again, as Markdown with PNG plots or as text.

This module only tells the runs apart: it reads the run's summary.json (or sees an
interrupted compare by its plan, a study in progress by its definition) and hands the run
to the renderer of its kind: kbisect/compare/ (markdown.py, text.py), kbisect/bisect/report/
(files.py, text.py), kbisect/study/report.py. A compare report is recomputed from the
stored samples every time, so it never disagrees with them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kbisect.bisect.report import files as bisect_files
from kbisect.bisect.report import text as bisect_text
from kbisect.commands import options
from kbisect.compare import markdown, schedule
from kbisect.compare import report as compare_report
from kbisect.compare import summary as compare_summary
from kbisect.compare import text as compare_text
from kbisect.core import atomic
from kbisect.core.exceptions import EXIT_OK, UserError
from kbisect.measure import results
from kbisect.report.text import TEXT
from kbisect.study import report as study_report
from kbisect.study import store as study_store

BISECT = ("bisect", "bisect-summary")


class NotAReport(UserError):
    """The directory holds no run kbisect can report on."""


def load(run_dir: Path) -> dict[str, Any]:
    """The run's summary.json, or one line saying why not.

    A compare interrupted before its summary gets one made from its plan, marked
    partial; a study in progress a bare `{"kind": "study"}`. A finished compare's or
    bisection's summary is checked here, whole; a study's by the module that renders it.
    """
    path = run_dir / results.SUMMARY
    if not run_dir.is_dir():
        raise NotAReport(f"{run_dir}: no such directory")
    if not path.exists() and (run_dir / schedule.PLAN).is_file():
        return compare_summary.partial(run_dir)
    if not path.exists() and (run_dir / study_store.DEFINITION).is_file():
        return {"kind": "study"}
    summary = results.read_summary(run_dir)
    if summary["kind"] == "compare":
        compare_report.check(summary, path)
    if summary["kind"] in BISECT:
        bisect_files.check(summary, path)
    return summary


def _markdown(run_dir: Path, summary: dict[str, Any], min_effect: float | None) -> list[str]:
    """Write the run's report.md and plots; the lines to print: its path (a compare: and
    the verdict line)."""
    if summary["kind"] == "compare":
        return [str(x) for x in markdown.render(run_dir, summary, min_effect)]
    if summary["kind"] in BISECT:
        return [str(bisect_files.rerender(run_dir))]
    if summary["kind"] == "study":
        return [str(study_report.write(run_dir))]
    raise NotAReport(f"{run_dir}: kind '{summary['kind']}' has no report")


def _text(run_dir: Path, summary: dict[str, Any], min_effect: float | None) -> str:
    if summary["kind"] == "compare":
        return compare_text.render(compare_report.load(run_dir, summary, min_effect))
    if summary["kind"] in BISECT:
        return bisect_text.render(run_dir, summary)
    if summary["kind"] == "study":
        return study_report.text_of(run_dir)
    raise NotAReport(f"{run_dir}: kind '{summary['kind']}' has no text report")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results_dir",
        type=Path,
        metavar="RESULTS_DIR",
        help="a compare, bisect or study run directory",
    )
    parser.add_argument(
        "--format",
        choices=("markdown", "text"),
        default="markdown",
        help="markdown (report.md and plots) or text: a plain-text report "
        "of at most 72 columns for a mailing list (report.txt, also printed)",
    )
    parser.add_argument(
        "--min-effect",
        type=options.fraction,
        help="compare: smallest change called a regression/improvement (default: the run's)",
    )


def main(args: argparse.Namespace) -> int:
    """Print the report's path, then (compare) the verdict line; or the text."""
    summary = load(args.results_dir)
    if args.format == "text":
        text = _text(args.results_dir, summary, args.min_effect)
        atomic.write_text(args.results_dir / TEXT, text)
        print(text, end="")
    else:
        print("\n".join(_markdown(args.results_dir, summary, args.min_effect)))
    return EXIT_OK
