"""`kbisect tree`: the embedded default tree (imported once), and the check that a path is
a kernel tree (kbisect/source/tree.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kbisect.source import tree


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="tree_command", metavar="ACTION", required=True)
    sub.add_parser("default", help="import (once) and print the embedded default tree")
    check = sub.add_parser("check", help="check that PATH is a kernel tree")
    check.add_argument("path")


def main(args: argparse.Namespace) -> int:
    if args.tree_command == "default":
        print(tree.default_tree())
    else:
        print(tree.check_kernel_tree(Path(args.path)))
    return 0
