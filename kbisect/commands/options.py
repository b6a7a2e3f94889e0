"""Command-line options that several commands share, each declared once here.

--target NAME   where kernels run (targets/registry.py)
--arch ARCH     the kernel's arch (default: the target's; for vng, this host's)
--config NAME   an extra Kconfig fragment from kernel-configs/ (repeatable)
--scenario S    a scenario name from harness/scenarios/ or a .toml file
--append ARGS   kernel command-line extras
--set KEY=VALUE a scenario override (repeatable)
--pg-build SPEC, --pg-patch FILE   a PostgreSQL server built from source (compare: -a/-b too)
--retakes N, --disturbed-share F, --count-disturbed   disturbed samples
--resume [RUN_DIR]                 continue an interrupted compare, bisect or study
--references N                     drift-aware reference boots (bisect, bisect-step)
--noise-prior off|auto             the sequential compare's noise prior (stats/prior.py)

and the argparse types of every numeric, structured or ruled text option (core/reading.py's
value rules, which files obey too): a bad value is one line, exit 2, before any work.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kbisect.core import reading
from kbisect.kernel import config, machinebase
from kbisect.measure import retake
from kbisect.study import fanout
from kbisect.targets import monitor, registry
from kbisect.targets.base import Target
from kbisect.targets.ssh import baseconfig

T = TypeVar("T")


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
    p.add_argument(
        f"--append{suffix}", type=kernel_line, default="", help=f"kernel command line extras{what}"
    )


def add_pg(p: argparse.ArgumentParser | argparse._ArgumentGroup, sides: bool = True) -> None:
    """--pg-build SPEC and --pg-patch FILE: the PostgreSQL server that runs, built from a
    source with patches (pgbuild/), instead of the scenario's packaged one; with `sides`
    (compare) also --pg-build-a/-b and --pg-patch-a/-b, a side's own."""
    forms: tuple[tuple[str, str], ...] = (("", "both sides"), ("-a", "side A"), ("-b", "side B"))
    if not sides:
        forms = (("", "every revision"),)
    for suffix, what in forms:
        p.add_argument(
            f"--pg-build{suffix}",
            metavar="SPEC",
            help=f"run PostgreSQL built from PATH[@REV] (a git tree) or debian:MAJOR ({what})",
        )
    for suffix, what in forms:
        add_patch(p, suffix, f" ({what}'s PostgreSQL source)", prefix="pg-")


def add_patch(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    suffix: str = "",
    what: str = "",
    prefix: str = "",
) -> None:
    """--patch FILE (repeatable): a git format-patch file, an mbox (b4 am) or a plain
    unified diff, applied in order on top of the revision (source/patches.py);
    `prefix` "pg-": --pg-patch, on top of a PostgreSQL source (pgbuild/)."""
    p.add_argument(
        f"--{prefix}patch{suffix}",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help=f"apply this patch (format-patch, mbox or diff) on top, in order; repeatable{what}",
    )


def add_set(
    p: argparse.ArgumentParser | argparse._ArgumentGroup, suffix: str = "", what: str = ""
) -> None:
    p.add_argument(
        f"--set{suffix}",
        type=kernel_line,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"scenario override, e.g. postgres.settings.huge_pages=on{what}",
    )


def add_where(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--target and --arch: where the kernel runs, and what it is built for."""
    p.add_argument(
        "--target",
        type=label,
        default="vng",
        metavar="NAME",
        help="where kernels run: vng (a virtme-ng guest on this host, the default), fake, "
        "or a machine: NAME.toml in ~/.config/kbisect/targets/, or a .toml path",
    )
    p.add_argument(
        "--arch", help="kernel arch, x86_64 or arm64 (default: the target's; for vng this host's)"
    )


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


def count_or_auto(minimum: int, maximum: int = 10_000) -> Callable[[str], int | str]:
    """An integer option within [minimum, maximum], or the word auto."""
    number = count(minimum, maximum)

    def parse(text: str) -> int | str:
        if text == "auto":
            return text
        try:
            return number(text)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{exc} (or auto)") from None

    return parse


def out_path(text: str) -> Path:
    """A results directory to write (--out): not empty, which would mean the current one."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} names no directory")
    return Path(text)


def fraction(text: str) -> float:
    """A finite number in [0, 1): a relative effect such as 0.02 (2%); the rule a study
    file's min_effect obeys too."""
    value = _finite(text)
    if problem := reading.fraction(value):
        raise argparse.ArgumentTypeError(f"{text} {problem}")
    return value


