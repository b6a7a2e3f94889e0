"""`kbisect emu {image,up,down,reset,status}`: the emulated machine (kbisect/targets/emu/)."""

from __future__ import annotations

import argparse
import json

from kbisect.commands import options
from kbisect.targets.emu import image, vm, where


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="emu_command", metavar="ACTION", required=True)
    p = sub.add_parser("image", help="make the machine's Debian 12 disk with mmdebstrap (once)")
    p.add_argument("--mirror", help=f"Debian mirror URL (default: mmdebstrap's for {image.SUITE})")
    p.add_argument("--force", action="store_true", help="make it again even if it exists")
    p = sub.add_parser("up", help="power the machine on; write its target file")
    p.add_argument("--memory-mb", type=options.count(256, 1 << 20), default=2048)
    p.add_argument("--cpus", type=options.count(1, 1024), default=2)
    p.add_argument("--fresh", action="store_true", help="start from the pristine disk")
    sub.add_parser("down", help="power the machine off (clean shutdown, then kill)")
    sub.add_parser("reset", help="power-cycle the machine (QMP system_reset)")
    sub.add_parser("status", help="is it running; where its files are (JSON)")
    for action in sub.choices.values():
        action.add_argument(
            "--name",
            type=options.name,
            default=where.DEFAULT_NAME,
            help="which machine (default emu)",
        )


def main(args: argparse.Namespace) -> int:
    action = args.emu_command
    if action == "image":
        print(image.build(args.mirror, args.force))
    elif action == "up":
        print(json.dumps(vm.up(args.name, args.memory_mb, args.cpus, args.fresh), indent=2))
    elif action == "down":
        print("powered off" if vm.down(args.name) else "was not running")
    elif action == "reset":
        vm.reset(args.name)
        print("reset")
    else:
        print(json.dumps(vm.status(args.name), indent=2))
    return 0
