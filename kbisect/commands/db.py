"""`kbisect db`: the results database (kbisect/db/, docs/results-db.md).

kbisect db rebuild [DIR ...]   index run directories again (default: the results dir)
kbisect db info                how many runs and samples it indexes, and where it is
kbisect db query [FILTERS]     the matching samples, one line each
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kbisect.commands import options
from kbisect.core import paths
from kbisect.core.exceptions import EXIT_OK, UserError
from kbisect.db import index, query, rebuild, runs

# (column, header, width) of `db query`'s table
TABLE = (
    ("started", "started", 20),
    ("run_kind", "kind", 8),
    ("label", "label", 12),
    ("boot", "boot", 4),
    ("status", "status", 9),
    ("tps", "tps", 9),
    ("kernel_tag", "kernel", 24),
    ("scenario_name", "scenario", 20),
    ("machine", "machine", 16),
)


class NotARunDir(UserError):
    """A directory given to `db rebuild` or `export` holds no kbisect run."""


def add_filters(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The filters of `db query` and `export --query`, all of which must hold."""
    parser.add_argument("--scenario", help="scenario name")
    parser.add_argument("--scenario-hash", help="scenario hash (or a prefix)")
    parser.add_argument("--kind", help="run kind: run, compare, bisect, study, bisect-store")
    parser.add_argument("--machine", help="machine hash (or a prefix), or a target's name")
    parser.add_argument("--run", help="run id (its path under the results dir) or path")
    parser.add_argument("--commit", help="kernel commit (or a prefix)")
    parser.add_argument("--tag", help="kernel tag: its describe, or the describes after it")
    parser.add_argument("--since", help="samples taken on or after YYYY-MM-DD[THH:MM:SSZ]")
    parser.add_argument("--status", help=f"one of {', '.join(query.STATUSES)}")


def filters(args: argparse.Namespace) -> dict[str, str | None]:
    return {n: getattr(args, n) for n in query.FILTERS}


def run_dirs(given: list[Path]) -> list[Path]:
    """Each directory named, checked: it exists and holds a run (or runs)."""
    for d in given:
        if not paths.look(d, "DIR", "dir"):
            raise NotARunDir(f"{d}: no such directory")
        if not runs.run_dirs(d):
            raise NotARunDir(f"{d}: holds no kbisect run (no samples/, summary.json or plan)")
    return list(given)


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    reb = sub.add_parser("rebuild", help="index run directories again, from their files")
    reb.add_argument(
        "dirs",
        nargs="*",
        type=Path,
        metavar="DIR",
        help="a run directory or a folder of them (default: every run in the results dir)",
    )
    sub.add_parser("info", help="how many runs and samples are indexed, and where")
    que = sub.add_parser("query", help="the indexed samples matching filters")
    add_filters(que)


def _rebuild(given: list[Path]) -> int:
    dirs = options.paths(run_dirs(given))
    counts = rebuild.rebuild(list(dirs) or None)
    for line in counts.skipped:
        print(f"skipped {line}")
    print(f"indexed {counts.samples} samples of {counts.runs} runs into {index.db_path()}")
    return EXIT_OK


def _info() -> int:
    got = query.info()
    kinds = ", ".join(f"{k} {n}" for k, n in got.by_kind.items()) or "none"
    print(f"{got.path}\nruns: {got.runs} ({kinds})\nsamples: {got.samples}")
    return EXIT_OK


def _cell(value: object, width: int) -> str:
    text = "" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: list[query.Row]) -> list[str]:
    lines = ["  ".join(h.ljust(w) for _, h, w in TABLE).rstrip()]
    for r in rows:
        lines.append("  ".join(_cell(getattr(r, c), w).ljust(w) for c, _, w in TABLE).rstrip())
    return lines


def main(args: argparse.Namespace) -> int:
    if args.db_command == "rebuild":
        return _rebuild(args.dirs)
    if args.db_command == "info":
        return _info()
    found = query.rows(None, **filters(args))
    print("\n".join(table(found)))
    print(f"{len(found)} samples")
    return EXIT_OK
