"""`kbisect tree`: the trees kbisect keeps in its cache (the embedded default and Debian
releases, `debian:7.2`), and the check that a path is a kernel tree (kbisect/source/tree.py,
kbisect/source/release.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kbisect.source import release, tree


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="tree_command", metavar="ACTION", required=True)
    sub.add_parser("default", help="import (once) and print the embedded default tree")
    add = sub.add_parser(
        "add",
        help="fetch a Debian release's kernel source (debian:7.2) and import it once",
    )
    add.add_argument("name", metavar="debian:RELEASE", help="e.g. debian:7.2, debian:6.1")
    sub.add_parser("list", help="the default tree and the Debian releases, imported or not")
    check = sub.add_parser("check", help="check that PATH is a kernel tree")
    check.add_argument("path")


def main(args: argparse.Namespace) -> int:
    if args.tree_command == "default":
        print(tree.default_tree())
    elif args.tree_command == "add":
        path = release.add(args.name)
        print(f"{args.name}\t{release.imported_tag(path)}\t{path}")
    elif args.tree_command == "list":
        for t in tree.listed():
            state = f"{t.tag} {t.commit}" if t.tag else "not imported"
            print(f"{t.name:<12} {state:<34} {t.path}")
    else:
        print(tree.check_kernel_tree(Path(args.path)))
    return 0
