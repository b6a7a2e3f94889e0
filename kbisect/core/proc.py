"""The one wrapper every external command goes through.

It logs the quoted command line, streams output to a log file (and optionally to a
per-line callback for progress), enforces a total and a no-output timeout, and kills
the whole process group on timeout or interruption. Every child's group is also named
to the reaper (reaper.py), which kills it if this process dies first, even by SIGKILL.
Commands are plain lists built elsewhere by pure functions; this module never builds one.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kbisect.core.exceptions import CommandFailed, CommandTimeout, KbisectError, MissingTool

TAIL_LINES = 40


@dataclass(frozen=True)
class Result:
    returncode: int
    output: str  # whole output when captured, else the last TAIL_LINES lines
    log: Path | None


def quote(cmd: Sequence[str]) -> str:
    return shlex.join([str(c) for c in cmd])


def short(cmd: Sequence[str], limit: int = 160) -> str:
    """The quoted command on one line, cut to `limit` characters (for error messages)."""
    text = quote(cmd).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Reaper:
    """This process's reaper (reaper.py): started with the first child, one per pid."""

    SCRIPT = Path(__file__).resolve().with_name("reaper.py")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner = 0  # the pid that started it: a forked child needs its own
        self.fd = -1
        self.pid = 0
        self.groups: set[int] = set()

    def _start(self) -> None:
        read, write = os.pipe()  # both close-on-exec: no child inherits the write end
        try:
            child = subprocess.Popen(
                [sys.executable, "-I", "-S", str(self.SCRIPT)],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        self.owner, self.fd, self.pid = os.getpid(), write, child.pid

    def ensure(self) -> None:
        """Start the reaper (if this process has none yet) before a child starts: a child
        whose parent is killed before its reaper runs would outlive it."""
        with self.lock:
            if self.owner != os.getpid():
                self._start()
                os.write(self.fd, "".join(f"+{g}\n" for g in sorted(self.groups)).encode())

    def tell(self, pgid: int, running: bool) -> None:
        """Name a child's group to the reaper (`+PGID`), or release it (`-PGID`); start
        the reaper (or a new one, told every group, if it died) when needed."""
        with self.lock:
            if running:
                self.groups.add(pgid)
            else:
                self.groups.discard(pgid)
            message = f"{'+' if running else '-'}{pgid}\n"
            for _ in range(2):
                if self.owner != os.getpid():
                    self._start()
                    message = "".join(f"+{g}\n" for g in sorted(self.groups))
                try:
                    os.write(self.fd, message.encode())
                    return
                except OSError:  # the reaper died
                    os.close(self.fd)
                    self.owner = 0


REAPER = _Reaper()


class _Held:
    """Holds Ctrl-C, SIGTERM and SIGHUP while a child starts and is named to the reaper.

    A KeyboardInterrupt raised inside subprocess.Popen after its fork loses the child: the
    Popen object never reaches the caller, the reaper is never told, and the child runs
    on. So the handlers are swapped for a recorder for those few milliseconds; a signal
    that came is handed to the former handler by deliver(), once the child can be killed.
    Only the main thread: Python runs signal handlers there, and nowhere else."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.former: dict[int, object] = {}
        self.came: list[int] = []

    def _record(self, signum: int, frame: object) -> None:
        self.came.append(signum)

    def __enter__(self) -> _Held:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                # None: set outside Python; SIG_IGN (nohup): the child must inherit it
                if signal.getsignal(sig) not in (None, signal.SIG_IGN):
                    self.former[sig] = signal.signal(sig, self._record)
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        for sig, handler in self.former.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        if exc_type is not None:  # no child to kill: a held Ctrl-C wins over the error
            self.deliver()

    def deliver(self) -> None:
        """Handle the signals that came, as the former handlers would have."""
        came, self.came = self.came, []
        for sig in came:
            handler = self.former.get(sig)
            if callable(handler):
                handler(sig, None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), sig)


def _reader(stream: IO[bytes], lines: queue.Queue[str | None]) -> None:
    for raw in iter(stream.readline, b""):
        lines.put(raw.decode("utf-8", "replace"))
    lines.put(None)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    except ProcessLookupError:
        pass


def end_all() -> None:
    """SIGTERM every child group still running (the boots other threads drive, on an
    interruption of the thread that waits for them: their proc.run then returns)."""
    with REAPER.lock:
        groups = sorted(REAPER.groups)
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGTERM)


def run(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    log: Path | None = None,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    idle_timeout: float | None = None,
    on_line: Callable[[str], None] | None = None,
    check: bool = True,
    capture: bool = False,
    stop: threading.Event | None = None,
) -> Result:
    """Run `cmd`; raise CommandFailed on non-zero exit (if check), CommandTimeout on timeout.
    `stop`: when set (by another thread), the command is ended and its result returned."""
    argv = [os.fspath(c) for c in cmd]
    full_env = None if env is None else {**os.environ, **env}
    REAPER.ensure()
    logf = None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        logf = log.open("a", encoding="utf-8")
        where = f"  (in {cwd})" if cwd else ""
        logf.write(f"$ {quote(argv)}{where}\n")
        logf.flush()
    held = _Held()
    try:
        with held:  # a Ctrl-C here would lose a started child before the reaper knows it
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                REAPER.tell(proc.pid, running=True)  # start_new_session: group id = pid
            except BaseException:
                _kill(proc)
                raise
    except (FileNotFoundError, PermissionError) as exc:
        if logf:
            logf.close()
        what = "not installed" if isinstance(exc, FileNotFoundError) else "not executable"
        raise MissingTool(f"{argv[0]}: {what} (run scripts/setup)") from exc
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    kept: deque[str] | list[str] = [] if capture else deque(maxlen=TAIL_LINES)
    start = last = time.monotonic()
    try:
        held.deliver()  # a signal held while the child started: handled now
        while True:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                line = ""
            now = time.monotonic()
            if line is None:
                break
            if stop is not None and stop.is_set():
                _kill(proc)
                break
            if line:
                last = now
                kept.append(line)
                if logf:
                    logf.write(line if line.endswith("\n") else line + "\n")
                    logf.flush()
                if on_line:
                    on_line(line.rstrip("\n"))
            if timeout is not None and now - start > timeout:
                _kill(proc)
                raise CommandTimeout(f"{argv[0]} ran longer than {timeout:.0f}s{_where(log)}")
            if idle_timeout is not None and now - last > idle_timeout:
                _kill(proc)
                raise CommandTimeout(
                    f"{argv[0]} printed nothing for {idle_timeout:.0f}s{_where(log)}"
                )
        returncode = proc.wait()
    except BaseException:
        _kill(proc)
        raise
    finally:
        REAPER.tell(proc.pid, running=False)
        if logf:
            logf.close()
    result = Result(returncode, "".join(kept), log)
    if check and returncode != 0:
        raise CommandFailed(f"{short(argv)} exited {returncode}{_where(log)}")
    return result


def capture(cmd: Sequence[str | os.PathLike[str]], *, check: bool = True) -> str:
    """Run a short command and return its output, stripped (stderr included)."""
    return run(cmd, check=check, capture=True).output.strip()


def first_line(cmd: Sequence[str | os.PathLike[str]]) -> str:
    """A command's first output line, e.g. of `--version` ('' when it prints nothing or
    cannot run)."""
    try:
        out = capture(cmd, check=False)
    except KbisectError:
        return ""
    return out.splitlines()[0].strip() if out else ""


def _where(log: Path | None) -> str:
    return f" (log: {log})" if log else ""
