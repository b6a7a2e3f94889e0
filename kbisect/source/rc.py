"""`kbisect rc`: which -rc (or linux-next) tag to measure next, and its baseline.

Tags are ordered by kernel version (v6.12-rc1 < ... < v6.12-rc7 < v6.12 < v6.12.1 <
v6.13-rc1; next-YYYYMMDD by date). The history is `history.json` in a history dir: the
tags already measured. `next` names the newest matching tag newer than every measured
one (older tags are not back-filled) and a baseline: the previous measured tag of the
same series, else the previous final release vX.Y, else the newest measured tag before
it; `next --missed`, every unmeasured tag newer than the newest measured release, oldest
first. `record` adds a measured tag to the history, with each ok sample's tps (`tps`,
`n`) so `kbisect history` has intervals after the result dir is gone.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import atomic, clock, paths, reading
from kbisect.core.exceptions import UserError
from kbisect.source import git

HISTORY_FILE = "history.json"
HISTORY_VERSION = 1
DEFAULT_PATTERN = "v*-rc*"
NEXT_PATTERN = "next-*"
_MAINLINE = re.compile(r"v(\d+(?:\.\d+){1,3})(?:-rc(\d+))?")
_NEXT = re.compile(r"next-(\d{4})(\d{2})(\d{2})")

SortKey = tuple[int, tuple[int, ...], int, int]


class RcError(UserError):
    """Bad input to `kbisect rc`: no matching tags, a bad pattern, a broken history."""


@dataclass(frozen=True)
class TagVersion:
    tag: str
    kind: str  # "mainline" or "next"
    numbers: tuple[int, ...]  # (6, 12) / (6, 12, 3) / (2, 6, 39) / (2026, 3, 31) for next
    rc: int | None = None

    @property
    def series(self) -> tuple[int, ...]:
        """The release a tag belongs to: (6, 12) for v6.12-rc3, v6.12 and v6.12.4."""
        if self.kind == "next":
            return ()
        return self.numbers[:3] if self.numbers[0] < 3 else self.numbers[:2]

    @property
    def is_final(self) -> bool:
        return self.kind == "mainline" and self.rc is None and self.numbers == self.series


def parse_tag(tag: str) -> TagVersion | None:
    """v6.12-rc1, v6.12, v6.12.3, v2.6.39-rc2, next-20260331; None for anything else."""
    if m := _MAINLINE.fullmatch(tag):
        rc = int(m[2]) if m[2] else None
        return TagVersion(tag, "mainline", tuple(int(n) for n in m[1].split(".")), rc)
    if m := _NEXT.fullmatch(tag):
        return TagVersion(tag, "next", (int(m[1]), int(m[2]), int(m[3])))
    return None


def sort_key(tag: str) -> SortKey:
    """Order by version: every -rc before its release, linux-next by date (after mainline)."""
    v = parse_tag(tag)
    if v is None:
        raise ValueError(f"{tag}: not a kernel version tag")
    if v.kind == "next":
        return (1, v.numbers, 1, 0)
    return (0, v.numbers, 0 if v.rc is not None else 1, v.rc or 0)


def ordered(tags: list[str]) -> list[str]:
    """The version tags among `tags`, oldest first; other tags are dropped."""
    return sorted((t for t in tags if parse_tag(t)), key=sort_key)


def pick_next(candidates: list[str], measured: set[str]) -> str | None:
    """The newest candidate newer than every measured candidate; None if there is none."""
    tags = ordered(candidates)
    done = [i for i, t in enumerate(tags) if t in measured]
    fresh = tags[done[-1] + 1 :] if done else tags
    return fresh[-1] if fresh else None


def pick_missed(candidates: list[str], measured: set[str]) -> list[str]:
    """Every candidate not yet measured that is newer than the newest measured final
    release vX.Y (else than the oldest measured tag), oldest first: the tags that appeared
    between two scheduled runs too. With nothing measured, the newest candidate alone."""
    known = [t for t in measured if parse_tag(t)]
    if not known:
        newest = pick_next(candidates, measured)
        return [newest] if newest else []
    finals = [t for t in known if (v := parse_tag(t)) is not None and v.is_final]
    anchor = max(finals, key=sort_key) if finals else min(known, key=sort_key)
    return [t for t in ordered(candidates) if sort_key(t) > sort_key(anchor) and t not in measured]


def pick_baseline(tag: str, all_tags: list[str], measured: set[str]) -> str | None:
    """Previous measured tag of the same series, else previous final, else newest measured."""
    me = parse_tag(tag)
    if me is None:
        raise ValueError(f"{tag}: not a kernel version tag")
    key = sort_key(tag)
    before = [t for t in ordered(all_tags) if sort_key(t) < key and sort_key(t)[0] == key[0]]
    older = [t for t in before if t in measured]
    same = [t for t in older if (v := parse_tag(t)) is not None and v.series == me.series]
    if me.kind == "mainline" and same:
        return same[-1]
    finals = [t for t in before if (v := parse_tag(t)) is not None and v.is_final]
    if me.kind == "mainline" and finals:
        return finals[-1]
    return older[-1] if older else None


# History: history.json in the history dir.


def default_history() -> Path:
    """$KBISECT_HISTORY, else rc-history/ in the results dir."""
    if env := os.environ.get("KBISECT_HISTORY"):
        return Path(env)
    return paths.results_dir() / "rc-history"


def load_history(directory: Path) -> list[dict[str, Any]]:
    path = directory / HISTORY_FILE
    if not path.exists():
        return []
    recover = "move it aside to start a new history"
    data = reading.json_file(path, recover)
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and "tag" in e for e in entries
    ):
        reading.fail(path, "not a kbisect rc history (expected {'entries': [...]})", recover)
    for i, entry in enumerate(entries):
        _check_entry(entry, path, f"entries[{i}].", recover)
    return entries


def _check_entry(entry: dict[str, Any], path: Path, prefix: str, recover: str) -> None:
    """One measured tag as `record` writes it: its fields of their types (older entries may
    lack any but the tag)."""
    f = reading.own_fields(entry, path, recover, prefix)
    f.string("tag")
    for key in ("commit", "result_dir", "scenario_hash", "recorded"):
        f.string(key, None)
    f.number("tps_mean", None)
    f.integer("n", None)
    values = f.items("tps", None)
    if values is not None and not all(
        type(v) in (int, float) and math.isfinite(v) and v > 0 for v in values
    ):
        reading.fail(path, f"{prefix}tps must be a list of positive numbers", recover)


def add_entry(entries: list[dict[str, Any]], entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries with `entry` added, replacing one with the same tag and scenario hash."""
    same = (entry["tag"], entry["scenario_hash"])
    kept = [e for e in entries if (e.get("tag"), e.get("scenario_hash")) != same]
    return [*kept, entry]


