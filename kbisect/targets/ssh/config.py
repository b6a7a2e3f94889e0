"""A machine target's TOML file (`kind = "ssh"`): the schema, checked key by key.

    kind = "ssh"
    host = "testbox"            # a name (an ssh_config alias works) or a loopback address
    port = 22
    user = "root"               # root, or a user with passwordless sudo
    key = "~/.ssh/id_ed25519"   # optional: ssh's defaults otherwise
    arch = "x86_64"
    switch = "kexec"            # kexec (default) | script (switch_script does it)
    switch_script = "..."       # with switch = "script": a local command, see below
    console = "ipmitool ... sol activate"   # optional: prints the machine's console
    power_cycle = "ipmitool ... power cycle" # or "qmp:/path/to/qmp.sock"
    workdir = "/var/lib/kbisect"  # kbisect's own dir on the machine (kernels, harness,
                                  # results, PostgreSQL templates)
    pgdata = "/var/lib/kbisect/pg"  # where the harness mounts the tmpfs PGDATA lives in
    pg_bindir = "/usr/lib/postgresql/{major}/bin"  # {major}: the scenario's pinned major
    boot_timeout_s = 600        # a switch, or a power cycle, must reach ssh within this

switch_script runs on this host (sh -c) with KBISECT_HOST, KBISECT_PORT, KBISECT_USER,
KBISECT_KEY, KBISECT_IMAGE and KBISECT_INITRD (paths on the machine, the initrd empty for
kbisect's own kernels) and KBISECT_CMDLINE (with the boot's nonce) in its environment; it
must make the machine boot that image with that command line (e.g. a one-shot boot
loader entry and a reboot), and return; kbisect then waits for the nonce as after a kexec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import paths, reading
from kbisect.core.exceptions import UserError
from kbisect.targets.ssh import command

SWITCHES = ("kexec", "script")
COMMANDS = ("switch_script", "console", "power_cycle")
PG_BINDIR = "/usr/lib/postgresql/{major}/bin"  # Debian's layout, as the harness assumes
# key: (type, default, required)
SCHEMA: dict[str, tuple[type, Any, bool]] = {
    "kind": (str, "ssh", True),
    "host": (str, None, True),
    "port": (int, 22, False),
    "user": (str, "root", False),
    "key": (str, None, False),
    "known_hosts": (str, None, False),
    "arch": (str, None, True),
    "switch": (str, "kexec", False),
    "switch_script": (str, None, False),
    "console": (str, None, False),
    "power_cycle": (str, None, False),
    "workdir": (str, "/var/lib/kbisect", False),
    "pgdata": (str, None, False),
    "pg_bindir": (str, PG_BINDIR, False),
    "boot_timeout_s": (int, 600, False),
}


class BadMachine(UserError):
    """A machine's TOML file has a missing, unknown or wrong key."""


@dataclass(frozen=True)
class Machine:
    name: str
    host: str
    port: int
    user: str
    key: Path | None
    known_hosts: Path
    arch: str
    switch: str
    switch_script: str | None
    console: str | None
    power_cycle: str | None
    workdir: str
    pgdata: str
    pg_bindir: str
    boot_timeout_s: int

    @property
    def login_name(self) -> str:
        return f"{self.name} ({self.user}@{self.host}:{self.port})"

    def remote(self, control: Path | None = None) -> command.Remote:
        return command.Remote(
            self.host, self.port, self.user, self.known_hosts, self.key, control=control
        )

    @property
    def sudo(self) -> str:
        """The prefix of a command that must run as root."""
        return "" if self.user == "root" else "sudo -n "


def state_dir(name: str) -> Path:
    """This host's notes about a machine: known_hosts, known-good kernel, ssh sockets."""
    return paths.machine_dir(name)


def _typed(name: str, key: str, value: Any) -> Any:
    kind = SCHEMA[key][0]
    if isinstance(value, bool) or not isinstance(value, kind):
        what = {int: "an integer", str: "a string"}.get(kind, f"a {kind.__name__}")
        raise BadMachine(f"target {name}: {key} must be {what}, got {value!r}")
    # a name or a path (the commands, run by sh -c, may span lines)
    if key not in COMMANDS and isinstance(value, str) and (problem := reading.line(value)):
        raise BadMachine(f"target {name}: {key} {problem}, got {value!r}")
    return value


def load(name: str, settings: Mapping[str, Any]) -> Machine:
    """The Machine a target file describes; BadMachine naming the first bad key."""
    if unknown := reading.unknown_key(settings, SCHEMA):
        raise BadMachine(f"target {name}: {unknown}")
    values = {}
    for key, (_, default, required) in SCHEMA.items():
        if key not in settings and required:
            raise BadMachine(f"target {name}: missing key {key!r}")
        values[key] = _typed(name, key, settings[key]) if key in settings else default
    _check(name, values)
    key_path = Path(values["key"]).expanduser() if values["key"] else None
    known = values["known_hosts"]
    return Machine(
        name=name,
        host=values["host"],
        port=values["port"],
        user=values["user"],
        key=key_path,
        known_hosts=Path(known).expanduser() if known else state_dir(name) / "known_hosts",
        arch=values["arch"],
        switch=values["switch"],
        switch_script=values["switch_script"],
        console=values["console"],
        power_cycle=values["power_cycle"],
        workdir=values["workdir"].rstrip("/"),
        pgdata=(values["pgdata"] or f"{values['workdir'].rstrip('/')}/pg").rstrip("/"),
        pg_bindir=values["pg_bindir"].rstrip("/"),
        boot_timeout_s=values["boot_timeout_s"],
    )


def _check(name: str, v: dict[str, Any]) -> None:
    problem = command.host_error(v["host"])
    if problem:
        raise BadMachine(f"target {name}: {problem}")
    if not 0 < v["port"] < 65536:
        raise BadMachine(f"target {name}: port must be 1-65535, got {v['port']}")
    if v["switch"] not in SWITCHES:
        raise BadMachine(
            f"target {name}: switch must be one of {', '.join(SWITCHES)}, got {v['switch']!r}"
        )
    if (v["switch"] == "script") != bool(v["switch_script"]):
        raise BadMachine(f'target {name}: switch_script goes with switch = "script" (only)')
    if not v["workdir"].startswith("/") or v["workdir"].rstrip("/") in ("", "/tmp"):
        raise BadMachine(f"target {name}: workdir must be an absolute dir of kbisect's own")
    for key in ("pgdata", "pg_bindir"):
        if v[key] is not None and not v[key].startswith("/"):
            raise BadMachine(f"target {name}: {key} must be an absolute path")
    if v["key"] and not Path(v["key"]).expanduser().is_file():
        raise BadMachine(f"target {name}: key {v['key']}: no such file")
    if v["boot_timeout_s"] < 10:
        raise BadMachine(f"target {name}: boot_timeout_s must be at least 10")
