"""`kbisect doctor`: can this host build, boot and measure kernels, and is KVM usable
(kbisect/doctor/)? Exit 0 when kbisect can work (warnings allowed), 1 when a check FAILs."""

from __future__ import annotations

import argparse
import json

from kbisect.commands import options
from kbisect.core import arch
from kbisect.core.checks import FAIL
from kbisect.core.exceptions import EXIT_NEGATIVE, EXIT_OK
from kbisect.doctor import doctor
from kbisect.doctor.host import Host


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--recheck", action="store_true", help="probe KVM again instead of using the cached answer"
    )
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument(
        "--arch",
        default=arch.host_arch(),
        choices=[*arch.names(), "all"],
        help="guest architecture to check (default: this host's; all: every one)",
    )
    parser.add_argument(
        "--target",
        type=options.label,
        metavar="NAME",
        help="also check a target (a machine: its ssh, kexec, PostgreSQL, kernel)",
    )


def main(args: argparse.Namespace, host: Host | None = None) -> int:
    arches = arch.names() if args.arch == "all" else [args.arch]
    results = doctor.run(host or Host(), arches, args.recheck, args.target)
    if args.json:
        print(json.dumps(doctor.as_json(results), indent=2, sort_keys=True))
    else:
        print(doctor.render(results))
        print(doctor.summary(results))
    return EXIT_NEGATIVE if any(c.status == FAIL for c in results) else EXIT_OK
