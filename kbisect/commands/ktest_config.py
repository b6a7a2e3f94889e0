"""`kbisect ktest-config`: a ktest.pl config for a machine target whose TEST is
`kbisect bisect-step --booted` (kbisect/bisect/git/ktest.py; docs/ktest.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kbisect.bisect.git import ktest
from kbisect.commands import options
from kbisect.core import atomic, paths


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--target",
        type=options.label,
        required=True,
        metavar="NAME",
        help='a machine target (kind = "ssh")',
    )
    options.add_scenario(parser)
    add(
        "--threshold",
        type=options.positive,
        metavar="TPS",
        help="good above it (TEST_TYPE bisect)",
    )
    add(
        "--min-config",
        type=Path,
        help="the config ktest starts every build from: a kbisect build's `config` "
        "(e.g. of `kbisect build --base target:NAME`)",
    )
    add(
        "--no-build",
        type=Path,
        metavar="IMAGE",
        help="BUILD_TYPE = nobuild: ktest installs IMAGE as it is (a TEST round, no build)",
    )
    add("--initrd", help="an initramfs on the machine to kexec with (a distro kernel's)")
    add(
        "--tree",
        default=None,
        help="kernel tree to bisect (default embedded); ktest builds and bisects in a "
        "scratch worktree of it (BUILD_DIR), never in the tree itself",
    )
    add("--test-type", choices=("test", "bisect"), default="bisect")
    add("--good", help="BISECT_GOOD (TEST_TYPE bisect)")
    add("--bad", help="BISECT_BAD (TEST_TYPE bisect)")
    add(
        "--output-dir",
        type=Path,
        help=f"ktest's OUTPUT_DIR (default: {ktest.OUTPUT_SUBDIR} in ktest's scratch worktree)",
    )
    add("-j", "--jobs", type=options.count(1, 4096), default=2, help="make jobs (default 2)")
    add("--out", type=Path, help="config file to write (default: print it)")


def main(args: argparse.Namespace) -> int:
    if args.out:
        paths.output(args.out, "--out", "file")
    text = ktest.make(options.typed(ktest.Config, args))
    if args.out:
        atomic.write_text(args.out, text)
        print(args.out)
    else:
        print(text, end="")
    return 0
