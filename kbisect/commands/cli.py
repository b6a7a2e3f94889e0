"""Command-line entry: builds the parser, dispatches to one module per subcommand.

Every subcommand module exposes `configure(parser)` and `main(args) -> int`.
"""

from __future__ import annotations

import argparse
import signal
import sys
from types import ModuleType
from typing import Any, NoReturn

import kbisect
from kbisect import __version__
from kbisect.commands import (
    bisect,
    bisect_step,
    build,
    compare,
    db,
    demo,
    diff,
    doctor,
    export,
    history,
    image,
    ktest_config,
    pg_build,
    rc,
    report,
    run,
    study,
    tree,
)
from kbisect.commands import emu as emu_command
from kbisect.core import interrupt, paths, progress, reading
from kbisect.core.exceptions import EXIT_INTERRUPTED, EXIT_USER, KbisectError

# (name, module, one-line help); each module has configure(parser) and main(args)
COMMANDS: list[tuple[str, ModuleType, str]] = [
    ("doctor", doctor, "check this host and whether KVM is usable"),
    ("tree", tree, "manage kernel trees (import the embedded default)"),
    ("build", build, "build a kernel revision from Kconfig fragments"),
    ("image", image, "make a guest root fs carrying a scenario's PostgreSQL"),
    ("pg-build", pg_build, "build a PostgreSQL server from a git tree and patches"),
    ("run", run, "boot a kernel on a target and run a pgbench scenario there"),
    ("compare", compare, "A/B compare two kernels or command lines"),
    ("report", report, "re-render a report from stored results"),
    ("diff", diff, "compare two stored runs of one scenario with compare's statistics"),
    ("db", db, "the results database: rebuild, info, query"),
    ("export", export, "samples as CSV or JSON, one row per sample"),
    ("bisect", bisect, "bisect a tps regression between two revisions"),
    ("bisect-step", bisect_step, "one `git bisect run` step (used by bisect/run)"),
    ("rc", rc, "pick the next -rc tag to measure and its baseline"),
    ("history", history, "results over kernel tags or time, with change points and drift"),
    ("demo", demo, "create the demo history on the embedded default tree"),
    ("study", study, "kernels x workload settings: steps, bisect lines"),
    ("emu", emu_command, "the emulated machine: an ssh target for tests and demos"),
    ("ktest-config", ktest_config, "write a ktest.pl config whose TEST is a kbisect step"),
]


class _Parser(argparse.ArgumentParser):
    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        """Every argument's text, of every option and subcommand, before its type: bytes
        that are not UTF-8 (lone surrogates here) are refused, as no file, log or
        command line kbisect writes could hold them. (The top parser sees a
        subcommand's arguments first, so the line names the argument, not its option.)"""
        if problem := reading.utf8(arg_string):
            self.error(f"argument {arg_string!r} {problem}: give it as UTF-8")
        return super()._get_value(action, arg_string)

    def error(self, message: str) -> NoReturn:
        one = " ".join(message.splitlines())  # an echoed argument may hold a line break
        self.exit(EXIT_USER, f"{self.prog}: error: {one}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kbisect", description=kbisect.__doc__)
    parser.add_argument("--version", action="version", version=f"kbisect {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, module, help_text in COMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.configure(p)
        p.set_defaults(_main=module.main)
    return parser


def _go_on(what: str) -> str:
    """`what`, and the command that continues the run, when one is in progress."""
    line = progress.resume_line()
    return f"kbisect: {what}; to go on: {line}" if line else f"kbisect: {what}"


def main(argv: list[str] | None = None) -> int:
    interrupt.stop_on()  # SIGTERM and a closed terminal stop like Ctrl-C (unless ignored)
    progress.set_resume([])
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # a usage error (one line, exit 2), --help or --version
        return exc.code if isinstance(exc.code, int) else EXIT_USER
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP before anything started
        print("kbisect: interrupted before it started; nothing was done", file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        code: int = args._main(args)
        return code
    except (paths.UnusableDir, paths.DiskFull) as exc:  # the disk: free space, then go on
        print(_go_on(str(exc)), file=sys.stderr)
        return exc.exit_code
    except KbisectError as exc:
        print(f"kbisect: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # the disk filled or went read-only during the run
        if (full := paths.stopped(exc)) is None:
            raise
        print(_go_on(str(full)), file=sys.stderr)
        return full.exit_code
    except KeyboardInterrupt:
        print(_go_on("interrupted; what was finished is saved"), file=sys.stderr)
        return EXIT_INTERRUPTED


def leave(code: int) -> int:
    """The exit code, once stdout and stderr are flushed while a late Ctrl-C, SIGTERM or
    SIGHUP is still handled; then such signals are ignored, since one landing in the
    interpreter's own last flush printed a traceback and exited 120 after a finished run."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    return code
