"""Processes of the fault-injection suite (tests/faults/test_faults.py): every process of a
chain carries MARK=<chain id> in its environment (kbisect passes its own on to every
child), so that "no process left" can be checked over the whole machine, reapers
included; and the environment its kbisect runs get.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kbisect.core import reaper, stale
from tests.fakes import ROOT

MARK = "KBISECT_FAULTS"
SUMMARY: list[str] = []  # lines for the end of the pytest session (tests/conftest.py)
GONE_WITHIN_S = reaper.GRACE_S + 3.0


def marked(tag: str) -> list[tuple[int, str]]:
    """(pid, command line) of the live processes whose environment has MARK=tag."""
    needle = f"{MARK}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or needle not in (entry / "environ").read_bytes().split(
                b"\0"
            ):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            found.append((int(entry.name), argv.strip()))
        except (OSError, IndexError):
            continue
    return found


def marked_any(base: Path) -> list[tuple[int, str]]:
    """Live processes of any chain (any MARK value) of the session whose files are under
    base (their cache is there)."""
    found = []
    cache = f"KBISECT_CACHE={base}/".encode()
    for entry in Path("/proc").iterdir():
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            ours = any(e.startswith(f"{MARK}=".encode()) for e in env)
            ours = ours and entry.name.isdigit() and any(e.startswith(cache) for e in env)
            if ours and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append((int(entry.name), (entry / "cmdline").read_text()))
        except (OSError, IndexError):
            continue
    return found


def wait_for(predicate: Callable[[], bool], within: float, every: float = 0.05) -> bool:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True


def check_gone(tag: str, cache: Path, problem: Callable[[str], None]) -> float:
    """After a driver's end: no process of the chain left (after the reaper's grace plus
    3 s), reapers included, and none working in a scratch worktree; how long they took."""
    start = time.monotonic()
    if not wait_for(lambda: not marked(tag), GONE_WITHIN_S):
        problem(f"processes left {GONE_WITHIN_S:.0f}s after the driver: {marked(tag)}")

    def working() -> list[tuple[int, str]]:
        folder = cache / "worktrees"
        return stale.processes_in(folder) if folder.is_dir() else []

    # A process in the middle of its exit has already lost its environment (so `marked`
    # no longer sees it) and its command line, but not yet its working directory: give
    # such a one what is left of the same grace, not a single look (CI saw one, pid
    # 19781 with an empty command line, the instant the marked ones were gone).
    if not wait_for(lambda: not working(), max(0.5, GONE_WITHIN_S - (time.monotonic() - start))):
        problem(f"processes still work in the scratch worktrees: {working()}")
    return time.monotonic() - start


def python_path(shadow: Path) -> str:
    """kbisect first; then a `matplotlib` that fails to import, so that reports render
    without plots (the suite checks that reports render, not their plots: 1.5 s each)."""
    return f"{ROOT}:{shadow}"


def make_shadow(folder: Path) -> Path:
    (folder / "matplotlib").mkdir(parents=True, exist_ok=True)
    (folder / "matplotlib" / "__init__.py").write_text(
        'raise ImportError("matplotlib is left out by the fault-injection suite")\n'
    )
    return folder
