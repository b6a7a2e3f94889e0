"""`kbisect rc`: the next -rc (or linux-next) tag to measure and its baseline, the
history of measured tags, and its repair (kbisect/source/rc.py; docs/github-actions.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from kbisect.commands import options
from kbisect.core import paths
from kbisect.history import source
from kbisect.source import rc, release


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rc_command", metavar="ACTION", required=True)
    nxt = sub.add_parser("next", help="print the next tag to measure and its baseline")
    nxt.add_argument("--tree", required=True, help="kernel git tree with the tags")
    which = nxt.add_mutually_exclusive_group()
    which.add_argument("--pattern", default=rc.DEFAULT_PATTERN, help="tag glob (default v*-rc*)")
    which.add_argument("--linux-next", action="store_true", help="linux-next tags next-YYYYMMDD")
    nxt.add_argument("--history", type=Path, help="history dir or file (default $KBISECT_HISTORY)")
    nxt.add_argument("--json", action="store_true", help="print JSON instead of key=value")
    nxt.add_argument(
        "--missed", action="store_true",
        help="every unmeasured tag newer than the newest measured release, oldest first",
    )  # fmt: skip
    rec = sub.add_parser("record", help="add a measured tag to the history")
    rec.add_argument("--history", type=Path, help="history dir (default $KBISECT_HISTORY)")
    rec.add_argument("--tag", type=options.tag, required=True)
    rec.add_argument("--commit", required=True)
    rec.add_argument("--result", type=Path, required=True, help="the run's results dir")
    rec.add_argument("--scenario-hash", help="default: from the result's samples of --commit")
    rec.add_argument("--tps", type=options.positive, help="mean tps (default: from the samples)")
    rep = sub.add_parser("repair", help="rewrite the history with every entry that can be read")
    rep.add_argument("--history", type=Path, help="history dir or file (default $KBISECT_HISTORY)")


def _next(args: argparse.Namespace) -> int:
    pattern = rc.NEXT_PATTERN if args.linux_next else rc.check_pattern(args.pattern)
    paths.look(args.history or rc.default_history(), "--history")
    measured = {e["tag"] for e in rc.load_history(args.history or rc.default_history())}
    repo = release.resolve(args.tree) if release.is_release(args.tree) else Path(args.tree)
    if args.missed:
        return _missed(rc.choose_missed(repo, pattern, measured), pattern, args.json)
    picked = rc.choose(repo, pattern, measured)
    if args.json:
        print(json.dumps({**picked, "new": bool(picked["tag"]), "pattern": pattern}, indent=2))
    else:
        print("\n".join(f"{k}={v}" for k, v in picked.items()))
    if not picked["tag"]:
        print(
            f"kbisect rc: nothing new: every {pattern} tag up to the newest is measured",
            file=sys.stderr,
        )
    return 0


def _missed(picked: list[dict[str, str]], pattern: str, as_json: bool) -> int:
    """The oldest missed tag as `next` prints one (so a run that measures one tag measures
    the oldest), then `missed=` and `count=` for all of them."""
    first = (
        picked[0] if picked else {"tag": "", "commit": "", "baseline": "", "baseline_commit": ""}
    )
    tags = " ".join(p["tag"] for p in picked)
    if as_json:
        out = {**first, "new": bool(picked), "pattern": pattern, "missed": picked}
        print(json.dumps(out, indent=2))
    else:
        print("\n".join([*(f"{k}={v}" for k, v in first.items()), f"missed={tags}"]))
        print(f"count={len(picked)}")
    if not picked:
        print(f"kbisect rc: nothing missed: every {pattern} tag is measured", file=sys.stderr)
    return 0


def _record(args: argparse.Namespace) -> int:
    directory = args.history or rc.default_history()
    paths.look(directory, "--history")  # the history file, or the directory that holds it
    if not os.path.isfile(directory):  # a directory, or none yet: history.json goes in it
        paths.writable(directory, "--history")
    paths.look(args.result, "--result", "dir")
    path, tps = rc.record(
        directory, args.tag, args.commit, args.result, args.scenario_hash, args.tps, source.measured
    )
    print(f"recorded {args.tag} ({tps:.1f} tps) in {path}")
    return 0


def _repair(args: argparse.Namespace) -> int:
    directory = args.history or rc.default_history()
    paths.look(directory, "--history")
    path, kept, dropped = rc.repair(directory)
    for line in dropped:
        print(f"dropped {line}")
    print(f"{path}: {kept} entries kept, {len(dropped)} dropped")
    return 0


def main(args: argparse.Namespace) -> int:
    actions = {"next": _next, "record": _record, "repair": _repair}
    return actions[args.rc_command](args)
