"""`kbisect history`: tps over kernel tags, time or a study axis, with change points and
drift (kbisect/history/, docs/history.md). Exit 1 when the newest results regressed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kbisect.core import paths
from kbisect.history import output, series, source
from kbisect.history.series import History
from kbisect.report.formats import Renderer

FORMATS: Renderer[History] = {
    "text": output.text,
    "markdown": output.markdown,
    "json": output.as_json,
}
EXIT_REGRESSION = 1


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dirs", nargs="*", type=Path, metavar="DIR",
        help="run dirs or dirs of run dirs (default: the results dir)",
    )  # fmt: skip
    parser.add_argument("--scenario", help="the scenario (needed when the samples have several)")
    parser.add_argument("--scenario-hash", help="the scenario hash (a prefix) among several")
    parser.add_argument("--machine", help="the target name (needed when there are several)")
    parser.add_argument("--kernel", help="with --by axis:NAME: the kernel tag or commit prefix")
    parser.add_argument(
        "--by", default="tag",
        help="order the points by kernel tag (default), time, or axis:NAME (a study axis)",
    )  # fmt: skip
    parser.add_argument("--baseline", help="the point to compare with (default: last vX.Y)")
    parser.add_argument(
        "--rc-history", type=Path, metavar="DIR",
        help="the tags of `kbisect rc record`'s history.json in DIR, instead of DIRs",
    )  # fmt: skip
    parser.add_argument("--format", choices=sorted(FORMATS), default="text")
    parser.add_argument("--out", type=Path, help="write history.png, history.html, history.json")


def main(args: argparse.Namespace) -> int:
    if args.out is not None:  # before any reading, making nothing: a bad --out is exit 2
        paths.output(args.out, "--out", "dir")
    for d in args.dirs:
        paths.look(d, "DIR", "dir")
    if args.rc_history is not None:
        paths.look(args.rc_history, "--rc-history", "dir")
    if args.rc_history is not None and args.dirs:
        raise series.SeriesError("give run DIRs or --rc-history DIR, not both")
    if args.rc_history is not None and args.by != "tag":
        raise series.SeriesError("--rc-history orders the points by tag: drop --by")
    obs = (
        source.from_rc_history(args.rc_history)
        if args.rc_history
        else source.collect(args.dirs, args.scenario)
    )
    history = series.select(
        obs,
        args.by,
        scenario=args.scenario,
        scenario_hash=args.scenario_hash,
        machine=args.machine,
        kernel=args.kernel,
    )
    series.analyse(history, args.baseline)
    for line in history.chosen:
        print(f"kbisect: {line}", file=sys.stderr)
    sys.stdout.write(FORMATS[args.format](history))
    if args.out is not None:
        for path in output.write(history, args.out):
            print(f"wrote {path}", file=sys.stderr)
    return EXIT_REGRESSION if history.alarms else 0
