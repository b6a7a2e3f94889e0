"""Progress lines for long work, the command line that reproduces a run, and the one that
continues the run in progress (said when it is interrupted or its disk fills)."""

from __future__ import annotations

import shlex
import sys
import time

_START = time.monotonic()
_COMMAND: list[str] = []  # set when sys.argv is not the kbisect command line
_RESUME: list[str] = []  # the command that continues the run in progress


def elapsed() -> str:
    s = int(time.monotonic() - _START)
    return f"{s // 60:02d}:{s % 60:02d}"


def step(message: str) -> None:
    """One progress line on stderr: `[kbisect 03:12] booting kernel ...`."""
    print(f"[kbisect {elapsed()}] {message}", file=sys.stderr, flush=True)


def warn(message: str) -> None:
    print(f"kbisect: warning: {message}", file=sys.stderr, flush=True)


def set_command(words: list[str]) -> None:
    """The command line that reproduces this process, when sys.argv is not it (bisect/run
    runs `python -c`: it reproduces as `kbisect bisect-step ARGS`); [] to unset."""
    _COMMAND[:] = words


def set_resume(words: list[str]) -> None:
    """The command that continues the run in progress (`kbisect compare --resume DIR`),
    set once its directory holds what a resume needs; [] to unset."""
    _RESUME[:] = words


def resume_line() -> str:
    """The command that continues the run in progress, shell-quoted; "" when none."""
    return shlex.join(_RESUME) if _RESUME else ""


def reproduce_line(argv: list[str] | None = None) -> str:
    """The kbisect command line that reproduces this invocation."""
    if argv is None and _COMMAND:
        return shlex.join(_COMMAND)
    args = sys.argv[1:] if argv is None else argv
    return shlex.join(["kbisect", *args])


def log_header(argv: list[str] | None = None) -> str:
    """First line of every run log."""
    return f"# reproduce: {reproduce_line(argv)}\n"
