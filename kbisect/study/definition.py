"""A stored study's study.json and schedule.json read back whole: each field a resume or
a report reads, of its type (core/reading.py's Fields, naming the field's path), and the
two consistent with each other: the cells are the product of the axes' levels, the
baseline is one of the kernels, every slot names a kernel and a cell there are.

store.py reads the files; the checks are here, so that a damaged field is one line
(CorruptFile, exit 3) before the analysis or the report touches it, never a traceback.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from typing import Any

from kbisect.core.reading import Fields

OPTIONAL = ("tree", "command", "description", "source", "target_spec")


def rows(f: Fields, key: str, check: Callable[[Fields], None], least: int = 0) -> list[Any]:
    """The list `key`, each item a table `check` reads; at least `least` of them."""
    items: list[Any] = f.items(key)
    if len(items) < least:
        f.fail(key, f"must have at least {least} item(s), got {len(items)}")
    for i, value in enumerate(items):
        check(Fields(value, f.source, f"{f.prefix}{key}[{i}].", f.error))
    return items


def _table_or_null(f: Fields, key: str) -> Fields | None:
    value = f.value(key, None)
    return None if value is None else f.table(key)


def _strings(f: Fields, key: str) -> None:
    """A list of strings that must be there."""
    f.items(key)
    f.strings(key)


def _kernel(f: Fields) -> None:
    f.string("label")
    for key in ("name", "commit", "subject", "image", "rev", "arch", "tree", "version"):
        f.string(key, None)
    f.items("patches", [])


def _level(f: Fields) -> None:
    f.string("label")
    f.strings("set")
    f.string("append", "")


def _axis(f: Fields) -> None:
    f.string("name")
    rows(f, "levels", _level, least=1)


def _cell(f: Fields) -> None:
    for key in ("id", "label", "append"):
        f.string(key)
    _strings(f, "set")
    values = f.table("values", required=True)
    for key in values.data:
        values.string(key)
    f.string("scenario_hash", None)


def _machines(f: Fields) -> None:
    _table_or_null(f, "machine")
    if (share := _table_or_null(f, "share")) is not None:
        share.strings("cells")


def _cells_match_axes(f: Fields, axes: list[Any], cells: list[Any]) -> None:
    names = [a["name"] for a in axes]
    want = Counter(itertools.product(*([lv["label"] for lv in a["levels"]] for a in axes)))
    got = Counter(tuple(c["values"].get(n) for n in names) for c in cells)
    if got != want:
        f.fail("cells", f"are not the {sum(want.values())} combinations of the axes' levels")


def check(f: Fields) -> None:
    """study.json's fields (f: its Fields, raising CorruptFile)."""
    kernels = rows(f, "kernels", _kernel, least=1)
    axes = rows(f, "axes", _axis)
    cells = rows(f, "cells", _cell, least=1)
    _cells_match_axes(f, axes, cells)
    for key in ("sets", "configs"):
        _strings(f, key)
    for key in ("name", "append", "arch", "target", "base_config"):
        f.string(key)
    for key in OPTIONAL:
        f.string(key, None)
    f.integer("boots", 1, low=1)
    f.integer("retries", 0)
    f.integer("baseline", None, high=len(kernels) - 1)
    f.integer("seed", None)
    f.fraction("min_effect", 0.02)
    scenario = f.table("scenario", required=True)
    for key in ("name", "hash", "source"):
        scenario.string(key)
    _machines(f)
    if f.value("shares", None) is not None:
        rows(f, "shares", _machines)


def check_schedule(f: Fields, kernels: int, cells: int) -> None:
    """schedule.json's slots (f: its Fields), each in a block, of a kernel and a cell of
    the study's `kernels` and `cells`."""

    def slot(s: Fields) -> None:
        s.integer("block")
        s.integer("kernel", high=kernels - 1)
        s.integer("cell", high=cells - 1)

    rows(f, "slots", slot)
