"""`kbisect pg-build`: build a PostgreSQL server from a source and patches, once, into the
cache; prints the build's key, which a scenario names as `postgres.build` (a study axis,
`--set`) and which `kbisect compare --pg-build` uses by itself (docs/postgres-builds.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kbisect.pgbuild import build, spec


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
    key, manifest = build.build(spec.parse(args.source), args.patch)
    print(json.dumps(manifest, indent=2) if args.json else key)
    return 0
