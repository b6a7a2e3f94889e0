"""PostgreSQL: which majors exist, initdb, the postmaster's command line, start/stop, psql.

The server listens only on a unix socket in a private directory (no TCP); every setting
is passed with `-c`, so the template's postgresql.conf never depends on a scenario.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from harness import proc
from harness.proc import Account, HarnessError

PG_ROOT = Path("/usr/lib/postgresql")
# Settings the harness owns: a scenario may not set them.
RESERVED = ("port", "listen_addresses", "unix_socket_directories")
# Always reported in the fingerprint, besides the scenario's own settings.
FINGERPRINT_SETTINGS = (
    "shared_buffers",
    "huge_pages",
    "max_connections",
    "fsync",
    "synchronous_commit",
    "huge_pages_status",
)


def installed_majors(root: Path = PG_ROOT) -> list[int]:
    if not root.is_dir():
        return []
    found = (p.name for p in root.iterdir() if (p / "bin" / "postgres").exists())
    return sorted(int(name) for name in found if name.isdigit())


def version_error(pinned: int, installed: list[int]) -> str | None:
    """The one-line error when the pinned major is not installed, else None."""
    if pinned in installed:
        return None
    have = ", ".join(str(m) for m in installed) or "none"
    return f"scenario pins PostgreSQL {pinned} but the guest has {have}"


def initdb_args(major: int) -> list[str]:
    """Fixed initdb options (part of the template key). Checksums off, as before PG 18."""
    args = [
        "--auth=trust",
        "--encoding=UTF8",
        "--locale=C",
        "--username=postgres",
        "--no-instructions",
        "--no-sync",
    ]
    return [*args, "--no-data-checksums"] if major >= 18 else args


def initdb_cmd(bindir: Path, pgdata: Path, major: int) -> list[str]:
    return [str(bindir / "initdb"), "-D", str(pgdata), *initdb_args(major)]


def setting_value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def server_cmd(
    bindir: Path, pgdata: Path, sockdir: Path, port: int, settings: dict[str, Any]
) -> list[str]:
    fixed = {"listen_addresses": "", "unix_socket_directories": str(sockdir), "port": port}
    cmd = [str(bindir / "postgres"), "-D", str(pgdata)]
    for name, value in {**settings, **fixed}.items():
        cmd += ["-c", f"{name}={setting_value(value)}"]
    return cmd


def conn_args(sockdir: Path, port: int) -> list[str]:
    return ["-h", str(sockdir), "-p", str(port), "-U", "postgres"]


def psql_cmd(bindir: Path, sockdir: Path, port: int, sql: str) -> list[str]:
    return [
        str(bindir / "psql"),
        "-X",
        "-A",
        "-t",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        *conn_args(sockdir, port),
        "-d",
        "postgres",
        "-c",
        sql,
    ]


def settings_sql(names: list[str]) -> str:
    """`name=value` lines, as SHOW prints them; settings unknown to this version are left out."""
    array = ", ".join(f"'{n}'" for n in names if re.fullmatch(r"[a-z_][a-z0-9_.]*", n))
    return (
        f"SELECT n || '=' || current_setting(n, true) FROM unnest(ARRAY[{array}]) AS n "
        "WHERE current_setting(n, true) IS NOT NULL"
    )


def last_fatal(log_text: str) -> str | None:
    """The last FATAL/PANIC/ERROR message of a server log (no timestamp), to say why it
    did not start."""
    hits = re.findall(r"\b((?:FATAL|PANIC|ERROR):\s+.*)", log_text)
    return " ".join(hits[-1].split()) if hits else None


def huge_pages_needed_cmd(
    bindir: Path, pgdata: Path, sockdir: Path, port: int, settings: dict[str, Any]
) -> list[str]:
    """Asks PostgreSQL (15+) how many huge pages these settings need."""
    cmd = server_cmd(bindir, pgdata, sockdir, port, settings)
    return [*cmd, "-C", "shared_memory_size_in_huge_pages"]


class Server:
    """One postmaster, started directly (no pg_ctl), stopped with a fast shutdown."""

    def __init__(
        self,
        bindir: Path,
        pgdata: Path,
        sockdir: Path,
        port: int,
        account: Account | None,
        log_path: Path,
    ) -> None:
        self.bindir, self.pgdata, self.sockdir, self.port = bindir, pgdata, sockdir, port
        self.account, self.log_path = account, log_path
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_start = 0

    def psql(self, sql: str) -> str:
        done = proc.run(
            psql_cmd(self.bindir, self.sockdir, self.port, sql),
            account=self.account,
            cwd=str(self.sockdir),
            timeout=3600,
        )
        if done.returncode != 0:
            raise HarnessError(f"psql failed: {' '.join(done.output.split())[:300]}")
        return done.output

    def start(self, settings: dict[str, Any], wait_s: float = 600) -> None:
        self._log = self.log_path.open("ab")
        self._log_start = self._log.tell()
        cmd = server_cmd(self.bindir, self.pgdata, self.sockdir, self.port, settings)
        self.process = proc.spawn(cmd, account=self.account, cwd=str(self.sockdir), log=self._log)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise HarnessError(f"PostgreSQL did not start: {self._why()}")
            ready = proc.run(
                [str(self.bindir / "pg_isready"), "-q", *conn_args(self.sockdir, self.port)],
                account=self.account,
                cwd=str(self.sockdir),
                timeout=60,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.2)
        raise HarnessError(f"PostgreSQL not ready after {wait_s:.0f} s: {self._why()}")

    def _why(self) -> str:
        with self.log_path.open("rb") as f:  # only what this start wrote
            f.seek(self._log_start)
            text = f.read().decode(errors="replace")
        return last_fatal(text) or f"see {self.log_path.name}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def stop(self) -> bool:
        """Fast shutdown (with a shutdown checkpoint); immediate, then SIGKILL, if stuck.

        True when the fast shutdown ended it cleanly (exit 0).
        """
        if self.process is None:
            return True
        clean = False
        for sig, wait in ((signal.SIGINT, 300), (signal.SIGQUIT, 30), (signal.SIGKILL, 30)):
            if self.process.poll() is not None:
                break
            os.kill(self.process.pid, sig)
            try:
                clean = self.process.wait(timeout=wait) == 0 and sig == signal.SIGINT
            except subprocess.TimeoutExpired:
                continue
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        return clean
