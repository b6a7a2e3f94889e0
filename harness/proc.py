"""The harness's one way to run a program (stdlib only: the guest cannot import kbisect.core.proc).

Output (stdout and stderr merged) is streamed line by line to a callback and kept whole.
A program silent for HEARTBEAT_S gets a `kbisect-guest: waiting ...` line on stdout, so the
host's no-output timeout detects a hung guest, not a long quiet step (VACUUM, CHECKPOINT).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO

HEARTBEAT_S = 30.0


class HarnessError(Exception):
    """A benchmark step failed; the message is the one-line error of the result."""


def say(message: str) -> None:
    """One protocol line for the host: `kbisect-guest: <message>`."""
    print(f"kbisect-guest: {message}", flush=True)


def echo(line: str) -> None:
    """A line for the console log only."""
    print(line, flush=True)


@dataclass(frozen=True)
class Account:
    """Who runs PostgreSQL: the unprivileged `postgres` user, or (non-root host tests) us."""

    name: str
    uid: int
    gid: int

    @classmethod
    def lookup(cls, name: str | None) -> Account | None:
        if name is None:
            return None
        try:
            entry = pwd.getpwnam(name)
        except KeyError as exc:
            raise HarnessError(f"user {name!r} does not exist in /etc/passwd") from exc
        return cls(name, entry.pw_uid, entry.pw_gid)


@dataclass(frozen=True)
class Done:
    returncode: int
    output: str


def last_error_line(output: str) -> str:
    """The line of a failed command's output worth quoting: its last error, else its last."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() or "fatal" in ln.lower()]
    return " ".join((errors or lines or ["no output"])[-1].split())


def clean_env(home: str) -> dict[str, str]:
    """A fixed environment: no PG* variables from whoever started us."""
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C", "LC_ALL": "C", "HOME": home}


def _reader(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def _stop(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run(
    cmd: Sequence[str],
    *,
    account: Account | None = None,
    cwd: str | None = None,
    on_line: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> Done:
    """Run `cmd` to completion; HarnessError if it cannot start or outlives `timeout`."""
    try:
        proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            cwd=cwd,
            env=clean_env(cwd or "/"),
            start_new_session=True,
            user=None if account is None else account.uid,
            group=None if account is None else account.gid,
            extra_groups=None if account is None else [],
        )
    except OSError as exc:
        raise HarnessError(f"cannot run {cmd[0]}: {exc}") from exc
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    try:
        return _follow(proc, os.path.basename(cmd[0]), lines, on_line, timeout)
    except BaseException:
        _stop(proc)
        raise


def _follow(
    proc: subprocess.Popen[str],
    name: str,
    lines: queue.Queue[str | None],
    on_line: Callable[[str], None] | None,
    timeout: float | None,
) -> Done:
    kept: list[str] = []
    start = last = time.monotonic()
    while True:
        quiet = False
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            quiet, line = True, ""
        now = time.monotonic()
        if line is None:
            break
        if not quiet:
            last = now
            kept.append(line)
            if on_line is not None:
                on_line(line)
        elif now - last >= HEARTBEAT_S:
            last = now
            print(f"kbisect-guest: waiting for {name} ({now - start:.0f} s)", flush=True)
        if timeout is not None and now - start > timeout:
            raise HarnessError(f"{name} ran longer than {timeout:.0f} s")
    return Done(proc.wait(), "\n".join(kept) + ("\n" if kept else ""))


def spawn(
    cmd: Sequence[str], *, account: Account | None, cwd: str, log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Start a long-lived server (the postmaster) with its output going to `log`."""
    try:
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=clean_env(cwd),
            start_new_session=True,
            user=None if account is None else account.uid,
            group=None if account is None else account.gid,
            extra_groups=None if account is None else [],
        )
    except OSError as exc:
        raise HarnessError(f"cannot run {cmd[0]}: {exc}") from exc


def pipe(
    cmd: Sequence[str], *, stdin: IO[bytes] | int, stdout: IO[bytes] | int
) -> subprocess.Popen[bytes]:
    """Start a filter (zstd) between a file and a stream; stderr goes to ours."""
    try:
        return subprocess.Popen(list(cmd), stdin=stdin, stdout=stdout, env=clean_env("/"))
    except OSError as exc:
        raise HarnessError(f"cannot run {cmd[0]}: {exc}") from exc
