"""Fan-out over several identical machines: `kbisect study plan` splits a study into
shares of whole cells (so every kernel-to-kernel comparison of a cell stays on one
machine) and prints a GitHub Actions job matrix; each runner runs
`kbisect study STUDY --share I/N`; `kbisect study merge DIR...` joins the shares,
refusing shares of different studies and machines with different fingerprints.

Shares are balanced by each cell's estimated time (longest first, onto the least loaded
share), deterministically, so `--share I/N` on a runner gets the cells the plan printed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbisect.core import atomic
from kbisect.core.exceptions import UserError
from kbisect.measure import results
from kbisect.study import machine, store


class ShareError(UserError):
    """A bad --share, or shares that cannot be merged."""


def parse_share(text: str) -> tuple[int, int]:
    """`--share 2/3` -> (1, 3): the second of three shares (1-based on the command line)."""
    m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise ShareError(f"--share {text}: expected I/N with 1 <= I <= N, e.g. 2/3")
    return int(m[1]) - 1, int(m[2])


def partition(seconds: Sequence[float], shares: int) -> list[list[int]]:
    """Cell indices per share: longest cell first onto the least loaded share."""
    if shares < 1:
        raise ShareError(f"--runners {shares}: need at least 1")
    load = [0.0] * shares
    out: list[list[int]] = [[] for _ in range(shares)]
    for cell in sorted(range(len(seconds)), key=lambda c: (-seconds[c], c)):
        i = min(range(shares), key=lambda s: (load[s], s))
        load[i] += seconds[cell]
        out[i].append(cell)
    return [sorted(cells) for cells in out]


def matrix(
    study: str, parts: Sequence[Sequence[int]], labels: Sequence[str], prefix: str
) -> dict[str, Any]:
    """`{"include": [{"share": "1/3", "runner": "<prefix>1", "cells": "c0 c3", ...}]}`;
    shares without cells (more runners than cells) are left out."""
    n = len(parts)
    include = [
        {
            "share": f"{i + 1}/{n}",
            "runner": f"{prefix}{i + 1}",
            "study": study,
            "cells": " ".join(f"c{c}" for c in cells),
            "labels": "; ".join(labels[c] for c in cells),
        }
        for i, cells in enumerate(parts)
        if cells
    ]
    return {"include": include}


def _check_shares(defs: Sequence[tuple[Path, dict[str, Any]]]) -> None:
    first_dir, first = defs[0]
    seen: dict[str, Path] = {}
    for run_dir, d in defs:
        if (mine := store.identity(d)) != (theirs := store.identity(first)):
            raise ShareError(
                f"{run_dir} is a share of another study ({d.get('name')} {mine}) than "
                f"{first_dir} ({first.get('name')} {theirs}): not merged"
            )
        if diff := machine.differences(first.get("machine") or {}, d.get("machine") or {}):
            raise ShareError(
                f"{run_dir} ran on a different machine than {first_dir} "
                f"({'; '.join(diff)}): its cells cannot be compared with the others"
            )
        for cell in (d.get("share") or {}).get("cells") or []:
            if cell in seen:
                raise ShareError(f"cell {cell} is in two shares: {seen[cell]} and {run_dir}")
            seen[cell] = run_dir


def merge(dirs: Sequence[Path], out: Path | None) -> Path:
    """Check the shares, then copy their samples into `out` (default: a new run dir) with
    a joined study.json; return `out`."""
    if len(dirs) < 2:
        raise ShareError("kbisect study merge needs two or more share directories")
    defs = [(d, store.load_definition(d)) for d in dirs]
    _check_shares(defs)
    merged = dict(defs[0][1])
    merged["share"] = None
    merged["shares"] = [
        {"dir": str(d), "share": x.get("share"), "machine": x.get("machine")} for d, x in defs
    ]
    out = out or results.new_run_dir("study", f"{merged['name']}-merged")
    (out / results.SAMPLES).mkdir(parents=True, exist_ok=True)
    for run_dir, _ in defs:
        for sample in store.samples(run_dir):
            results.write_sample(out, sample)
        if (run_dir / store.SCHEDULE).is_file():
            schedule = store.load_schedule(run_dir)
            atomic.write_json(out / "schedules" / f"{run_dir.name}-{store.SCHEDULE}", schedule)
    store.write_definition(out, merged)
    return out
