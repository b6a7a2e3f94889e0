"""The `postgres` axis: PostgreSQL servers built from source, one per value.

    --axis postgres=debian:17,debian:17+batch.mbox
    --axis postgres=~/src/postgres@REL_17_6,~/src/postgres@REL_17_6+0001-x.patch

A value is a source (pgbuild/spec.py: `PATH[@REV]` or `debian:MAJOR`) and patch files,
applied in order, joined by `+`. Where `+` splits: every way of dividing the value at its
`+`s into a source that parses (its revision, if any, holds no `+`) and the names of
existing files is tried, and exactly one must fit. So a tree in a directory named
`pg+fork` works as long as `fork...` names no file (or with its revision given,
`pg+fork@HEAD`), and so does a patch named `fix+more.patch`; a value that two readings fit
is refused in one line. Every value is checked when parsed, before anything is built: its
source parses and its patch files read as patches (pgbuild/request.py); otherwise one
line naming the value, exit 2.

`build` runs once, when the study starts (after the plan is printed and the budget
passed, before the first kernel build): each value's server is built (or found in the
cache) and its level takes the overrides `postgres.build=KEY` and `postgres.major=MAJOR`,
which study.json stores with every cell, so the samples, a resume and the report see a
scenario key like any other. A level's label is the value with each patch by its file
name (`debian:17+batch.mbox`); where two would read alike, the values as typed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbisect.core import progress
from kbisect.core.exceptions import UserError
from kbisect.pgbuild import request, spec
from kbisect.pgbuild.request import Request
from kbisect.scenario import scenario
from kbisect.study import axes
from kbisect.study.axes import Axis, AxisError, Cell, Level

AXIS = axes.POSTGRES
JOIN = "+"
# other axes that would say which server runs as well
PINS = ("postgres.build", "postgres.major", "postgres.version", "postgres.source")


@dataclass(frozen=True)
class PgLevel(Level):
    """A level of the postgres axis: its server as asked for; `sets` once built."""

    request: Request | None = None

    def as_dict(self) -> dict[str, Any]:
        assert self.request is not None
        asked = {"source": self.request.source, "patches": list(map(str, self.request.patches))}
        return {**super().as_dict(), "postgres": asked}


def _names_source(text: str) -> bool:
    """Does `text` name a source? A revision here holds no `+` (PostgreSQL's tags and
    commit ids never do): what follows a `+` after the `@` is a patch."""
    if JOIN in text.rpartition("@")[2] and "@" in text:
        return False
    try:
        spec.parse(text)
    except UserError:
        return False
    return True


def _files(parts: Sequence[str]) -> Iterator[tuple[Path, ...]]:
    """Every way of joining consecutive parts (at `+`) into names of existing files."""
    if not parts:
        yield ()
        return
    for i in range(1, len(parts) + 1):
        name = Path(JOIN.join(parts[:i])).expanduser()
        if name.is_file():
            for rest in _files(parts[i:]):
                yield (name.absolute(), *rest)


def read(value: str, where: str) -> Request:
    """The one reading of `value` (a source and patch files), checked; AxisError naming
    the value when none fits, or more than one."""
    parts = [p.strip() for p in value.split(JOIN)]
    named = f"{where}: {request.shown(value)}"
    if not all(parts):
        raise AxisError(f"{named}: a source or a patch name is empty (around {JOIN})")
    found = [
        Request(JOIN.join(parts[:i]), files)
        for i in range(1, len(parts) + 1)
        if _names_source(JOIN.join(parts[:i]))
        for files in _files(parts[i:])
    ]
    if len(found) > 1:
        readings = ", or ".join(
            r.source + (f" with {', '.join(p.name for p in r.patches)}" if r.patches else "")
            for r in found[:2]
        )
        raise AxisError(
            f"{named}: reads two ways ({request.shown(readings)}): name the tree's revision "
            "(PATH@HEAD) or rename the file"
        )
    # none: the plainest reading (the source up to the first +) says what is wrong
    chosen = found[0] if found else Request(parts[0], tuple(map(Path, parts[1:])))
    try:
        chosen.check()
    except UserError as exc:
        why = str(exc).removeprefix(f"--pg-build {request.shown(chosen.source)}: ")
        raise AxisError(f"{named}: {why}") from None
    return chosen


def _label(r: Request) -> str:
    return JOIN.join([r.source, *(p.name for p in r.patches)])


def axis(values: Sequence[str], where: str = f"--axis {AXIS}") -> Axis:
    """The postgres axis of `values`, each checked (AxisError, one line, naming it)."""
    requests = [read(v, where) for v in values]
    labels = [_label(r) for r in requests]
    if len(set(labels)) != len(labels):
        labels = list(values)  # two patches of one name: the values as typed tell them apart
    return axes.make(AXIS, [PgLevel(lb, request=r) for lb, r in zip(labels, requests, strict=True)])


def parse(option: str) -> Axis | None:
    """`--axis postgres=...` as its axis; None for an axis of another key."""
    key, values = axes.split(option)
    return axis(values) if key == AXIS else None


def check(
    base: scenario.Scenario, sets: Sequence[str], cells: Sequence[Cell], all_axes: Sequence[Axis]
) -> None:
    """Before any build: no other axis says which server runs, and every cell's scenario
    can run a build (checked with a stand-in key; one line naming the cell)."""
    if not any(a.name == AXIS for a in all_axes):
        return
    for a in all_axes:
        if a.name in PINS:
            raise AxisError(f"axes {a.name} and {AXIS} both say which server runs: keep one")
    axes.scenarios(base, [*sets, request.STAND_IN], cells, all_axes)


def builds(all_axes: Sequence[Axis]) -> int:
    """The PostgreSQL builds the axes need (for the estimate)."""
    return sum(len(a.levels) for a in all_axes if a.name == AXIS)


def build(all_axes: Sequence[Axis]) -> tuple[Axis, ...]:
    """The axes with every postgres level's server built (or found in the cache) and
    named in its level's overrides."""
    return tuple(_built(a) if a.name == AXIS else a for a in all_axes)


def _built(a: Axis) -> Axis:
    levels: list[Level] = []
    for i, level in enumerate(a.levels, 1):
        assert isinstance(level, PgLevel) and level.request is not None
        progress.step(f"PostgreSQL {i}/{len(a.levels)}: {level.label}")
        made = level.request.make()
        levels.append(replace(level, sets=made.sets))
    return Axis(a.name, tuple(levels))
