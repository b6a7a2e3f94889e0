"""A LAVA target file (`kind = "lava"`), checked key by key.

    kind = "lava"
    arch = "x86_64"
    dispatcher = "server"        # server: a lab's lava-server, through lavacli;
                                 # local: lava-run on this host, against `devices`
    server = "https://lava.example.org"    # server: the lab's URL
    user = "alice"               # server: the token's owner
    token_file = "~/.config/kbisect/lab.token"   # server: the token, in a file...
    token_env = "LAVA_TOKEN"     # ...or in this environment variable (one of the two)
    device_type = "qemu"         # the lab's device type: every job asks for one of these
    tags = ["kbisect"]           # optional: device tags a job asks for
    devices = ["qemu01.yaml", "qemu02.yaml"]   # local: rendered device dictionaries,
                                 # a job to each in turn as a lab's scheduler would (default:
                                 # kbisect's own QEMU device for this host, job.device_text)
    artifacts = "https://files.example.org/kbisect/"   # where the lab fetches what a job
                                 # downloads (file:// allowed); local default: in place
    upload = "rsync {path} files.example.org:/srv/kbisect/{name}"   # optional: puts a
                                 # file there (sh -c; {path}, {name} are shell-quoted)
    queue_timeout_s = 3600       # server: a job that has not started by then is cancelled

The token is read when a command needs it and handed to lavacli in a private config
file (lab.py): never in an argument, a log, a sample or the run directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import reading
from kbisect.core.exceptions import UserError

DISPATCHERS = ("server", "local")
# key: (type, default)
SCHEMA: dict[str, tuple[type, Any]] = {
    "kind": (str, "lava"),
    "arch": (str, None),
    "dispatcher": (str, "server"),
    "server": (str, None),
    "user": (str, None),
    "token_file": (str, None),
    "token_env": (str, None),
    "device_type": (str, None),
    "tags": (list, []),
    "devices": (list, []),
    "artifacts": (str, None),
    "upload": (str, None),
    "queue_timeout_s": (int, 3600),
}


class BadLab(UserError):
    """A LAVA target file with a missing, unknown or wrong key, or no usable token."""


@dataclass(frozen=True)
class Lab:
    name: str
    dispatcher: str
    server: str | None
    user: str | None
    token_file: Path | None
    token_env: str | None
    device_type: str
    tags: tuple[str, ...]
    devices: tuple[Path, ...]
    artifacts: str | None
    upload: str | None
    queue_timeout_s: int

    @property
    def local(self) -> bool:
        return self.dispatcher == "local"

    @property
    def token_source(self) -> str:
        """Where the token is: `$VARIABLE` or the file's path."""
        return f"${self.token_env}" if self.token_env is not None else str(self.token_file)

    def token(self) -> str:
        """The token, read now (never kept): BadLab naming where it should be."""
        where = self.token_source
        if self.token_env is not None:
            value = os.environ.get(self.token_env, "")
        else:
            assert self.token_file is not None
            try:
                value = self.token_file.read_text(encoding="utf-8")
            except OSError as exc:
                raise BadLab(f"target {self.name}: token_file {where}: {exc.strerror}") from None
            except UnicodeDecodeError:
                raise BadLab(f"target {self.name}: token_file {where}: not UTF-8") from None
        value = value.strip()
        if not value or reading.line(value):
            raise BadLab(f"target {self.name}: no token in {where} (one line, the lab's token)")
        return value


def _typed(name: str, key: str, value: Any) -> Any:
    kind = SCHEMA[key][0]
    what = {int: "an integer", str: "a string", list: "a list of strings"}[kind]
    bad = isinstance(value, bool) or not isinstance(value, kind)
    if kind is list and not bad:  # tags are names, devices paths
        check = reading.name if key == "tags" else reading.line
        bad = not all(isinstance(v, str) and not check(v) for v in value)
    elif kind is str and not bad and key != "upload":
        bad = bool(reading.line(value)) or not value.strip()
    if bad:
        raise BadLab(f"target {name}: {key} must be {what}, got {value!r}")
    return value


def load(name: str, settings: Mapping[str, Any]) -> Lab:
    """The Lab a target file describes; BadLab naming the first bad key."""
    if unknown := reading.unknown_key(settings, SCHEMA):
        raise BadLab(f"target {name}: {unknown}")
    v = {k: _typed(name, k, settings[k]) if k in settings else d for k, (_, d) in SCHEMA.items()}
    if v["dispatcher"] not in DISPATCHERS:
        raise BadLab(f"target {name}: dispatcher must be server or local, got {v['dispatcher']!r}")
    if v["device_type"] is None:
        raise BadLab(f"target {name}: missing key 'device_type' (the lab's device type)")
    server = v["dispatcher"] == "server"
    for key in ("server", "user") if server else ():
        if v[key] is None:
            raise BadLab(f'target {name}: missing key {key!r} (dispatcher = "server")')
    if server and (v["token_file"] is None) == (v["token_env"] is None):
        raise BadLab(f"target {name}: give the token as token_file or token_env (one of them)")
    if server and not str(v["server"]).startswith(("http://", "https://")):
        raise BadLab(f"target {name}: server must be an http(s) URL, got {v['server']!r}")
    if server and v["artifacts"] is None:
        raise BadLab(f"target {name}: missing key 'artifacts' (a URL base the lab fetches from)")
    base = v["artifacts"]
    if base is not None and v["upload"] is None and not base.startswith("file://"):
        raise BadLab(f"target {name}: artifacts {base}: give an upload command (or a file:// base)")
    if v["devices"] and server:
        raise BadLab(f'target {name}: devices go with dispatcher = "local" (the lab has its own)')
    devices = tuple(Path(d).expanduser() for d in v["devices"])
    if missing := next((d for d in devices if not d.is_file()), None):
        raise BadLab(f"target {name}: devices: {missing}: no such file (a device dictionary)")
    if v["queue_timeout_s"] < 1:
        raise BadLab(f"target {name}: queue_timeout_s must be at least 1")
    return Lab(
        name=name,
        dispatcher=v["dispatcher"],
        server=v["server"].rstrip("/") if v["server"] else None,
        user=v["user"],
        token_file=Path(v["token_file"]).expanduser() if v["token_file"] else None,
        token_env=v["token_env"],
        device_type=v["device_type"],
        tags=tuple(v["tags"]),
        devices=devices,
        artifacts=v["artifacts"],
        upload=v["upload"],
        queue_timeout_s=v["queue_timeout_s"],
    )
