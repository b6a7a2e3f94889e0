"""Command-line entry: builds the parser, dispatches to one module per subcommand.

Every subcommand module exposes `configure(parser)` and `main(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from types import FrameType, ModuleType
from typing import NoReturn

import kbisect
from kbisect import __version__
from kbisect.exceptions import EXIT_INTERRUPTED, EXIT_USER, KbisectError

# (name, module, one-line help)
COMMANDS: list[tuple[str, str, str]] = [
    ("doctor", "kbisect.doctor", "check this host and whether KVM is usable"),
    ("tree", "kbisect.tree", "manage kernel trees (import the embedded default)"),
    ("build", "kbisect.build", "build a kernel revision from Kconfig fragments"),
    ("image", "kbisect.image", "make the root fs for foreign-arch guests (arm64 on x86_64)"),
    ("run", "kbisect.measure", "boot a kernel and run a pgbench scenario inside"),
    ("compare", "kbisect.compare", "A/B compare two kernels or command lines"),
    ("report", "kbisect.report", "re-render a report from stored results"),
    ("bisect", "kbisect.bisect.driver", "bisect a tps regression between two revisions"),
    ("bisect-step", "kbisect.bisect.step", "one `git bisect run` step (used by bisect/run)"),
    ("rc", "kbisect.rc", "pick the next -rc tag to measure and its baseline"),
    ("demo", "kbisect.demo", "create the demo history on the embedded default tree"),
    ("emu", "kbisect.emu.command", "the emulated machine: an ssh target for tests and demos"),
    ("ktest-config", "kbisect.ktest", "write a ktest.pl config whose TEST is a kbisect step"),
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USER, f"{self.prog}: error: {message}\n")


def _module(path: str) -> ModuleType | None:
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as exc:
        if exc.name == path:
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kbisect", description=kbisect.__doc__)
    parser.add_argument("--version", action="version", version=f"kbisect {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, path, help_text in COMMANDS:
        module = _module(path)
        if module is None:
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.configure(p)
        p.set_defaults(_main=module.main)
    return parser


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _sigterm)
    args = build_parser().parse_args(argv)
    try:
        code: int = args._main(args)
        return code
    except KbisectError as exc:
        print(f"kbisect: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("kbisect: interrupted; what was finished is saved", file=sys.stderr)
        return EXIT_INTERRUPTED
