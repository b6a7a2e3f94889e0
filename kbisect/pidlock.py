"""Exclusive locks that name their holder: flock on an open file that holds the pid of
the process holding it, so that a second kbisect can say who is in its way."""

from __future__ import annotations

import fcntl
import os
from typing import IO


def holder(f: IO[str]) -> str | None:
    """Take the lock without waiting: None when taken, else the holder's pid ("?" when it
    has not written it yet). `f` is open with "a+"."""
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        return f.read().strip() or "?"
    return None


def claim(f: IO[str]) -> None:
    """Write this process's pid into the lock file it holds."""
    f.truncate(0)
    f.write(f"{os.getpid()}\n")
    f.flush()
