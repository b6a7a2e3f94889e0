"""`kbisect report`: a stored run's report again, as Markdown with PNG plots, as text, or
as a mail (mbox, docs/mailing-list.md).

This module only tells the runs apart: it reads the run's summary.json (or sees an
interrupted compare by its plan, a study in progress by its definition) and hands the run
to its kind's renderer (`KINDS`, kbisect/report/formats.py): kbisect/compare/ (markdown.py,
text.py, mail.py), kbisect/bisect/report/ (files.py, text.py, mail.py),
kbisect/study/report.py; a mail's message is made by kbisect/report/mbox.py. A compare
report is recomputed from the stored samples every time, so it never disagrees with them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kbisect.bisect.report import files as bisect_files
from kbisect.bisect.report import mail as bisect_mail
from kbisect.bisect.report import text as bisect_text
from kbisect.commands import options
from kbisect.compare import mail as compare_mail
from kbisect.compare import markdown, schedule
from kbisect.compare import report as compare_report
from kbisect.compare import summary as compare_summary
from kbisect.compare import text as compare_text
from kbisect.core import atomic
from kbisect.core.exceptions import EXIT_OK, UserError
from kbisect.measure import results
from kbisect.report import mbox
from kbisect.report.formats import Renderer, Stored
from kbisect.report.text import TEXT
from kbisect.study import report as study_report
from kbisect.study import store as study_store
from kbisect.study import text as study_text

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


def _run(st: Stored) -> compare_report.Run:
    return compare_report.load(st.dir, st.summary, st.min_effect)


_BISECT: Renderer[Stored] = {
    "markdown": lambda st: f"{bisect_files.rerender(st.dir)}\n",
    "text": lambda st: bisect_text.render(st.dir, st.summary),
    "mbox": lambda st: st.message(bisect_mail.render(st.dir, st.summary)),
}
# Each kind's report in each format: markdown writes report.md and the plots and gives the
# lines to print (its path; a compare's verdict line), text and mbox give the text.
KINDS: dict[str, Renderer[Stored]] = {
    "compare": {
        "markdown": lambda st: "".join(
            f"{x}\n" for x in markdown.render(st.dir, st.summary, st.min_effect)
        ),
        "text": lambda st: compare_text.render(_run(st)),
        "mbox": lambda st: st.message(compare_mail.render(_run(st))),
    },
    **dict.fromkeys(BISECT, _BISECT),
    "study": {
        "markdown": lambda st: f"{study_report.write(st.dir)}\n",
        "text": lambda st: study_text.render(study_report.load(st.dir)),
    },
}
MISSING = {"markdown": "report", "text": "text report", "mbox": "mail (compare, bisect)"}
SAVED = {"text": TEXT, "mbox": mbox.MBOX}  # where a format is kept beside the run


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results_dir",
        type=Path,
        metavar="RESULTS_DIR",
        help="a compare, bisect or study run directory",
    )
    parser.add_argument(
        "--format",
        choices=tuple(MISSING),
        default="markdown",
        help="markdown (report.md and plots); text: a plain-text report "
        "of at most 72 columns for a mailing list (report.txt, also printed); mbox: "
        "a compare or bisection as one mail for git send-email (report.mbox, also printed)",
    )
    parser.add_argument("--to", action="append", default=[], help="mbox: a To address (repeatable)")
    parser.add_argument("--cc", action="append", default=[], help="mbox: a Cc address (repeatable)")
    parser.add_argument(
        "--from",
        dest="sender",
        help=f"mbox: the From address (default: the placeholder {mbox.PLACEHOLDER_FROM!r}, "
        "to edit)",
    )
    parser.add_argument(
        "--min-effect",
        type=options.fraction,
        help="compare: smallest change called a regression/improvement (default: the run's)",
    )


def main(args: argparse.Namespace) -> int:
    """Print the report's path, then (compare) the verdict line; or the text."""
    if args.format != "mbox" and (args.to or args.cc or args.sender):
        raise UserError("--to, --cc and --from go with --format mbox")
    summary = load(args.results_dir)
    run = Stored(args.results_dir, summary, args.min_effect, args.sender, args.to, args.cc)
    kind = KINDS.get(summary["kind"])
    if kind is None or args.format not in kind:
        raise NotAReport(f"{run.dir}: kind '{summary['kind']}' has no {MISSING[args.format]}")
    out = kind[args.format](run)
    if args.format in SAVED:
        atomic.write_text(run.dir / SAVED[args.format], out)
    print(out, end="")
    return EXIT_OK