def save_history(directory: Path, entries: list[dict[str, Any]]) -> Path:
    path = directory / HISTORY_FILE
    atomic.write_json(path, {"version": HISTORY_VERSION, "kind": "rc-history", "entries": entries})
    return path


def measured_from_samples(result: Path, commit: str) -> tuple[str, list[float]]:
    """(scenario hash, tps of each ok sample) of `commit` under `result`; every JSON file
    there is read unvalidated, as raw JSON, on purpose."""
    tps: list[float] = []
    hashes: set[str] = set()
    for f in sorted(result.rglob("*.json")):
        try:
            s = reading.json_file(f, "")
        except reading.CorruptFile:
            continue  # not a sample of kbisect's, or a damaged one: not evidence
        if not isinstance(s, dict) or s.get("kind") != "sample" or s.get("status") != "ok":
            continue
        if (s.get("kernel") or {}).get("commit") == commit and s.get("tps") is not None:
            tps.append(float(s["tps"]))
            hashes.add(str((s.get("scenario") or {}).get("hash")))
    if not tps or len(hashes) != 1:
        raise RcError(
            f"{result}: no ok samples of {commit[:12]} with one scenario hash; "
            "pass --scenario-hash and --tps"
        )
    return hashes.pop(), tps


# The git part.


def list_tags(tree: Path) -> dict[str, str]:
    """{tag: commit} for every tag of the tree (annotated tags peeled)."""
    top = git.toplevel(tree)
    out = git.git(
        top, "for-each-ref", "--format=%(refname:strip=2) %(objectname) %(*objectname)", "refs/tags"
    )
    tags: dict[str, str] = {}
    for line in out.splitlines():
        name, obj, *peeled = line.split()
        tags[name] = peeled[0] if peeled else obj
    return tags


