"""`kbisect export`: samples as CSV or JSON, one row per sample, or as a KCIDB report
(docs/results-db.md), of one run directory (read from its files) or of the results
database (--query FILTERS)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kbisect.commands import db as db_command
from kbisect.core import atomic, paths
from kbisect.core.exceptions import EXIT_OK, UserError
from kbisect.db import export, query
from kbisect.report.formats import Renderer

FORMATS: Renderer[list[query.Row]] = {
    "csv": export.as_csv,
    "json": export.as_json,
    "kcidb": export.as_kcidb,
}


class BadExport(UserError):
    """Neither a run directory nor --query, or both."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir", nargs="?", type=Path, metavar="RUN_DIR", help="a run directory to export"
    )
    parser.add_argument(
        "--query",
        action="store_true",
        help="export the results database's samples matching the filters instead",
    )
    parser.add_argument("--format", choices=tuple(FORMATS), default="csv")
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    db_command.add_filters(parser.add_argument_group("filters (with --query)"))


def rows(args: argparse.Namespace) -> list[query.Row]:
    given = {k: v for k, v in db_command.filters(args).items() if v is not None}
    if args.run_dir is not None and args.query:
        raise BadExport("give a RUN_DIR or --query, not both")
    if args.run_dir is None and not args.query:
        raise BadExport("give a RUN_DIR, or --query with filters")
    if args.run_dir is None:
        return query.rows(None, **given)
    if given:
        raise BadExport("filters go with --query, not with a RUN_DIR")
    db_command.run_dirs([args.run_dir])
    return export.run_rows(args.run_dir.absolute())


def main(args: argparse.Namespace) -> int:
    if args.output is not None:
        paths.output(args.output, "-o", "file")
    text = FORMATS[args.format](rows(args))
    if args.output is None:
        sys.stdout.write(text)
    else:
        try:
            atomic.write_text(args.output, text)
        except OSError as exc:
            raise BadExport(f"-o {args.output}: cannot write: {exc.strerror or exc}") from None
    return EXIT_OK
