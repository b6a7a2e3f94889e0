"""`kbisect image`: the root fs a guest boots on, carrying the PostgreSQL a scenario pins
(kbisect/targets/vng/rootfs.py; images/README.md)."""

from __future__ import annotations

import argparse
import dataclasses
import json

from kbisect.commands import options
from kbisect.core import arch
from kbisect.core.exceptions import UserError
from kbisect.scenario import profile, server
from kbisect.scenario import scenario as scenario_mod
from kbisect.targets.vng import rootfs


def configure(parser: argparse.ArgumentParser) -> None:
    host = arch.host_arch()
    parser.add_argument(
        "--arch", default=host, choices=arch.names(), help=f"guest arch (default {host})"
    )
    pin = parser.add_mutually_exclusive_group()
    pin.add_argument(
        "--scenario",
        metavar="S",
        help="make the root this scenario's [postgres] pins (a name or a .toml file)",
    )
    pin.add_argument(
        "--pg-major",
        type=options.count(10, 99),
        help=f"PostgreSQL major (default {server.DEFAULT_PIN.major}; suites: {_suites()})",
    )
    parser.add_argument(
        "--pg-version", metavar="V", help="an exact Debian version of the major (e.g. 17.12-1)"
    )
    parser.add_argument(
        "--with-perf",
        action="store_true",
        help="add perf (linux-perf), as a scenario with [profile] enabled needs "
        "(implied by such a --scenario)",
    )
    parser.add_argument("--mirror", help="Debian mirror URL (default: mmdebstrap's)")
    parser.add_argument("--json", action="store_true", help="print the image manifest")


def _suites() -> str:
    return ", ".join(f"{m} {s}" for m, s in sorted(server.SUITES.items()))


def main(args: argparse.Namespace) -> int:
    if args.scenario:
        if args.pg_version:
            raise UserError("--pg-version goes with --pg-major, not --scenario")
        data = scenario_mod.load(args.scenario).data
        pin = dataclasses.replace(server.Pin.of(data), extras=profile.packages(data))
    else:
        pin = server.Pin(args.pg_major or server.DEFAULT_PIN.major, args.pg_version)
    if args.with_perf:
        pin = dataclasses.replace(pin, extras=profile.PACKAGES)
    if problem := pin.problem():  # the command's own input: refused before anything
        raise UserError(problem)
    a = arch.get(args.arch)
    root = rootfs.build(a, pin, args.mirror)
    if args.json:
        print(json.dumps(rootfs.manifest(a, pin), indent=2))
    else:
        print(root)
    return 0
