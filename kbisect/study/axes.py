"""Axes, levels and cells: the product of named axes, expanded in one place.

An axis has levels; a level is a label plus what it changes: scenario overrides
(`pgbench.clients=16`) and kernel command-line extras (`preempt=full`). A key axis
(`--axis pgbench.clients=1,4,16`) makes one override per value; the `append` axis
(`--axis append=preempt=none,preempt=full`) puts each value on the command line; the
`postgres` axis builds a server per value (`--axis postgres=debian:17,debian:17+x.patch`,
pgaxis.py); a study file can add what a value needs besides its key (huge pages on
needs a reservation) or give bundles with no key at all (4 kB / 2 MB / 1 GB pages). A
cell is one level of every axis and carries all of them (hyperfine/asv style).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbisect.core.exceptions import UserError
from kbisect.scenario import fields, scenario

APPEND = "append"
POSTGRES = "postgres"  # an axis over PostgreSQL servers built from source (pgaxis.py)


class AxisError(UserError):
    """An axis that names no scenario key, has no values, or repeats another."""


@dataclass(frozen=True)
class Level:
    label: str
    sets: tuple[str, ...] = ()  # scenario overrides, KEY=VALUE
    append: str = ""  # kernel command-line extras

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "set": list(self.sets), "append": self.append}


@dataclass(frozen=True)
class Axis:
    name: str  # a scenario key, "append", or a bundle axis's own name
    levels: tuple[Level, ...]

    @property
    def short(self) -> str:
        """`clients` for pgbench.clients: the name in cell labels."""
        return self.name.rsplit(".", 1)[-1]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "levels": [lv.as_dict() for lv in self.levels]}


@dataclass(frozen=True)
class Cell:
    index: int
    levels: tuple[tuple[str, Level], ...]  # (axis name, level), in axis order

    @property
    def id(self) -> str:
        return f"c{self.index}"

    @property
    def sets(self) -> tuple[str, ...]:
        return tuple(s for _, lv in self.levels for s in lv.sets)

    @property
    def append(self) -> str:
        return " ".join(lv.append for _, lv in self.levels if lv.append)

    @property
    def values(self) -> dict[str, str]:
        return {name: lv.label for name, lv in self.levels}

    def label(self, axes: Sequence[Axis]) -> str:
        """`clients=16 huge_pages=on preempt=full` (an append level shows as itself)."""
        parts = []
        for axis, (_, lv) in zip(axes, self.levels, strict=True):
            parts.append(lv.label if axis.name == APPEND else f"{axis.short}={lv.label}")
        return " ".join(parts) or "(one cell)"


def check_key(key: str) -> None:
    """A scenario field (or a PostgreSQL setting), or `append`."""
    if key == APPEND or key in fields.FIELDS:
        return
    if key.startswith("postgres.settings.") and key.count(".") == 2:
        return
    known = ", ".join([APPEND, POSTGRES, *(k for k in fields.FIELDS if "." in k)])
    raise AxisError(f"--axis {key}: not a scenario key (known: {known})")


def text(value: Any) -> str:
    """A TOML value as the text of an override (`4`, `on`, `true`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def key_level(key: str, value: Any, needs: Mapping[str, Any] | None = None) -> Level:
    """The level `key=value`, plus what the value needs (`set`, `append`) from a study file."""
    label, extra = text(value), dict(needs or {})
    own = () if key == APPEND else (f"{key}={label}",)
    append = label if key == APPEND else ""
    more = str(extra.get("append", ""))
    return Level(label, own + tuple(extra.get("set", ())), " ".join(filter(None, [append, more])))


def split(option: str) -> tuple[str, list[str]]:
    """`--axis KEY=v1,v2,...` as (KEY, [v1, v2, ...]); AxisError (exit 2) for anything
    else."""
    key, sep, rest = option.partition("=")
    key = key.strip()
    values = [v.strip() for v in rest.split(",")] if sep else []
    if not key or not values or not all(values):
        raise AxisError(f"--axis {option}: expected KEY=VALUE1,VALUE2,... with no empty value")
    return key, values


def parse(option: str) -> Axis:
    """`--axis KEY=v1,v2,...` over a scenario key or `append`."""
    key, values = split(option)
    check_key(key)
    return make(key, [key_level(key, v) for v in values])


def make(name: str, levels: Sequence[Level]) -> Axis:
    labels = [lv.label for lv in levels]
    if not labels:
        raise AxisError(f"axis {name}: no values")
    if len(set(labels)) != len(labels):
        raise AxisError(f"axis {name}: a value repeats: {', '.join(labels)}")
    return Axis(name, tuple(levels))


def cells(axes: Sequence[Axis]) -> list[Cell]:
    """Every combination of one level per axis, the first axis varying slowest."""
    names = [a.name for a in axes]
    if len(set(names)) != len(names):
        raise AxisError(f"an axis repeats: {', '.join(names)}")
    combos = itertools.product(*(a.levels for a in axes))
    return [Cell(i, tuple(zip(names, combo, strict=True))) for i, combo in enumerate(combos)]


def scenarios(
    base: scenario.Scenario, sets: Sequence[str], all_cells: Sequence[Cell], axes: Sequence[Axis]
) -> list[scenario.Scenario]:
    """Each cell's scenario (the study's `--set`s, then the cell's), checked like a file:
    a value the scenario rejects is one line naming the cell."""
    out = []
    for cell in all_cells:
        try:
            out.append(base.with_overrides([*sets, *cell.sets]))
        except fields.ScenarioError as exc:
            raise AxisError(f"cell {cell.id} ({cell.label(axes)}): {exc}") from None
    return out
