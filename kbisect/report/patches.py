"""The patches a kernel was built with, as every report names them: file name, subject
(of each commit the file made) and content hash (sha256, 12 hex), in the order applied
(the `patches` list of a build's manifest, source/patches.describe)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kbisect.report.formats import cell

Described = Sequence[Mapping[str, Any]]


def line(described: Described) -> str:
    """The patches in one line: `name ("subject", sha256 abcd…)` each, `; ` between."""
    return "; ".join(
        f'{d.get("file")} ("{d.get("subject") or "no subject"}", sha256 {d.get("sha256")})'
        for d in described
    )


def markdown(by_side: Mapping[str, Described]) -> list[str]:
    """A `## Patches` section: one row per patch of each side that has some; nothing when
    no side has any (so runs without patches render as they always did)."""
    rows = [
        f"| {side} | {i} | `{cell(d.get('file'))}` | {cell(d.get('subject') or '')} "
        f"| `{d.get('sha256')}` |"
        for side, described in by_side.items()
        for i, d in enumerate(described, 1)
    ]
    if not rows:
        return []
    head = ["## Patches", "", "Applied in this order on top of the side's revision.", ""]
    table = ["| side | # | file | subject | sha256 |", "|---|---:|---|---|---|", *rows]
    return [*head, *table, ""]