def add_min_effect(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--min-effect F (compare, diff): the smallest change called a verdict."""
    p.add_argument(
        "--min-effect",
        type=fraction,
        default=0.02,
        help="smallest change called a regression/improvement (default 0.02 = 2%%)",
    )


def ruled(rule: reading.Rule, kind: str) -> Callable[[str], str]:
    """A text option that obeys `rule` (core/reading.py), kept as given."""

    def parse(text: str) -> str:
        if problem := rule(text):
            raise argparse.ArgumentTypeError(f"{text!r} {problem}")
        return text

    parse.__name__ = kind
    return parse


kernel_line = ruled(reading.line, "line")  # --append, --set, --axis: one line of text
label = ruled(reading.label, "label")  # --label-a/-b, --target ('' would mean vng): one line
tag = ruled(reading.tag, "tag")  # rc record --tag
name = ruled(reading.name, "name")  # a name used as a path (study --name)


TREE_HELP = (
    "kernel git tree, or debian:RELEASE, a Debian release's source imported once "
    "(`kbisect tree list`); default: the embedded 6.12 tree"
)
seed = count(0, 2**63 - 1)  # a random seed: a whole number, 0 or more


def confidence(text: str) -> float:
    """A finite number in (0.5, 1): a probability to reach, such as 0.95."""
    value = _finite(text)
    if not 0.5 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not between 0.5 and 1 (e.g. 0.95)")
    return value


def positive(text: str) -> float:
    """A finite number above zero (a tps figure, seconds)."""
    value = _finite(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be above 0")
    return value


def hours(text: str) -> float:
    """A budget in hours: finite, above zero, at most a year (nan or inf would switch the
    guard it sets off)."""
    value = positive(text)
    if value > 24 * 366:
        raise argparse.ArgumentTypeError(f"{text} hours is more than a year")
    return value


def share(text: str) -> str:
    """`I/N` with 1 <= I <= N (study --share), kept as given."""
    try:
        fanout.parse_share(text)
    except fanout.ShareError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--share {text}: ")) from None
    return text


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not reading.number(value):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    return value


NOISE_PRIOR = ("auto", "off")


def noise_prior(text: str) -> str:
    """--noise-prior: auto (earlier runs' noise as a prior, when there are any) or off."""
    if text not in NOISE_PRIOR:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(NOISE_PRIOR)}")
    return text


def add_noise_prior(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--noise-prior off|auto, for a sequential compare (docs/statistics.md)."""
    p.add_argument(
        "--noise-prior",
        type=noise_prior,
        default="auto",
        help="with --boots auto: auto (default) takes the noise of earlier runs of the "
        "scenario on this machine (the results database) as a prior, and looks first at "
        "2 boots a side; off, the run's own noise only",
    )


# --- disturbed samples (retake.py) ------------------------------------------------------


def add_disturbance(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--retakes, --disturbed-share and --count-disturbed: when a sample counts as
    disturbed, and what then."""
    p.add_argument(
        "--retakes",
        type=count(0, 20),
        default=retake.RETAKES,
        metavar="N",
        help="take a disturbed sample again once the host is quiet, up to N times per "
        f"boot (default {retake.RETAKES}); a disturbed sample never counts: a boot still "
        "disturbed after N retakes is left out of the statistics (0: never retake)",
    )
    p.add_argument(
        "--disturbed-share",
        type=fraction,
        default=monitor.THRESHOLD,
        metavar="F",
        help="a sample is disturbed when other work used more than F of the host's CPUs "
        f"in any {monitor.WINDOW_S:g} s (default {monitor.THRESHOLD:g})",
    )
    p.add_argument(
        "--count-disturbed",
        action="store_true",
        help="count the try after the last retake even when disturbed, flagged in the "
        "report (kbisect's behaviour before disturbed samples never counted)",
    )


def retake_policy(args: argparse.Namespace) -> retake.Policy:
    return retake.Policy(args.retakes, args.disturbed_share, args.count_disturbed)


# --- what a bisection measures: `kbisect bisect` and every step share these -------------


def add_measured(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """What is measured, where, and how a revision is judged (request.Options.measured_argv
    turns them back into argv)."""
    add_scenario(parser, required)
    add_where(parser)
    add_append(parser)
    add_set(parser)
    add_configs(parser)
    add_patch(parser, what=" (on every revision built; one that does not apply: a skip)")
    add_pg(parser, sides=False)
    add = parser.add_argument
    add("--base-config", default="tinyconfig", help="base config for builds")
    add("--lower-is-better", action="store_true", help="the figure is better when lower")
    add(
        "--runs-min",
        type=count(2, 100),
        default=3,
        help="samples before deciding (default 3)",
    )
    add(
        "--runs-max",
        type=count(2, 1000),
        default=10,
        help="skip a revision after this (default 10)",
    )
    add_disturbance(parser)


def add_references(parser: argparse.ArgumentParser, least: int = 0, alias: str = "") -> None:
    """--references N: a boot of the good or the bad reference after every N test boots,
    so that drift is measured and corrected. `alias`: an older spelling still accepted."""
    names = ["--references", *([alias] if alias else [])]
    none = "; 0: none" if least == 0 else ""
    parser.add_argument(
        *names,
        dest="references",
        type=count(least, 1000),
        default=3,
        metavar="N",
        help="a boot of the good or the bad reference after every N test boots, so that "
        f"drift is measured and corrected (default 3{none})",
    )


def add_resume(parser: argparse.ArgumentParser | argparse._ArgumentGroup, what: str) -> None:
    """--resume [RUN_DIR]: continue an interrupted run with its saved options."""
    parser.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="RUN_DIR",
        help=f"continue an interrupted {what} (default: the newest unfinished one); "
        "its saved options apply",
    )


def resume_dir(args: argparse.Namespace) -> Path | None:
    """The run directory --resume names; None for the newest unfinished one."""
    return Path(args.resume) if args.resume else None


def check_base(base: str, option: str = "--base-config") -> None:
    """A base config kbisect knows, a config file, or target:NAME: a machine's running
    config, fetched into the cache now, so that a bad machine is one line and exit 2
    before any build (UserError)."""
    if (name := machinebase.target_name(base)) is not None:
        baseconfig.fetch(name)
    config.check_base(base, option)


def typed(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """A spec dataclass from the parsed options: each field from the option of the same
    name (its dest), unless given here (a renamed or converted one)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    found = {n: getattr(args, n) for n in names - set(given) if hasattr(args, n)}
    return cls(**found, **given)


def paths(given: list[Path]) -> tuple[Path, ...]:
    """Files from the command line, made absolute (a resumed run or a bisect step may
    start elsewhere)."""
    return tuple(p.expanduser().absolute() for p in given)
