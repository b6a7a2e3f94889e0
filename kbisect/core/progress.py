"""Progress lines for long work, the command line that reproduces a run, and the one that
continues the run in progress (said when it is interrupted or its disk fills).

Where long work stands (status: a build's objects, a compare's boots) is one live line on
a terminal, redrawn in place by tqdm, and plain step() lines in a log or CI; either says
the time left at the rate so far (time_left)."""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass, field
from typing import Any

try:
    from tqdm import tqdm as _tqdm
except ImportError:  # an environment set up before tqdm was a dependency: plain lines
    _tqdm = None

_START = time.monotonic()
EVERY_S = 15.0  # a plain status line at most this often, for work that moves by the line
_LIVE: list[Any] = []  # the live line on a terminal, while one is shown
_SHOWN: list[float] = []  # when the last status line was shown
_COMMAND: list[str] = []  # set when sys.argv is not the kbisect command line
_RESUME: list[str] = []  # the command that continues the run in progress


def elapsed() -> str:
    s = int(time.monotonic() - _START)
    return f"{s // 60:02d}:{s % 60:02d}"


def step(message: str) -> None:
    """One progress line on stderr: `[kbisect 03:12] booting kernel ...`."""
    _say(f"[kbisect {elapsed()}] {message}")


def warn(message: str) -> None:
    _say(f"kbisect: warning: {message}")


def _say(line: str) -> None:
    """A line on stderr; above the live line while one is shown."""
    if _LIVE:
        _LIVE[0].write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)


def time_left(spent: float, done: float, remaining: float) -> str:
    """`remaining` units at the rate so far (`done` units in `spent` seconds), as a
    status line says it: "~40 s left", "~6 min left", "~1 h 05 min left"; "" before the
    first unit is done (no rate yet)."""
    if done <= 0 or remaining <= 0:
        return ""
    s = round(spent / done * remaining)
    if s < 60:
        return f"~{max(s, 1)} s left"
    m = round(s / 60)
    return f"~{m} min left" if m < 60 else f"~{m // 60} h {m % 60:02d} min left"


@dataclass
class Clock:
    """Units of work done since it was made (the caller counts them): the time left."""

    since: float = field(default_factory=time.monotonic)
    done: int = 0

    def left(self, remaining: float) -> str:
        """time_left at this clock's rate so far."""
        return time_left(time.monotonic() - self.since, self.done, remaining)


def status(message: str, every: float = 0.0) -> None:
    """Where long work stands: on a terminal the one live line, redrawn in place (at most
    10 times a second); in a log or CI a step() line, each one when `every` is 0, else at
    most every `every` seconds, the first `every` seconds after the work's first."""
    now = time.monotonic()
    live = _tqdm is not None and sys.stderr.isatty()
    if _SHOWN and now - _SHOWN[0] < (min(every, 0.1) if live else every):
        return
    if live:
        if not _LIVE:
            _LIVE.append(_tqdm(file=sys.stderr, bar_format="{desc}", leave=False))
        _LIVE[0].set_description_str(f"[kbisect {elapsed()}] {message}")
    elif _SHOWN or not every:
        step(message)
    _SHOWN[:] = [now]


def done() -> None:
    """The work status() followed is over: the live line goes (the next one starts anew)."""
    if _LIVE:
        _LIVE.pop().close()
    _SHOWN.clear()


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
