"""Pinned benchmark scenarios: load, validate and hash `harness/scenarios/*.toml`.

A scenario fixes everything a measurement depends on (PostgreSQL major and settings,
pgbench workload, guest size, timeouts); its hash covers all of it except the
description, with defaults filled in and a custom script's content instead of its path.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect import paths, storage
from kbisect.exceptions import UserError

Check = Callable[[Any], "str | None"]
REQUIRED = object()  # a field's default when the file must give it; also "missing"
HARNESS_OWNED = ("port", "listen_addresses", "unix_socket_directories")


class ScenarioError(UserError):
    """A scenario file (or an override) is missing a field or has a wrong one."""


def _got(value: Any) -> str:
    return json.dumps(value, default=str)


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
    "timeouts",
)
# dotted field: (type, default or REQUIRED or None for "optional, no default", check)
FIELDS: dict[str, tuple[str, Any, Check | None]] = {
    "name": ("str", REQUIRED, _name),
    "description": ("str", REQUIRED, None),
    "postgres.major": ("int", REQUIRED, _range(10, 99)),
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
    "pgbench.runs": ("int", REQUIRED, _range(1, 1000)),
    "pgbench.protocol": ("str", REQUIRED, _one_of("simple", "extended", "prepared")),
    "pgbench.vacuum": ("bool", True, None),
    "guest.vcpus": ("int", REQUIRED, _range(1, 1024)),  # QEMU's limit for x86 q35 and arm virt
    "guest.memory_mb": ("int", REQUIRED, _range(256, 4 * 1024 * 1024)),  # up to 4 TB
    "guest.hugepages": ("int", 0, _range(0, 2 * 1024 * 1024)),
    "guest.thp": ("str", None, _one_of("always", "madvise", "never")),
    "guest.pgdata": ("str", "tmpfs", _one_of("tmpfs")),
    "guest.pgdata_size_mb": ("int", REQUIRED, _range(64, 4 * 1024 * 1024)),
    "guest.append": ("str", "", None),
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
    "timeouts.boot_s": ("int", 300, _range(1, DAY_S)),
    "timeouts.idle_s": ("int", 120, _range(1, DAY_S)),
    "timeouts.total_s": ("int", None, _range(1, 7 * DAY_S)),
}


def check_setting(name: str, value: Any) -> str | None:
    if not re.fullmatch(r"[a-z_][a-z0-9_.]*", name):
        return "is not a PostgreSQL setting name"
    if name in HARNESS_OWNED:
        return "is set by the harness (use postgres.port)"
    if not isinstance(value, str | int | float | bool):
        return f"must be a string, number or boolean, got {_got(value)}"
    return None


def cross_check(data: dict[str, Any]) -> str | None:
    """Rules between fields; the one-line problem, or None."""
    bench, guest, pg = data["pgbench"], data["guest"], data["postgres"]["settings"]
    if ("builtin" in bench) == ("script" in bench):
        return "pgbench needs exactly one of builtin or script"
    if bench["threads"] > bench["clients"]:
        return f"pgbench.threads ({bench['threads']}) exceeds pgbench.clients ({bench['clients']})"
    if bench["clients"] >= pg["max_connections"]:
        return (
            f"pgbench.clients ({bench['clients']}) must be below "
            f"postgres.settings.max_connections ({pg['max_connections']})"
        )
    if pg["huge_pages"] == "on" and not guest["hugepages"] and "hugepages=" not in guest["append"]:
        return (
            "postgres.settings.huge_pages is on but guest.hugepages is 0 "
            "(reserve some, or put hugepages= in guest.append)"
        )
    if guest["hugepages"] * HUGEPAGE_MB >= guest["memory_mb"]:
        return (
            f"guest.hugepages ({guest['hugepages']} x {HUGEPAGE_MB} MB) must fit in "
            f"guest.memory_mb ({guest['memory_mb']})"
        )
    return _check_total(data)


def _check_total(data: dict[str, Any]) -> str | None:
    """A total timeout shorter than the measured runs themselves can only time out."""
    total, bench = data["timeouts"].get("total_s"), data["pgbench"]
    runtime = (bench["warmup_runs"] + bench["runs"]) * bench["duration_s"]
    if total is None or total > runtime:
        return None
    return (
        f"timeouts.total_s ({total}) must exceed the runs' own length, (pgbench.warmup_runs "
        f"+ pgbench.runs) x pgbench.duration_s = {runtime} s"
    )


def _default_total_s(data: dict[str, Any]) -> int:
    """Boot, plus 10 minutes for the template, plus each run with a minute to spare."""
    bench = data["pgbench"]
    count = bench["warmup_runs"] + bench["runs"]
    return int(data["timeouts"]["boot_s"] + 600 + count * (bench["duration_s"] + 60))


_TYPES: dict[str, tuple[str, tuple[type, ...]]] = {
    "int": ("an integer", (int,)),
    "str": ("a string", (str,)),
    "bool": ("a boolean", (bool,)),
}


def _typed(kind: str, value: Any) -> bool:
    if kind == "int" and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[kind][1])


def _lookup(raw: dict[str, Any], dotted: str) -> Any:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return REQUIRED  # the "missing" marker
        node = node[part]
    return node


def _assign(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def _children(prefix: str) -> set[str]:
    """Field and section names directly under `prefix` ("" or "pgbench.")."""
    tails = (d[len(prefix) :] for d in (*FIELDS, *SECTIONS) if d.startswith(prefix))
    return {tail.split(".")[0] for tail in tails}


def _check_shape(raw: dict[str, Any], source: str, prefix: str = "") -> None:
    """Every key is a known field or section; sections are tables."""
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if dotted in SECTIONS:
            if not isinstance(value, dict):
                raise ScenarioError(f"{source}: [{dotted}] must be a table, got {_got(value)}")
            if dotted != "postgres.settings":
                _check_shape(value, source, f"{dotted}.")
        elif dotted not in FIELDS:
            known = sorted(_children(prefix))
            raise ScenarioError(
                f"{source}: unknown field {dotted} (known here: {', '.join(known) or 'none'})"
            )


def _field(raw: dict[str, Any], dotted: str, source: str, data: dict[str, Any]) -> None:
    kind, default, check = FIELDS[dotted]
    value = _lookup(raw, dotted)
    if value is REQUIRED:
        if default is REQUIRED:
            raise ScenarioError(f"{source}: {dotted} is missing")
        if default is None:
            return
        value = default
    if not _typed(kind, value):
        raise ScenarioError(f"{source}: {dotted} must be {_TYPES[kind][0]}, got {_got(value)}")
    problem = check(value) if check else None
    if problem:
        raise ScenarioError(f"{source}: {dotted} {problem}, got {_got(value)}")
    _assign(data, dotted, value)


def _resolve_script(data: dict[str, Any], base: Path | None, source: str) -> None:
    script = data["pgbench"].get("script")
    if script is None:
        return
    path = Path(script) if base is None else base / script
    if not path.is_file():
        raise ScenarioError(f"{source}: pgbench.script: no such file {path}")
    data["pgbench"]["script"] = str(path.resolve())


def validate(raw: dict[str, Any], source: str, base: Path | None = None) -> dict[str, Any]:
    """The scenario with defaults filled in; ScenarioError naming `source` and the field."""
    _check_shape(raw, source)
    data: dict[str, Any] = {}
    for dotted in FIELDS:
        _field(raw, dotted, source, data)
    settings = raw.get("postgres", {}).get("settings", {})
    for name, value in settings.items():
        problem = check_setting(name, value)
        if problem:
            raise ScenarioError(f"{source}: postgres.settings.{name} {problem}")
        data["postgres"]["settings"][name] = value
    problem = cross_check(data) or storage.complete(data)
    if problem:
        raise ScenarioError(f"{source}: {problem}")
    data["timeouts"].setdefault("total_s", _default_total_s(data))
    _resolve_script(data, base, source)
    return data


def scenario_hash(data: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of everything but the description, and but [storage]
    and [fio] while they say what a scenario did before they existed (tmpfs, no fio), so a
    scenario without them keeps the hash it had."""
    view = copy.deepcopy(data)
    view.pop("description", None)
    for section, default in storage.UNHASHED_DEFAULTS.items():
        if view.get(section) == default:
            view.pop(section)
    script = view["pgbench"].get("script")
    if script is not None:
        digest = hashlib.sha256(Path(script).read_bytes()).hexdigest()
        view["pgbench"]["script"] = f"sha256:{digest}"
    canonical = json.dumps(view, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Scenario:
    data: dict[str, Any]  # validated, defaults filled in: what the guest receives
    raw: dict[str, Any]  # as written (overrides apply here, so defaults are recomputed)
    source: str  # file name, for messages
    base: Path | None  # the file's folder, for relative script paths
    hash: str

    @property
    def name(self) -> str:
        return str(self.data["name"])

    def get(self, dotted: str) -> Any:
        """`scenario.get("pgbench.clients")`; KeyError if absent."""
        value = _lookup(self.data, dotted)
        if value is REQUIRED:
            raise KeyError(dotted)
        return value

    def to_json(self) -> str:
        """The resolved scenario the host writes for the guest harness."""
        return json.dumps(self.data, indent=2, sort_keys=True) + "\n"

    def with_overrides(self, overrides: list[str]) -> Scenario:
        """`["postgres.settings.huge_pages=on", "pgbench.clients=32"]`, checked like the file."""
        raw = copy.deepcopy(self.raw)
        for item in overrides:
            dotted, value = parse_override(item)
            _assign(raw, dotted, value)
        label = self.source if not overrides else f"{self.source} with {' '.join(overrides)}"
        return _make(raw, label, self.base)


def parse_override(item: str) -> tuple[str, Any]:
    """`a.b=value`: value read as a TOML value (32, true, "x"), else taken as a string."""
    dotted, sep, text = item.partition("=")
    if not sep or not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_.]*)*", dotted.strip()):
        raise ScenarioError(f"override must look like section.field=value, got {_got(item)}")
    try:
        value: Any = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()
    return dotted.strip(), value


