"""The fields a scenario file may have: sections, types, defaults, and each field's own
check (ranges, choices, sizes, names, paths); ScenarioError; dotted lookups."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kbisect.core import reading
from kbisect.core.exceptions import UserError
from kbisect.scenario import profile, server, storage

Check = Callable[[Any], "str | None"]
REQUIRED = object()  # a field's default when the file must give it; also "missing"
HARNESS_OWNED = ("port", "listen_addresses", "unix_socket_directories")


class ScenarioError(UserError):
    """A scenario file (or an override) is missing a field or has a wrong one."""


def _range(low: int, high: int | None = None) -> Check:
    def check(value: Any) -> str | None:
        if value >= low and (high is None or value <= high):
            return None
        return f"must be at least {low}" if high is None else f"must be {low} to {high}"

    return check


def _one_of(*choices: str) -> Check:
    return lambda value: None if value in choices else f"must be one of {', '.join(choices)}"


def _size(value: Any) -> str | None:
    ok = re.fullmatch(r"\d+(B|kB|MB|GB|TB)", value)
    return None if ok else "must be a size with a unit (kB, MB, GB...)"


def _name(value: Any) -> str | None:
    ok = re.fullmatch(r"[a-z0-9][a-z0-9._-]*", value)
    return None if ok else "must be lowercase letters, digits, '.', '_' or '-'"


DAY_S = 86400
HUGEPAGE_MB = 2  # the default huge page size of both arches (x86_64, arm64 with 4 KB pages)


def _absolute(value: Any) -> str | None:
    ok = re.fullmatch(r"/[A-Za-z0-9_./+-]*", value) and "/../" not in f"{value}/"
    return None if ok else "must be an absolute path of letters, digits and _ . / + -"


def _matching(pattern: str, problem: str) -> Check:
    """A string field that must match `pattern` whole."""
    return lambda value: None if re.fullmatch(pattern, value) else problem


_debian_version = _matching(
    server.DEBIAN_VERSION, "must be a Debian package version (e.g. 17.12-1)"
)
_build_key = _matching(
    server.BUILD_KEY, "must be a build key `kbisect pg-build` printed (e.g. pg17-0123456789ab)"
)


def _options(value: Any) -> str | None:
    ok = re.fullmatch(r"[A-Za-z0-9_=,.:+-]*", value)
    return None if ok else "must be comma-separated mount options (no spaces)"


SECTIONS = (
    "postgres",
    "postgres.settings",
    "pgbench",
    "guest",
    "storage",
    "fio",
    "compare",
    "profile",
    "timeouts",
)
# dotted field: (type, default or REQUIRED or None for "optional, no default", check)
FIELDS: dict[str, tuple[str, Any, Check | None]] = {
    "name": ("str", REQUIRED, _name),
    "description": ("str", REQUIRED, None),
    "postgres.major": ("int", REQUIRED, _range(10, 99)),
    "postgres.source": ("str", "image", _one_of("image", "host")),
    "postgres.version": ("str", None, _debian_version),
    "postgres.build": ("str", None, _build_key),
    "postgres.port": ("int", 5432, _range(1024, 65535)),
    "postgres.settings.shared_buffers": ("str", REQUIRED, _size),
    "postgres.settings.huge_pages": ("str", REQUIRED, _one_of("on", "off", "try")),
    "postgres.settings.max_connections": ("int", REQUIRED, _range(1, 262143)),
    "pgbench.builtin": ("str", None, _one_of("simple-update", "tpcb-like", "select-only")),
    "pgbench.script": ("str", None, None),
    "pgbench.scale": ("int", REQUIRED, _range(1, 1_000_000)),
    "pgbench.fillfactor": ("int", 100, _range(10, 100)),
    "pgbench.clients": ("int", REQUIRED, _range(1, 262142)),
    "pgbench.threads": ("int", REQUIRED, _range(1, 262142)),
    "pgbench.duration_s": ("int", REQUIRED, _range(1, DAY_S)),
    "pgbench.warmup_runs": ("int", 0, _range(0, 100)),
    "pgbench.warmup_s": ("int", None, _range(1, DAY_S)),  # a warm-up run's length
    "pgbench.runs": ("int", REQUIRED, _range(1, 1000)),
    "pgbench.protocol": ("str", REQUIRED, _one_of("simple", "extended", "prepared")),
    "pgbench.vacuum": ("bool", True, None),
    "guest.vcpus": ("int", REQUIRED, _range(1, 1024)),  # QEMU's limit for x86 q35 and arm virt
    "guest.memory_mb": ("int", REQUIRED, _range(256, 4 * 1024 * 1024)),  # up to 4 TB
    "guest.hugepages": ("int", 0, _range(0, 2 * 1024 * 1024)),
    "guest.thp": ("str", None, _one_of("always", "madvise", "never")),
    "guest.pgdata": ("str", "tmpfs", _one_of("tmpfs")),
    "guest.pgdata_size_mb": ("int", REQUIRED, _range(64, 4 * 1024 * 1024)),
    "guest.append": ("str", "", reading.line),
    # [storage] and [fio]: kind-dependent defaults and rules are in storage.py
    "storage.kind": ("str", None, _one_of(*storage.KINDS)),
    "storage.backing": ("str", None, _one_of("file", "device")),
    "storage.size_gb": ("int", None, _range(1, 65536)),
    "storage.device": ("str", None, _absolute),
    "storage.fs": ("str", None, _one_of(*storage.FILESYSTEMS)),
    "storage.mount_options": ("str", None, _options),
    "storage.cache": ("str", None, _one_of("none", "writeback")),
    "storage.throttle_iops": ("int", None, _range(1, 10_000_000)),
    "storage.path": ("str", None, _absolute),
    "fio.enabled": ("bool", None, None),
    "fio.seconds": ("int", None, _range(1, 600)),
    "fio.size_mb": ("int", None, _range(16, 65536)),
    "compare.boots": ("int", 5, _range(1, 1000)),
    # [profile]: perf during one extra run of a boot (scenario/profile.py, docs/profiles.md)
    "profile.enabled": ("bool", profile.DEFAULTS["enabled"], None),
    "profile.boots_per_side": ("int", profile.DEFAULTS["boots_per_side"], _range(1, 1000)),
    "profile.seconds": ("int", profile.DEFAULTS["seconds"], _range(1, 3600)),
    "profile.frequency": ("int", profile.DEFAULTS["frequency"], _range(1, 10000)),
    "profile.event": (
        "str",
        profile.DEFAULTS["event"],
        _matching(profile.EVENT, "must be a perf event name (e.g. cpu-clock)"),
    ),
    "profile.call_graph": ("str", profile.DEFAULTS["call_graph"], _one_of(*profile.CALL_GRAPHS)),
    "timeouts.boot_s": ("int", 300, _range(1, DAY_S)),
    "timeouts.idle_s": ("int", 120, _range(1, DAY_S)),
    "timeouts.total_s": ("int", None, _range(1, 7 * DAY_S)),
}


TYPES: dict[str, tuple[str, tuple[type, ...]]] = {
    "int": ("an integer", (int,)),
    "str": ("a string", (str,)),
    "bool": ("a boolean", (bool,)),
}


def typed(kind: str, value: Any) -> bool:
    if kind == "int" and isinstance(value, bool):
        return False
    return isinstance(value, TYPES[kind][1])


def lookup(raw: dict[str, Any], dotted: str) -> Any:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return REQUIRED  # the "missing" marker
        node = node[part]
    return node


def assign(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
