"""The pid-naming lock (kbisect/core/lock.py), held and contended by real second
processes: who holds it is named, a waiter waits and a refused one is refused, the pid in
the file is always the holder's, and a dead holder leaves the lock free."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbisect.core import lock, paths

# Takes the lock (waiting for it with WAIT=1), says "held", then holds it until its stdin
# closes; with CHILD=1 it first starts a `sleep` that outlives it.
HOLDER = """
import os, subprocess, sys
from pathlib import Path
from kbisect.core import lock
path = Path(sys.argv[1])
with lock.hold(path, wait=os.environ.get("WAIT") == "1", busy=lambda pid: f"held by {pid}"):
    if os.environ.get("CHILD") == "1":
        print(subprocess.Popen(["sleep", "60"]).pid, flush=True)
    print("held", flush=True)
    sys.stdin.read()
"""


def holder(path: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=paths.CHECKOUT,
        env={**os.environ, **env},
    )


def release(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None
    p.stdin.close()
    assert p.wait(timeout=30) == 0


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """The lock at tmp_path/x.lock, held by a second process."""
    path = tmp_path / "x.lock"
    p = holder(path)
    assert p.stdout is not None and p.stdout.readline() == "held\n"
    yield path, p
    if p.poll() is None:
        p.kill()
        p.wait()


def test_a_free_lock_is_taken_and_names_this_process(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "x.lock"  # its folder is made
    with lock.hold(path, wait=False, busy=str):
        assert path.read_text() == f"{os.getpid()}\n"


def test_a_refused_one_names_the_holder_and_leaves_its_pid(
    held: tuple[Path, subprocess.Popen[str]],
) -> None:
    path, p = held
    with pytest.raises(lock.Busy, match=rf"^in use by pid {p.pid}$"):
        lock.hold(path, wait=False, busy=lambda pid: f"in use by pid {pid}")
    assert path.read_text() == f"{p.pid}\n"
    release(p)
    with lock.hold(path, wait=False, busy=str):  # free once the holder is done
        assert path.read_text() == f"{os.getpid()}\n"


def test_a_waiter_says_who_holds_it_once_and_writes_its_pid_only_once_it_holds(
    held: tuple[Path, subprocess.Popen[str]],
) -> None:
    path, first = held
    second = holder(path, WAIT="1")
    assert second.stderr is not None and second.stdout is not None
    assert f"held by {first.pid}" in second.stderr.readline()  # before waiting
    time.sleep(0.5)
    assert second.poll() is None  # waiting
    assert path.read_text() == f"{first.pid}\n"  # the holder's pid, not the waiter's
    release(first)
    assert second.stdout.readline() == "held\n"
    assert path.read_text() == f"{second.pid}\n"
    release(second)
    assert second.stderr.read() == ""  # said once


def test_a_dead_holder_leaves_the_lock_free_even_with_its_child_alive(tmp_path: Path) -> None:
    """SIGKILL: no cleanup ran; the lock belongs to the holder's open file, which its
    child (started while it held the lock) does not share."""
    path = tmp_path / "x.lock"
    p = holder(path, CHILD="1")
    assert p.stdout is not None
    child = int(p.stdout.readline())
    try:
        assert p.stdout.readline() == "held\n"
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        os.kill(child, 0)  # still alive
        assert path.read_text() == f"{p.pid}\n"  # its stale pid stays...
        with lock.hold(path, wait=False, busy=str):
            assert path.read_text() == f"{os.getpid()}\n"  # ...until the next holder's
    finally:
        os.kill(child, signal.SIGKILL)


def test_the_file_is_closed_when_refused(held: tuple[Path, subprocess.Popen[str]]) -> None:
    path, _ = held
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        with pytest.raises(lock.Busy):
            lock.hold(path, wait=False, busy=str)
    assert len(os.listdir("/proc/self/fd")) == before
