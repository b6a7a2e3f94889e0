"""Which run a sample file belongs to, the run's id and kind, and the run directories
under a folder.

    <run>/samples/NNN-<label>.json                       run, compare, study
    <run>/store/<commit>/samples/NNN-sample.json         a bisection with its own store
    <run>/recheck/<culprit>/<commit>/samples/...         a bisection's re-check
    bisect-store/<repo>-<key>/<commit>/samples/...       the shared bisect store
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kbisect.core import paths

SAMPLES = "samples"
SUMMARY = "summary.json"
# The files that make a directory a run: by each, its kind when it has no summary.
MARKERS = {
    SUMMARY: None,
    "state.json": "bisect",
    "plan.json": "compare",
    "study.json": "study",
    "schedule.json": "study",
}
STORE = "bisect-store"
KINDS = ("run", "compare", "bisect", "study", "ktest")
STAMP = re.compile(r"^(\d{8}T\d{6}Z)-([a-z]+)-(.+)$")
# How measure/results.py names a sample: its boot number, its label made a slug. Any other
# .json in a samples folder (a copy, `001 (copy)-A.json`) is not read as a sample.
SAMPLE_NAME = re.compile(r"([0-9]+)-[A-Za-z0-9._-]+\.json", re.ASCII)
UP = 3  # how far above a samples folder's owner a run may sit (recheck/<culprit>/<commit>)


def marked(folder: Path) -> bool:
    return any((folder / m).is_file() for m in MARKERS)


def run_of(sample: Path) -> Path:
    """The run directory a sample file belongs to: the nearest folder with a summary, a
    plan or a state at or above its samples folder's owner; a shared bisect store; else
    the owner itself (`kbisect run`)."""
    owner = sample.parent.parent
    top = paths.results_dir().resolve()
    candidates = [owner, *owner.parents][: UP + 1]
    for folder in candidates:
        if folder == top:
            break
        if marked(folder):
            return folder
    if owner.parent.parent.name == STORE:
        return owner.parent
    return owner


def run_id(run_dir: Path) -> str:
    """The run dir relative to the results dir when it lies under it, else absolute."""
    top = paths.results_dir().resolve()
    try:
        return str(run_dir.relative_to(top))
    except ValueError:
        return str(run_dir)


def kind_and_name(run_dir: Path) -> tuple[str, str]:
    """What the directory's files and name say the run is (a summary says better)."""
    if run_dir.parent.name == STORE:
        return "bisect-store", run_dir.name
    m = STAMP.match(run_dir.name)
    for marker, kind in MARKERS.items():
        if kind and (run_dir / marker).is_file():
            return kind, m.group(3) if m else run_dir.name
    if m and m.group(2) in KINDS:
        return m.group(2), m.group(3)
    return "run", run_dir.name


def stamp_time(run_dir: Path) -> str | None:
    """The UTC start time in the directory's name (`20261123T053831Z-...`), ISO 8601."""
    m = STAMP.match(run_dir.name)
    if not m:
        return None
    s = m.group(1)
    return f"{s[0:4]}-{s[4:6]}-{s[6:8]}T{s[9:11]}:{s[11:13]}:{s[13:15]}Z"


def sample_number(path: Path) -> int | None:
    """The boot number of a file named as kbisect names a sample (NNN-LABEL.json); None
    for any other name."""
    m = SAMPLE_NAME.fullmatch(path.name)
    return int(m.group(1)) if m else None


def odd_sample(path: Path) -> str:
    """The line that says a .json file in a samples folder is not read as a sample."""
    return (
        f"{path}: not named as kbisect names a sample (NNN-LABEL.json, a copy?): "
        "not read; rename or move it out of the samples folder"
    )


def sample_files(folder: Path, odd: list[Path] | None = None) -> Iterator[Path]:
    """Every sample file under folder (hidden folders and temp files left out); a .json
    file there not named as a sample is left out too, and said in `odd` if given."""
    for path in sorted(folder.rglob(f"{SAMPLES}/*.json")):
        rel = path.relative_to(folder).parts
        if any(p.startswith(".") for p in rel):
            continue
        if sample_number(path) is not None:
            yield path
        elif odd is not None and path.is_file():
            odd.append(path)


def run_dirs(folder: Path) -> list[Path]:
    """The run directories a folder holds: itself if it is one, else each run found
    below it (through its samples)."""
    found = {run_of(p.resolve()) for p in sample_files(folder)}
    found |= {p.parent.resolve() for m in MARKERS for p in folder.glob(f"*/{m}")}
    if (folder / SAMPLES).is_dir() or marked(folder):
        found.add(folder.resolve())
    return sorted(found)
