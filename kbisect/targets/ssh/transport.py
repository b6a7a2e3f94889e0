"""A machine reached over ssh: run a command there, copy files both ways, wait for it to
come back, power-cycle it, follow its console. Commands come from command.py's builders and
run through proc; nothing here decides what to run.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from kbisect.core import proc
from kbisect.core.exceptions import BootError, CommandTimeout, InfraError
from kbisect.core.lock import hold
from kbisect.targets.ssh import command as ssh
from kbisect.targets.ssh import qmp
from kbisect.targets.ssh.config import Machine, state_dir

SSH_LOST = 255
POLL_S = 5.0


class Unreachable(InfraError):
    """ssh could not reach the machine, or lost it (exit 255)."""


def control_path(m: Machine) -> Path:
    """A short path (unix sockets allow ~100 bytes): ssh expands %C to a hash of the
    connection."""
    return Path(tempfile.gettempdir()) / f"kbisect-{os.getuid()}-{m.name}-%C"


class Session:
    def __init__(self, m: Machine, log: Path | None = None) -> None:
        self.m = m
        self.log = log
        self.shared = m.remote(control_path(m))  # many short commands, one connection
        self.plain = m.remote()  # while the machine reboots: no stale master

    def run(
        self,
        command: str,
        *,
        timeout: float = 120,
        idle_timeout: float | None = None,
        on_line: Callable[[str], None] | None = None,
        shared: bool = True,
        capture: bool = True,
    ) -> proc.Result:
        """Run a shell command line on the machine; Unreachable when ssh itself failed."""
        r = self.shared if shared else self.plain
        done = self._ssh(r, command, timeout, idle_timeout, on_line, capture)
        if done.returncode == SSH_LOST and shared and ssh.stale_master(done.output):
            # a master left talking to a kernel that is gone: end it, then a fresh connection
            self.drop_master()
            done = self._ssh(self.plain, command, timeout, idle_timeout, on_line, capture)
        if done.returncode == SSH_LOST:
            raise Unreachable(f"{self.m.login_name}: {ssh.diagnose(done.output)}")
        return done

    def _ssh(
        self,
        r: ssh.Remote,
        command: str,
        timeout: float,
        idle_timeout: float | None,
        on_line: Callable[[str], None] | None,
        capture: bool,
    ) -> proc.Result:
        return proc.run(
            ssh.ssh_command(r, command),
            log=self.log,
            timeout=timeout,
            idle_timeout=idle_timeout,
            on_line=on_line,
            check=False,
            capture=capture,
        )

    def check(self, command: str, timeout: float = 120) -> str:
        """Run; its output, or InfraError naming the command when it fails."""
        done = self.run(command, timeout=timeout)
        if done.returncode != 0:
            last = done.output.strip().splitlines()[-1:] or ["no output"]
            raise InfraError(
                f"on {self.m.name}: `{command[:80]}` exited {done.returncode}: {last[0][:160]}"
            )
        return done.output

    def put(self, sources: list[Path], dest: str, timeout: float = 600) -> None:
        self._copy(ssh.scp_to(self.shared, sources, dest), timeout)

    def get(self, source: str, dest: Path, timeout: float = 600) -> None:
        self._copy(ssh.scp_from(self.shared, source, dest, recursive=True), timeout)

    def _copy(self, cmd: list[str], timeout: float) -> None:
        done = proc.run(cmd, log=self.log, timeout=timeout, check=False, capture=True)
        if done.returncode != 0:
            raise Unreachable(f"{self.m.name}: copy failed: {ssh.diagnose(done.output)}")

    def drop_master(self) -> None:
        """End the shared connection: the kernel it talks to is about to go."""
        proc.run(ssh.control_exit_command(self.shared), timeout=30, check=False, capture=True)

    def poll(
        self,
        command: str,
        done: Callable[[str], bool],
        deadline: float,
        abort: Callable[[], str | None],
    ) -> str:
        """Run `command` every few seconds (fresh connections) until `done(output)`;
        CommandTimeout at the deadline, BootError when `abort()` names a reason."""
        while True:
            why = abort()
            if why:
                raise BootError(why)
            try:
                result = self.run(command, timeout=30, shared=False)
                if result.returncode == 0 and done(result.output):
                    return result.output
            except (Unreachable, CommandTimeout):
                pass
            if time.monotonic() > deadline:
                raise CommandTimeout(f"{self.m.name} was not back within the deadline")
            time.sleep(POLL_S)

    def power_cycle(self) -> None:
        """The machine's power_cycle: QMP system_reset, or the configured command."""
        how = self.m.power_cycle
        if how is None:
            raise InfraError(
                f"{self.m.name} needs a power cycle and its target file has no power_cycle: "
                "power-cycle it by hand"
            )
        if how.startswith(qmp.PREFIX):
            qmp.execute(Path(how.removeprefix(qmp.PREFIX)), "system_reset")
            return
        proc.run(["sh", "-c", how], log=self.log, timeout=300)


class ConsoleFeed:
    """Runs the machine's console command in a thread; every line goes to `sink` (and is
    kept in `log`); `panic` holds the first panic line seen."""

    def __init__(
        self,
        command: str | None,
        sink: Callable[[str], None],
        log: Path,
        panic: Callable[[str], bool],
    ) -> None:
        self.command, self.sink, self.log, self.is_panic = command, sink, log, panic
        self.panic: str | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> ConsoleFeed:
        if self.command:
            self.thread = threading.Thread(target=self._follow, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=15)

    def _line(self, line: str) -> None:
        if self.panic is None and self.is_panic(line):
            self.panic = line.strip()
        with contextlib.suppress(Exception):  # its deadlines are the main thread's business
            self.sink(line)

    def _follow(self) -> None:
        assert self.command is not None
        with contextlib.suppress(Exception):  # a failing console does not fail the boot
            proc.run(
                ["sh", "-c", self.command],
                log=self.log,
                on_line=self._line,
                check=False,
                stop=self.stop,
            )


def lock(name: str) -> IO[str]:
    """One kbisect process per machine (another would kexec or reboot it under this one):
    an exclusive lock on $cache/machines/NAME/lock, held while the file stays open."""
    return hold(
        state_dir(name) / "lock",
        wait=False,
        busy=lambda pid: f"target {name} is in use by another kbisect (pid {pid})",
    )
