"""`kbisect pg-build`: build a PostgreSQL server from a source and patches, once, into the
cache; prints the build's key, which a scenario names as `postgres.build` (`--set`), and
which `kbisect compare --pg-build`, `kbisect bisect --pg-build` and a study's `postgres`
axis make and use by themselves (pgbuild/request.py, docs/postgres-builds.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kbisect.pgbuild import request


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source", metavar="SPEC", help="PATH[@REV] (a PostgreSQL git tree) or debian:MAJOR"
    )
    parser.add_argument(
        "--patch",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a patch (mbox, git format-patch or diff) applied on top, in order (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print the build's manifest")


def main(args: argparse.Namespace) -> int:
    made = request.Request(args.source, tuple(args.patch)).make()
    print(json.dumps(made.manifest, indent=2) if args.json else made.key)
    return 0
