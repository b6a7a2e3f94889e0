"""The reaper: kills a kbisect process's children when it dies, however it dies (kill -9
included), so that no `git bisect run`, bisect step, make, vng, QEMU or ssh outlives it.

core/proc.py starts every child in a process group of its own and names that group
here. The reaper is one small process per kbisect process, started with its first
child, in a session of its own (a signal to kbisect's group or terminal does not reach
it). Its stdin is a pipe whose write end only kbisect holds (close-on-exec: no child
inherits it). kbisect writes `+PGID` when a child starts and `-PGID` once it is done.
End of file means kbisect is gone: the reaper sends SIGTERM to every group still named,
SIGKILL to those still there after GRACE_S seconds, and exits.

Standard library only: it runs as a script (`python -I -S reaper.py`), without kbisect
or a virtualenv on its path.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterable

GRACE_S = 5.0


def groups_left(lines: Iterable[bytes]) -> list[int]:
    """The groups named and not released, in order, once the stream ends."""
    groups: dict[int, None] = {}
    for raw in lines:
        text = raw.decode("ascii", "replace").strip()
        if text[:1] == "+" and text[1:].isdigit():
            groups[int(text[1:])] = None
        elif text[:1] == "-" and text[1:].isdigit():
            groups.pop(int(text[1:]), None)
    return list(groups)


def _signal(pgid: int, sig: int) -> bool:
    """Send sig to the group; False if it has no process left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _running(pgid: int) -> bool:
    """Has the group a member that is not a zombie? A zombie runs nothing: it waits for
    its parent, or, once that died (kill -9 of kbisect), for init to reap it, which some
    inits do only every second or so."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for name in entries:
        try:
            with open(f"/proc/{name}/stat") as f:  # state, ppid, pgrp after "(comm)"
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def kill_all(groups: list[int], grace: float = GRACE_S) -> None:
    """SIGTERM each group, then SIGKILL whatever still runs after `grace` seconds."""
    left = [g for g in groups if g > 1 and _signal(g, signal.SIGTERM)]
    deadline = time.monotonic() + grace
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [g for g in left if _signal(g, 0) and _running(g)]
    for g in left:
        _signal(g, signal.SIGKILL)


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    kill_all(groups_left(iter(sys.stdin.buffer.readline, b"")))


if __name__ == "__main__":
    main()
