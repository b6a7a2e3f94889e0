"""`kbisect report`: Markdown and PNG plots from a stored run directory.

A compare report is recomputed from the stored samples every time, so it never disagrees
with them: only boots with status "ok" enter the statistics; failed boots are listed.
The report opens with the command that reproduces the run and one sentence a maintainer
can paste, then the numbers behind it, the fingerprints, every boot, and the plots
(reportrun.py loads the run, reportmd.py and reportwarn.py write its Markdown).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.bisect import report as bisect_report
from kbisect.commands import options
from kbisect.compare import markdown
from kbisect.compare.report import NotAReport, load, load_run
from kbisect.core import atomic
from kbisect.core.exceptions import EXIT_OK
from kbisect.report import text as textreport
from kbisect.study import report as study_report


def _text(run_dir: Path, summary: Mapping[str, Any], min_effect: float | None) -> str:
    if summary["kind"] == "compare":
        return textreport.compare_text(load_run(run_dir, summary, min_effect))
    if summary["kind"] in ("bisect", "bisect-summary"):
        return textreport.bisect_text(run_dir, summary)
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
    """Print the report's path, then (compare) the verdict line."""
    summary = load(args.results_dir)
    kind = summary["kind"]
    if args.format == "text":
        text = _text(args.results_dir, summary, args.min_effect)
        atomic.write_text(args.results_dir / textreport.TEXT, text)
        print(text, end="")
    elif kind == "study":
        print(study_report.write(args.results_dir))
    elif kind == "compare":
        path, line = markdown.render(args.results_dir, summary, args.min_effect)
        print(path)
        print(line)
    elif kind in ("bisect", "bisect-summary"):
        print(bisect_report.render(args.results_dir))
    else:
        raise NotAReport(f"{args.results_dir}: kind '{kind}' has no report")
    return EXIT_OK