def check_pattern(pattern: str) -> str:
    if not pattern or pattern.startswith("-") or any(c.isspace() for c in pattern):
        raise RcError(f"--pattern {pattern!r}: expected a tag glob such as {DEFAULT_PATTERN!r}")
    return pattern


def mainline_base(tree: Path, tag: str) -> str | None:
    """The newest mainline tag a linux-next tag is built on (git describe)."""
    out = git.git(tree, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", tag, check=False)
    return out if parse_tag(out) else None


def _candidates(tree: Path, pattern: str) -> tuple[dict[str, str], list[str]]:
    tags = list_tags(tree)
    candidates = [t for t in tags if fnmatch.fnmatchcase(t, pattern) and parse_tag(t)]
    if not candidates:
        raise RcError(f"{tree}: no kernel version tags match {pattern!r}")
    return tags, candidates


def choose(tree: Path, pattern: str, measured: set[str]) -> dict[str, str]:
    """tag, commit, baseline, baseline_commit (empty strings when there is nothing new)."""
    tags, candidates = _candidates(tree, pattern)
    tag = pick_next(candidates, measured)
    if tag is None:
        return {"tag": "", "commit": "", "baseline": "", "baseline_commit": ""}
    return _with_baseline(tree, tags, tag, measured)


def choose_missed(tree: Path, pattern: str, measured: set[str]) -> list[dict[str, str]]:
    """`choose` for every tag pick_missed names, oldest first; each one's baseline as if
    the ones before it were measured by then."""
    tags, candidates = _candidates(tree, pattern)
    picked, done = [], set(measured)
    for tag in pick_missed(candidates, measured):
        picked.append(_with_baseline(tree, tags, tag, done))
        done.add(tag)
    return picked


def _with_baseline(
    tree: Path, tags: dict[str, str], tag: str, measured: set[str]
) -> dict[str, str]:
    base = pick_baseline(tag, list(tags), measured)
    if base is None and tag.startswith("next-"):
        base = mainline_base(tree, tag)
    base_commit = tags.get(base, "") if base else ""
    return {"tag": tag, "commit": tags[tag], "baseline": base or "", "baseline_commit": base_commit}


def check_commit(commit: str) -> None:
    """A full commit id, as the samples record it (RcError otherwise)."""
    if not re.fullmatch(r"[0-9a-f]+", commit):
        raise RcError(f"--commit {commit!r}: expected a hexadecimal commit id")
    if len(commit) not in (40, 64):
        raise RcError(
            f"--commit {commit!r}: {len(commit)} hexadecimal digits; give the full "
            "commit id (40 digits, 64 for SHA-256)"
        )


def check_tps(tps: float | None) -> None:
    if tps is not None and not (math.isfinite(tps) and tps > 0):
        raise RcError(f"--tps {tps}: must be a positive number of transactions per second")


def record(
    directory: Path,
    tag: str,
    commit: str,
    result: Path,
    scenario_hash: str | None = None,
    tps: float | None = None,
) -> tuple[Path, float]:
    """Add a measured tag to the history in directory (its figures read from the samples
    of commit in the result dir unless given); the history file and the tps recorded."""
    check_commit(commit)
    check_tps(tps)
    if not result.is_dir():
        raise RcError(f"--result {result}: no such directory")
    values: list[float] = []
    if scenario_hash is None or tps is None:
        found_hash, found = measured_from_samples(result, commit)
        scenario_hash = scenario_hash or found_hash
        if tps is None:
            values, tps = found, sum(found) / len(found)
    entry: dict[str, Any] = {
        "tag": tag,
        "commit": commit,
        "result_dir": str(result.resolve()),
        "scenario_hash": scenario_hash,
        "tps_mean": round(tps, 3),
        "recorded": clock.utc_now(),
    }
    if values:  # every ok sample's tps: kbisect history's intervals once the dir is gone
        entry |= {"tps": [round(v, 3) for v in values], "n": len(values)}
    return save_history(directory, add_entry(load_history(directory), entry)), tps
