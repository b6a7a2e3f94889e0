"""`kbisect demo`: a demo history on the embedded tree (kbisect/source/demo.py)."""

from __future__ import annotations

import argparse
import json

from kbisect.source import demo, tree


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variant",
        choices=list(demo.VARIANTS),
        default=demo.DEFAULT.name,
        help="default: 16 commits, one synthetic regression (branch kbisect-demo); "
        "steps: 24 commits, regression 1 at commit 10, its fix at 15, regression 2 at 19 "
        "(branch kbisect-demo-steps); heavy: the default's history with a 1000 us delay, "
        "a large step on slow hosts and guests too, the main job's (branch kbisect-demo-heavy); "
        "two: 24 commits, two 500 us regressions at commits 8 and 17 that both persist "
        "(branch kbisect-demo-two)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the record as JSON: base, head and regression (default), or base, head "
        "and changes (commit, kind, subject, position) of another variant",
    )


def main(args: argparse.Namespace) -> int:
    which = demo.VARIANTS[args.variant]
    data = demo.create(tree.default_tree(), which)
    if args.json:
        print(json.dumps(data, indent=2))
    elif which is demo.DEFAULT:
        for key in ("base", "head", "regression"):
            print(f"{key}={data[key]}")
    else:
        for key in ("base", "head"):
            print(f"{key}={data[key]}")
        for change in data["changes"]:
            print(f"{change['kind']}={change['commit']} {change['subject']}")
    return 0
