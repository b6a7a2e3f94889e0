"""Pinned benchmark scenarios: load and hash `harness/scenarios/*.toml`; `--set` overrides.

A scenario fixes everything a measurement depends on (PostgreSQL major and settings,
pgbench workload, guest size, timeouts); its hash covers all of it except the
description, with defaults filled in and a custom script's content instead of its path.
Its fields are in fields.py, their validation in check.py.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import digest, paths, reading
from kbisect.core.reading import got
from kbisect.scenario import profile, storage
from kbisect.scenario.check import validate
from kbisect.scenario.fields import REQUIRED, ScenarioError, lookup


def scenario_hash(data: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of everything but the description, and but [storage]
    and [fio] while they say what a scenario did before they existed (tmpfs, no fio), and
    postgres.source while it says "host" (what every guest ran before scenarios pinned
    their server in an image), and [profile] while it is off, so a scenario without them
    keeps the hash it had."""
    view = copy.deepcopy(data)
    view.pop("description", None)
    if view["postgres"].get("source") == "host":
        view["postgres"].pop("source")
    profile.hashed(view)
    for section, default in storage.UNHASHED_DEFAULTS.items():
        if view.get(section) == default:
            view.pop(section)
    script = view["pgbench"].get("script")
    if script is not None:
        script_sha = hashlib.sha256(Path(script).read_bytes()).hexdigest()
        view["pgbench"]["script"] = f"sha256:{script_sha}"
    return digest.key(view, compact=True, ascii=False)


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
        value = lookup(self.data, dotted)
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
            _override(raw, *parse_override(item))
        label = self.source if not overrides else f"{self.source} with {' '.join(overrides)}"
        return _make(raw, label, self.base)


def parse_override(item: str) -> tuple[str, Any]:
    """`a.b=value`: value read as a TOML value (32, true, "x"), else taken as a string."""
    dotted, sep, text = item.partition("=")
    if not sep or not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*", dotted.strip()):
        raise ScenarioError(f"override must look like section.field=value, got {got(item)}")
    try:
        value: Any = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()
    return dotted.strip(), value


SETTINGS = "postgres.settings."


def _override(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `dotted` in `raw`; ScenarioError, one line, when a part of the way is a value
    (`pgbench.clients.x`) or the value is NaN or infinity. A PostgreSQL setting's name
    may hold dots (`auto_explain.log_min_duration`): it is one key of the settings."""
    if not reading.finite(value):
        raise ScenarioError(f"--set {dotted}: must be a finite value, got {got(value)}")
    parts = ["postgres", "settings", dotted[len(SETTINGS) :]]
    if not dotted.startswith(SETTINGS):
        parts = dotted.split(".")
    node = raw
    for i, part in enumerate(parts[:-1]):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            here = ".".join(parts[: i + 1])
            raise ScenarioError(
                f"--set {dotted}: {here} is a value ({got(node)}), not a section with fields"
            )
    node[parts[-1]] = value


def _make(raw: dict[str, Any], source: str, base: Path | None) -> Scenario:
    data = validate(raw, source, base)
    return Scenario(data=data, raw=raw, source=source, base=base, hash=scenario_hash(data))


# PostgreSQL 14 and older: the statistics collector needs a UDP socket on localhost
# (without one it turns track_counts, and with it autovacuum, off); 15 keeps statistics
# in shared memory and runs on the Unix socket alone.
INET_UP_TO_MAJOR = 14


def kernel_fragments(scen: Scenario) -> list[str]:
    """The `--config` fragments a kernel needs to run `scen`: xfs for an xfs disk, inet
    (IPv4) for PostgreSQL 14 and older, perf for a profiled scenario."""
    inet = ["inet"] if scen.data["postgres"]["major"] <= INET_UP_TO_MAJOR else []
    return storage.kernel_fragments(scen.data) + inet + profile.kernel_fragments(scen.data)


def names() -> list[str]:
    return sorted(p.stem for p in paths.scenarios_dir().glob("*.toml"))


def _path_of(name_or_path: str) -> Path:
    if paths.names_file(name_or_path):
        return Path(name_or_path)  # reading.toml says what is wrong with it
    path = paths.scenarios_dir() / f"{name_or_path}.toml"
    if not path.is_file():
        raise ScenarioError(
            f'unknown scenario "{name_or_path}"; available: {", ".join(names()) or "none"}'
        )
    return path


def load(name_or_path: str) -> Scenario:
    """A shipped scenario by name (`smoke`), or any scenario file by path."""
    path = _path_of(name_or_path)
    raw = reading.toml(path, ScenarioError)
    scenario = _make(raw, path.name, path.parent)
    if scenario.name != path.stem:
        raise ScenarioError(
            f"{path.name}: name must match the file name ({got(path.stem)}), "
            f"got {got(scenario.name)}"
        )
    return scenario
