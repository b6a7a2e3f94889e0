"""Processes an earlier kbisect run left behind, found by their working directory.

Every process of a bisection (`git bisect run`, the steps, their make, vng and QEMU)
runs in the scratch worktree, and a child inherits its parent's working directory. A
resume must not start while one of them still runs: the two would share the worktree.
When a driver dies, its reaper (reaper.py) kills them within a few seconds, so
`wait_gone` gives them that long before naming the first one left.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

WAIT_S = 8.0  # the reaper's SIGTERM grace (5 s), then SIGKILL, with room for a slow host


def processes_in(folder: Path) -> list[tuple[int, str]]:
    """(pid, command line) of every other live process working in `folder` or below."""
    root = str(folder.resolve())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            argv = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            continue  # gone meanwhile, or not ours to look at
        if state != "Z" and (cwd == root or cwd.startswith(root + "/")):
            found.append((int(entry.name), " ".join(a.decode(errors="replace") for a in argv)))
    return sorted(found)


def wait_gone(folder: Path, within: float | None = None) -> tuple[int, str] | None:
    """None once no process works in `folder`; else, after `within` seconds (WAIT_S),
    the first one still there."""
    deadline = time.monotonic() + (WAIT_S if within is None else within)
    while True:
        left = processes_in(folder)
        if not left or time.monotonic() >= deadline:
            return left[0] if left else None
        time.sleep(0.1)
