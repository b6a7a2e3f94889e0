"""ssh and scp command lines for a machine (pure), and what a failed ssh meant.

Every connection: BatchMode (never a password prompt), kbisect's own known_hosts with
StrictHostKeyChecking=accept-new (the first key is remembered, a changed one refused),
a connect timeout, keep-alives (a dead kernel ends the session in ~15 s), and optionally
a ControlMaster socket so that the many short commands of a boot share one connection.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ALIVE_INTERVAL_S = 5
ALIVE_COUNT = 3
UNREACHABLE = re.compile(
    r"Connection refused|Connection timed out|timed out during banner exchange|No route to host|"
    r"Could not resolve hostname|Network is unreachable|Connection closed by|"
    r"Connection reset by|kex_exchange_identification"
)
NO_KEY = re.compile(r"Permission denied|Too many authentication failures|no such identity")
HOST_KEY = re.compile(r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED")


@dataclass(frozen=True)
class Remote:
    host: str
    port: int
    user: str
    known_hosts: Path
    key: Path | None = None
    connect_timeout_s: int = 10
    control: Path | None = None  # ControlPath of a shared master connection

    @property
    def login(self) -> str:
        return f"{self.user}@{self.host}"


def options(r: Remote) -> list[str]:
    """The -o options every ssh and scp of `r` shares."""
    opts = {
        "BatchMode": "yes",
        "UserKnownHostsFile": str(r.known_hosts),
        "StrictHostKeyChecking": "accept-new",
        "ConnectTimeout": str(r.connect_timeout_s),
        "ServerAliveInterval": str(ALIVE_INTERVAL_S),
        "ServerAliveCountMax": str(ALIVE_COUNT),
        "LogLevel": "ERROR",
    }
    if r.key is not None:
        opts["IdentitiesOnly"] = "yes"
    if r.control is not None:
        opts.update(ControlMaster="auto", ControlPath=str(r.control), ControlPersist="60")
    out = [a for k, v in opts.items() for a in ("-o", f"{k}={v}")]
    return [*out, "-i", str(r.key)] if r.key is not None else out


def ssh_command(r: Remote, remote: str | Sequence[str]) -> list[str]:
    """ssh running `remote` (a shell command line, or argv quoted here) on the machine."""
    text = remote if isinstance(remote, str) else shlex.join(remote)
    return ["ssh", *options(r), "-p", str(r.port), r.login, "--", text]


def _scp_host(r: Remote) -> str:
    return f"[{r.host}]" if ":" in r.host else r.host


def scp_to(r: Remote, sources: Sequence[Path], dest: str) -> list[str]:
    """scp local files to `dest` on the machine."""
    where = f"{r.user}@{_scp_host(r)}:{dest}"
    return ["scp", "-q", "-p", *options(r), "-P", str(r.port), *map(str, sources), where]


def scp_from(r: Remote, source: str, dest: Path, recursive: bool = False) -> list[str]:
    """scp `source` on the machine to the local `dest`."""
    flags = ["-q", "-p", "-r"] if recursive else ["-q", "-p"]
    where = f"{r.user}@{_scp_host(r)}:{source}"
    return ["scp", *flags, *options(r), "-P", str(r.port), where, str(dest)]


def control_exit_command(r: Remote) -> list[str]:
    """Ends the shared master connection (before a kernel switch kills it)."""
    return ["ssh", *options(r), "-p", str(r.port), "-O", "exit", r.login]


def diagnose(output: str) -> str:
    """Why ssh exited 255, in words: unreachable, refused key, changed host key."""
    if HOST_KEY.search(output):
        return "its host key changed (remove it from kbisect's known_hosts file if expected)"
    if NO_KEY.search(output):
        return "the key was refused (wrong key or user?)"
    if UNREACHABLE.search(output):
        return "unreachable"
    last = [ln for ln in output.strip().splitlines() if ln.strip()]
    return last[-1].strip()[:160] if last else "ssh failed"


def stale_master(output: str) -> bool:
    """A failure over the shared connection that a fresh connection may not have: ssh said
    nothing we know (a master whose machine rebooted under it ends the session silently),
    or the control socket itself failed."""
    return not any(p.search(output) for p in (HOST_KEY, NO_KEY, UNREACHABLE))


def host_error(host: str) -> str | None:
    """A host must be a name or a loopback address (kbisect never opens other addresses
    itself: reach a remote machine through a name, e.g. an ssh_config alias)."""
    if not host or host.startswith("-") or any(c.isspace() or c in "@/" for c in host):
        return f"host {host!r} is not a host name or an address"
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    return None if address.is_loopback else f"host {host}: an address must be a loopback one"
