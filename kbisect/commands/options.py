"""Command-line options that several commands share, each declared once here.

--target NAME   where kernels run (targets/__init__.py)
--arch ARCH     the kernel's arch (default: the target's; for vng, this host's)
--config NAME   an extra Kconfig fragment from kernel-configs/ (repeatable)
--scenario S    a scenario name from harness/scenarios/ or a .toml file
--append ARGS   kernel command-line extras
--set KEY=VALUE a scenario override (repeatable)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from kbisect.measure import retake
from kbisect.targets import monitor, registry
from kbisect.targets.base import Target


def add_target(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument(
        "--target",
        default="vng",
        metavar="NAME",
        help="where kernels run: vng (a virtme-ng guest on this host, the default), fake, "
        "or a machine: NAME.toml in ~/.config/kbisect/targets/, or a .toml path",
    )


def add_arch(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument(
        "--arch",
        help="kernel arch, x86_64 or arm64 (default: the target's; for vng this host's)",
    )


def add_configs(p: argparse.ArgumentParser | argparse._ArgumentGroup, what: str = "") -> None:
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME",
        help=f"extra Kconfig fragment from kernel-configs/{what} (repeatable)",
    )


def add_scenario(
    p: argparse.ArgumentParser | argparse._ArgumentGroup, required: bool = True
) -> None:
    p.add_argument("--scenario", required=required, help="scenario name or .toml file")


def add_append(
    p: argparse.ArgumentParser | argparse._ArgumentGroup, suffix: str = "", what: str = ""
) -> None:
    p.add_argument(f"--append{suffix}", default="", help=f"kernel command line extras{what}")


def add_set(
    p: argparse.ArgumentParser | argparse._ArgumentGroup, suffix: str = "", what: str = ""
) -> None:
    p.add_argument(
        f"--set{suffix}",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"scenario override, e.g. postgres.settings.huge_pages=on{what}",
    )


def add_where(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--target and --arch: where the kernel runs, and what it is built for."""
    add_target(p)
    add_arch(p)


def target(args: argparse.Namespace) -> Target:
    """The target the options name, its arch resolved once."""
    return registry.get(args.target, args.arch)


# --- argparse types: a bad value is one line and exit 2, before any work ---------------


def count(minimum: int, maximum: int = 10_000) -> Callable[[str], int]:
    """An integer option within [minimum, maximum]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{value} is not in {minimum}..{maximum}")
        return value

    return parse


def fraction(text: str) -> float:
    """A finite number in [0, 1): a relative effect such as 0.02 (2%)."""
    value = _finite(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 1) (0.02 means 2%)")
    return value


def positive(text: str) -> float:
    """A finite number above zero (a tps figure, seconds)."""
    value = _finite(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be above 0")
    return value


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    return value


# --- disturbed samples (retake.py) ------------------------------------------------------


def add_disturbance(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--retakes and --disturbed-share: when a sample counts as disturbed, and what then."""
    p.add_argument(
        "--retakes",
        type=count(0, 20),
        default=retake.RETAKES,
        metavar="N",
        help="take a disturbed sample again, up to N times per boot (default "
        f"{retake.RETAKES}); 0 keeps disturbed samples, flagged in the report",
    )
    p.add_argument(
        "--disturbed-share",
        type=fraction,
        default=monitor.THRESHOLD,
        metavar="F",
        help="a sample is disturbed when other work used more than F of the host's CPUs "
        f"in any {monitor.WINDOW_S:g} s (default {monitor.THRESHOLD:g})",
    )


def retake_policy(args: argparse.Namespace) -> retake.Policy:
    return retake.Policy(args.retakes, args.disturbed_share)
