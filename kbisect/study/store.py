"""A study's run directory (results/<time>-study-<name>/):

study.json      the resolved study: kernels, axes, cells, settings, machine, share
schedule.json   the boot plan, saved before the first boot (resume walks it)
samples/NNN-k<kernel>-c<cell>.json   one per boot (measure/sample.py)
summary.json, report.md, report.txt, *.png   written at the end, re-rendered by
                `kbisect report`
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.core import atomic, digest, paths, reading
from kbisect.core.exceptions import UserError
from kbisect.measure import results, retake
from kbisect.measure.record import Sample
from kbisect.study import definition as checks

DEFINITION = "study.json"
SCHEDULE = "schedule.json"
LABEL = re.compile(r"k(\d+)-c(\d+)")
IDENTITY_KEYS = (
    "name",
    "scenario",
    "sets",
    "append",
    "boots",
    "kernels",
    "cells",
    "seed",
    "arch",
    "configs",
    "base_config",
)


class NotAStudy(UserError):
    """A directory that holds no study run."""


def label(kernel: int, cell: int) -> str:
    return f"k{kernel}-c{cell}"


def unit_of(sample_label: str | None) -> tuple[int, int] | None:
    m = LABEL.fullmatch(sample_label or "")
    return (int(m[1]), int(m[2])) if m else None


def identity(definition: Mapping[str, Any]) -> str:
    """What makes two run dirs shares of one study: a hash of the study itself (kernels by
    commit, cells, settings, seed), not of where or when it ran."""
    view = {k: definition.get(k) for k in IDENTITY_KEYS}
    kernels = view["kernels"] or []
    view["kernels"] = [{"label": k["label"], "commit": k.get("commit")} for k in kernels]
    return digest.key(view, 16, compact=True)


def kernel_tree(definition: Mapping[str, Any], k: int) -> str | None:
    """Kernel k's tree as study.json names it (None: the embedded default): its own
    `tree`, or, in a study written before kernels had one, the study's."""
    kernel = definition["kernels"][k]
    return kernel["tree"] if "tree" in kernel else definition.get("tree")


def several_trees(definition: Mapping[str, Any]) -> bool:
    """Are the study's revisions in more than one tree?"""
    revs = [k for k, kernel in enumerate(definition["kernels"]) if kernel.get("rev")]
    return len({kernel_tree(definition, k) for k in revs}) > 1


# study.json and schedule.json are written before the first boot, whole (by rename).
RECOVER = "this study run cannot be resumed: run the study again (built kernels are cached)"


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise NotAStudy(f"{path.parent}: no {path.name} (not a kbisect study run directory)")
    return reading.json_table(path, RECOVER)


def write_definition(run_dir: Path, definition: dict[str, Any]) -> None:
    atomic.write_json(run_dir / DEFINITION, {**definition, "study_id": identity(definition)})


def load_definition(run_dir: Path) -> dict[str, Any]:
    """study.json, each field a resume or a report reads of its type (CorruptFile, exit
    3, naming the first that is not; definition.py)."""
    if not run_dir.is_dir():
        raise NotAStudy(f"{run_dir}: no such directory")
    path = run_dir / DEFINITION
    data = _read(path)
    checks.check(reading.own_fields(data, path, RECOVER))
    return data


def write_schedule(run_dir: Path, schedule: dict[str, Any]) -> None:
    atomic.write_json(run_dir / SCHEDULE, schedule)


def load_schedule(run_dir: Path) -> dict[str, Any]:
    """schedule.json, its slots checked against the study's kernels and cells."""
    d = load_definition(run_dir)
    path = run_dir / SCHEDULE
    data = _read(path)
    f = reading.own_fields(data, path, RECOVER)
    checks.check_schedule(f, len(d["kernels"]), len(d["cells"]))
    return data


def samples(run_dir: Path) -> list[Sample]:
    """This run's samples that belong to a kernel and cell, in boot order."""
    found = results.load_samples(run_dir)  # InvalidResult (exit 3) names a bad one
    return [s for s in found if unit_of(s.label) is not None]


def ok_counts(run_dir: Path) -> dict[tuple[int, int], int]:
    """Samples that count per (kernel, cell) (retake.counts): what resume counts as done."""
    counts: dict[tuple[int, int], int] = {}
    for s in samples(run_dir):
        unit = unit_of(s.label)
        if unit is not None and retake.counts(s):
            counts[unit] = counts.get(unit, 0) + 1
    return counts


def retakes_used(run_dir: Path) -> dict[tuple[int, int], int]:
    """Per (kernel, cell): retakes its slot in progress already used (retake.trailing)."""
    found: dict[tuple[int, int], list[Sample]] = {}
    for s in samples(run_dir):
        unit = unit_of(s.label)
        if unit is not None:
            found.setdefault(unit, []).append(s)
    return {unit: retake.trailing(got) for unit, got in found.items()}


def planned(run_dir: Path) -> dict[tuple[int, int], int]:
    """Samples the schedule plans per (kernel, cell)."""
    counts: dict[tuple[int, int], int] = {}
    for s in load_schedule(run_dir)["slots"]:
        unit = (int(s["kernel"]), int(s["cell"]))
        counts[unit] = counts.get(unit, 0) + 1
    return counts


def unfinished() -> Path:
    """The newest study run with samples still to take (`--resume` with no directory)."""
    root = paths.results_dir()
    runs = sorted(root.glob("*-study-*/" + SCHEDULE)) if root.is_dir() else []
    for schedule in reversed(runs):
        done = ok_counts(schedule.parent)
        if any(n > done.get(unit, 0) for unit, n in planned(schedule.parent).items()):
            return schedule.parent
    raise NotAStudy(f"no unfinished study in {root}: name its directory")
