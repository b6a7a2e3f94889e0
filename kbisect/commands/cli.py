"""Command-line entry: builds the parser, dispatches to one module per subcommand.

Every subcommand module exposes `configure(parser)` and `main(args) -> int`. `main` turns
every error into one line and an exit code (docs/exit-codes.md): kbisect's own errors by
their class, an OSError left over by its file (2 when the command line named that path,
else 3), a stdout that cannot be written (`> /dev/full`, closed) by 3; never a traceback.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn, TextIO

import shtab

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
from kbisect.core import interrupt, paths, proc, progress, reading
from kbisect.core.exceptions import (
    EXIT_INFRA,
    EXIT_INTERRUPTED,
    EXIT_USER,
    InfraError,
    KbisectError,
)
from kbisect.source import git

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


def commit() -> str:
    """The checkout kbisect runs from, as `git describe` names it (`-dirty` with local
    changes); "unknown" when it is no git checkout or git cannot tell."""
    home = Path(kbisect.__file__).resolve().parent.parent
    if not (home / ".git").exists():
        return "unknown"
    try:
        found = proc.run(
            git.command(home, "describe", "--tags", "--always", "--dirty", "--abbrev=12"),
            check=False,
            capture=True,
            timeout=10,
        )
    except (KbisectError, OSError):
        return "unknown"
    named = found.output.strip()
    return named if found.returncode == 0 and named and "\n" not in named else "unknown"


class _Version(argparse.Action):
    """--version: the version and the commit, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        print(f"kbisect {__version__} ({commit()})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kbisect", description=kbisect.__doc__)
    parser.add_argument("--version", action=_Version, help="print the version and commit")
    shtab.add_argument_to(parser, help="print a completion script for this shell")
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


class StdoutLost(InfraError):
    """Standard output cannot be written: `> /dev/full`, a full disk, a closed pipe."""

    def __init__(self, exc: OSError) -> None:
        super().__init__(f"cannot write to standard output: {exc.strerror or exc}")
        self.errno = exc.errno


class _Stdout(io.TextIOBase):
    """sys.stdout while a command runs: a write that fails raises StdoutLost, so that it
    is told apart from a file kbisect writes (whose disk-full line says what was saved)."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.lost = False

    def write(self, text: str, /) -> int:
        try:
            return self.inner.write(text)
        except OSError as exc:
            raise self._lost(exc) from None

    def flush(self) -> None:
        try:
            self.inner.flush()
        except OSError as exc:
            raise self._lost(exc) from None

    def _lost(self, exc: OSError) -> StdoutLost:
        self.lost = True
        return StdoutLost(exc)

    def fileno(self) -> int:
        return self.inner.fileno()

    def isatty(self) -> bool:
        return self.inner.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.inner.encoding


def main(argv: list[str] | None = None) -> int:
    if sys.stdout is None:  # started with stdout closed: fd 1 would be the next file opened
        print(
            "kbisect: standard output is closed; redirect it (to /dev/null to drop it)",
            file=sys.stderr,
        )
        return EXIT_INFRA
    interrupt.stop_on()  # SIGTERM and a closed terminal stop like Ctrl-C (unless ignored)
    progress.set_resume([])
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # a usage error (one line, exit 2), --help or --version
        return exc.code if isinstance(exc.code, int) else EXIT_USER
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP before anything started
        print("kbisect: interrupted before it started; nothing was done", file=sys.stderr)
        return EXIT_INTERRUPTED
    stdout = sys.stdout
    sys.stdout = guarded = _Stdout(stdout)
    try:
        return _run(args, sys.argv[1:] if argv is None else argv)
    finally:  # a lost stdout is not flushed again (by leave or at exit: exit 120)
        sys.stdout = None if guarded.lost else stdout  # type: ignore[assignment]


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    try:
        if args._main is not bisect_step.main:  # a step answers git: it checks its own
            paths.environment()
        code: int = args._main(args)
        sys.stdout.flush()
        return code
    except StdoutLost as exc:
        if exc.errno != errno.EPIPE:  # a reader that stopped reading: quiet, as git is
            print(f"kbisect: {exc}", file=sys.stderr)
        return exc.exit_code
    except (paths.UnusableDir, paths.DiskFull) as exc:  # the disk: free space, then go on
        print(_go_on(str(exc)), file=sys.stderr)
        return exc.exit_code
    except KbisectError as exc:
        print(f"kbisect: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        if (full := paths.stopped(exc)) is not None:  # the disk filled or went read-only
            print(_go_on(str(full)), file=sys.stderr)
            return full.exit_code
        return _os_error(exc, argv)
    except RuntimeError as exc:  # Python 3.11's Path.resolve() on a loop of links
        if not str(exc).startswith(LOOP):
            raise
        loop = str(exc).removeprefix(LOOP).strip("'")
        return _os_error(OSError(errno.ELOOP, "a loop of symbolic links", loop), argv)
    except KeyboardInterrupt:
        print(_go_on("interrupted; what was finished is saved"), file=sys.stderr)
        return EXIT_INTERRUPTED


LOOP = "Symlink loop from "


def _os_error(exc: OSError, argv: list[str]) -> int:
    """One line naming the file; exit 2 for a path the command line named, else 3."""
    where = f"{exc.filename}: " if exc.filename else ""
    print(f"kbisect: {where}{exc.strerror or exc}", file=sys.stderr)
    return EXIT_USER if _given(exc.filename, argv) else EXIT_INFRA


def _given(filename: object, argv: list[str]) -> bool:
    """`filename` is a path the command line named, or one inside it: the user's (exit 2);
    any other is kbisect's own or the system's (exit 3)."""
    if not isinstance(filename, str | bytes | os.PathLike):
        return False
    name = os.path.abspath(os.fsdecode(filename))
    for word in argv:
        if word.startswith("-"):
            word = word.partition("=")[2]
        if not word:
            continue
        given = os.path.abspath(word)
        if name == given or name.startswith(given.rstrip("/") + "/"):
            return True
    return False


def leave(code: int) -> int:
    """The exit code, once stdout and stderr are flushed while a late Ctrl-C, SIGTERM or
    SIGHUP is still handled; then such signals are ignored, since one landing in the
    interpreter's own last flush printed a traceback and exited 120 after a finished run.
    A stdout that cannot take the rest (`> /dev/full`) is one line and exit 3 (a closed
    pipe: quiet, the command's own code), and is not flushed again at exit."""
    try:
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
        except OSError as exc:
            sys.stdout = None  # the interpreter's last flush would fail again: exit 120
            if exc.errno != errno.EPIPE:
                print(f"kbisect: {StdoutLost(exc)}", file=sys.stderr)
                code = EXIT_INFRA
        if sys.stderr is not None:
            sys.stderr.flush()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except OSError:
        sys.stderr = None  # nowhere left to say it
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    return code