def _make(raw: dict[str, Any], source: str, base: Path | None) -> Scenario:
    data = validate(raw, source, base)
    return Scenario(data=data, raw=raw, source=source, base=base, hash=scenario_hash(data))


# PostgreSQL 14 and older: the statistics collector needs a UDP socket on localhost
# (without one it turns track_counts, and with it autovacuum, off); 15 keeps statistics
# in shared memory and runs on the Unix socket alone.
INET_UP_TO_MAJOR = 14


def kernel_fragments(scen: Scenario) -> list[str]:
    """The `--config` fragments a kernel needs to run `scen`: xfs for an xfs disk, inet
    (IPv4) for PostgreSQL 14 and older."""
    inet = ["inet"] if scen.data["postgres"]["major"] <= INET_UP_TO_MAJOR else []
    return storage.kernel_fragments(scen.data) + inet


def names() -> list[str]:
    return sorted(p.stem for p in paths.scenarios_dir().glob("*.toml"))


def _path_of(name_or_path: str) -> Path:
    if "/" in name_or_path or name_or_path.endswith(".toml"):
        path = Path(name_or_path)
        if not path.is_file():
            raise ScenarioError(f"no such scenario file: {path}")
        return path
    path = paths.scenarios_dir() / f"{name_or_path}.toml"
    if not path.is_file():
        raise ScenarioError(
            f'unknown scenario "{name_or_path}"; available: {", ".join(names()) or "none"}'
        )
    return path


def load(name_or_path: str) -> Scenario:
    """A shipped scenario by name (`smoke`), or any scenario file by path."""
    path = _path_of(name_or_path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path.name}: invalid TOML: {exc}") from exc
    scenario = _make(raw, path.name, path.parent)
    if scenario.name != path.stem:
        raise ScenarioError(
            f"{path.name}: name must match the file name ({_got(path.stem)}), "
            f"got {_got(scenario.name)}"
        )
    return scenario
