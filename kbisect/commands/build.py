"""`kbisect build`: one kernel revision, from Kconfig fragments, into a cached artifact
(kbisect/kernel/build.py)."""

from __future__ import annotations

import argparse
import json

from kbisect.commands import options
from kbisect.kernel import build, kconfig
from kbisect.source import patches, tree


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tree", help=options.TREE_HELP)
    parser.add_argument("--rev", default="HEAD", help="revision to build (default HEAD)")
    options.add_where(parser)
    options.add_configs(parser)
    parser.add_argument(
        "--base",
        default="tinyconfig",
        help="tinyconfig (default), allnoconfig, defconfig, a config FILE, or target:NAME "
        "(a machine's running config, its loaded drivers built in: docs/machines.md)",
    )
    parser.add_argument(
        "--allow-dropped",
        action="append",
        default=[],
        metavar="SYMBOL",
        help="accept that olddefconfig drops SYMBOL",
    )
    options.add_patch(parser)
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="build the tree's checkout itself (for `git bisect run`; with --patch, its "
        "commit patched, in kbisect's own checkout)",
    )
    parser.add_argument(
        "-j", "--jobs", type=options.count(0, 4096), default=0, help="make jobs (0: one per CPU)"
    )
    parser.add_argument("--json", action="store_true", help="print the manifest as JSON")


def request(args: argparse.Namespace) -> build.Request:
    options.check_base(args.base, "--base")
    return build.Request(
        tree=tree.resolve(args.tree),
        rev=args.rev,
        arch=options.target(args).arch,
        configs=tuple(args.config),
        base=args.base,
        allow_dropped=frozenset(kconfig.allowed_symbols(args.allow_dropped)),
        in_place=args.in_place,
        jobs=args.jobs,
        patches=patches.read_all(args.patch),
    )


def main(args: argparse.Namespace) -> int:
    result = build.build(request(args))
    if args.json:
        print(json.dumps(result.manifest, indent=2, sort_keys=True))
    else:
        print(result.image)
    return 0
