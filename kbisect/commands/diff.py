"""`kbisect diff RUN_A RUN_B`: any two stored sets of samples of one scenario (a run, one
side of a compare, one revision of a bisection's store), compared with the statistics of
`kbisect compare` (kbisect/compare/diff.py); exit 1 for a regression of B against A, as
compare (docs/exit-codes.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kbisect.bisect import state
from kbisect.commands import options
from kbisect.compare import diff
from kbisect.core.exceptions import EXIT_NEGATIVE, EXIT_OK
from kbisect.report.formats import Renderer

FORMATS: Renderer[diff.Diff] = {"text": diff.text, "json": diff.as_json, "markdown": diff.markdown}


SPEC_HELP = "DIR (a run), DIR:A or DIR:B (a compare's side), DIR:COMMIT (a bisection's revision)"


def bisect_store(run: Path) -> Path | None:
    """Where the bisection in `run` keeps its samples per revision; None: no bisection."""
    return state.samples_store(run) if (run / state.STATE_FILE).is_file() else None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", help=f"side A: {SPEC_HELP}")
    parser.add_argument("run_b", metavar="RUN_B", help="side B, named the same ways")
    parser.add_argument(
        "--format",
        choices=tuple(FORMATS),
        default="text",
        help="text (72 columns, as the compare text report's head), json or markdown",
    )
    options.add_min_effect(parser)
    parser.add_argument(
        "--force",
        action="store_true",
        help="compare runs of different scenarios, listing the settings that differ",
    )


def main(args: argparse.Namespace) -> int:
    a, b = (diff.resolve(spec, bisect_store) for spec in (args.run_a, args.run_b))
    differs = diff.check_scenarios(a, b, force=args.force)
    run = diff.as_run(a, b, args.min_effect)
    print(FORMATS[args.format](diff.Diff(run, (a, b), differs)), end="")
    return EXIT_NEGATIVE if run.verdict.kind == "regression" else EXIT_OK
