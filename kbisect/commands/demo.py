"""`kbisect demo`: the demo history on the embedded tree (kbisect/source/demo.py)."""

from __future__ import annotations

import argparse
import json

from kbisect.source import demo, tree


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print base/head/regression as JSON")


def main(args: argparse.Namespace) -> int:
    data = demo.create(tree.default_tree())
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        for key in ("base", "head", "regression"):
            print(f"{key}={data[key]}")
    return 0
