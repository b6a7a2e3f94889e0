"""The one lock kbisect takes where two of its processes must not work at once: an
exclusive flock on a file that names the process holding it.

It guards a scratch worktree slot (a second command waits its turn), the bisect driver of
a repository, an ssh machine and a compare run directory (a second one is refused). Its
holder writes its pid into the file once it holds the lock, so that the next one can say
who is in its way. The lock belongs to the open file, not to the name: a holder that dies,
even by SIGKILL, leaves it free (with its stale pid, which the next holder overwrites), and
a child started through proc does not inherit it.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

from kbisect.core import progress
from kbisect.core.exceptions import UserError


class Busy(UserError):
    """Another kbisect process holds the lock, and this one does not wait for it."""


def hold(path: Path, *, wait: bool, busy: Callable[[str], str]) -> IO[str]:
    """Take the lock on `path` and write this process's pid there; return the open file,
    which holds the lock until it is closed (`with hold(...):`).

    When another process holds it, `busy(its pid)` ("?" before it has written it) is the
    line said: printed before waiting for the lock (wait=True), or raised as Busy.
    The file is opened for appending, never truncated before the lock is held: the pid
    there is always the holder's (or a dead one's), never a waiter's blank."""
    path.parent.mkdir(parents=True, exist_ok=True)
    f = path.open("a+")
    try:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            line = busy(f.read().strip() or "?")
            if not wait:
                raise Busy(line) from None
            progress.step(line)
            fcntl.flock(f, fcntl.LOCK_EX)
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
    except BaseException:
        f.close()
        raise
    return f
