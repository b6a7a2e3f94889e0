"""`kbisect image`: the root fs a foreign-arch guest boots on (kbisect/targets/vng/rootfs.py;
images/README.md)."""

from __future__ import annotations

import argparse
import json

from kbisect.commands import options
from kbisect.core import arch
from kbisect.targets.vng import rootfs


def configure(parser: argparse.ArgumentParser) -> None:
    foreign = [n for n in arch.names() if not arch.get(n).is_native()]
    default = foreign[0] if foreign else arch.host_arch()
    parser.add_argument(
        "--arch", default=default, choices=arch.names(), help=f"guest arch (default {default})"
    )
    parser.add_argument(
        "--pg-major", type=options.count(10, 99), default=rootfs.PG_MAJOR, help="PostgreSQL major"
    )
    parser.add_argument(
        "--mirror", help=f"Debian mirror URL (default: mmdebstrap's for {rootfs.SUITE})"
    )
    parser.add_argument("--json", action="store_true", help="print the image manifest")


def main(args: argparse.Namespace) -> int:
    root = rootfs.build(arch.get(args.arch), args.pg_major, args.mirror)
    if args.json:
        print(json.dumps(json.loads((root.parent / rootfs.MANIFEST).read_text()), indent=2))
    else:
        print(root)
    return 0
