"""Is the `kbisect bisect` driver that started `git bisect run` still there? A step checks
when it starts and again before it answers: a step for a dead driver aborts (128)
instead of measuring for nobody, or giving git a verdict nobody asked for.
"""

from __future__ import annotations

import os
from pathlib import Path

from kbisect.core.exceptions import UserError

DRIVER_ENV = "KBISECT_BISECT_DRIVER"  # pid of the `kbisect bisect` that started git


def check_driver() -> None:
    """UserError (abort) unless the `kbisect bisect` that started git is still alive: it
    must be an ancestor of this step (a dead driver's pid may be some other process's)."""
    pid = os.environ.get(DRIVER_ENV)
    if pid and pid.isdigit() and not _is_ancestor(int(pid)):
        raise UserError(
            f"the kbisect bisect driver (pid {pid}) is gone; "
            "continue with `kbisect bisect --resume`"
        )


def _is_ancestor(pid: int) -> bool:
    here = os.getppid()
    while here > 1:
        if here == pid:
            return True
        try:  # the parent's pid is the 2nd field after the command name "(...)"
            stat = Path(f"/proc/{here}/stat").read_text()
        except OSError:
            return False
        here = int(stat.rsplit(")", 1)[1].split()[1])
    return False
