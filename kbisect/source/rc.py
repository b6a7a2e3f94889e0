"""`kbisect rc`: which -rc (or linux-next) tag to measure next, and its baseline.

Tags are ordered by kernel version (v6.12-rc1 < ... < v6.12-rc7 < v6.12 < v6.12.1 <
v6.13-rc1; next-YYYYMMDD by date). The history is `history.json` in a history dir: the
tags already measured. `next` names the newest matching tag newer than every measured
one (older tags are not back-filled) and a baseline: the previous measured tag of the
same series, else the previous final release vX.Y, else the newest measured tag before
it; `next --missed`, every unmeasured tag newer than the newest measured release, oldest
first. `record` adds a measured tag to the history, with each ok sample's tps (`tps`,
`n`) so `kbisect history` has intervals after the result dir is gone. Every entry is
checked before the file is written (atomic), and a reader keeps every entry it can
read, saying which it left out; `repair` rewrites the file with those alone.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import atomic, clock, paths, progress, reading
from kbisect.core.exceptions import InfraError, UserError
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


def history_file(given: Path) -> Path:
    """The history `--history` names: that file when it is one, else history.json in
    that directory."""
    return given if given.is_file() else given / HISTORY_FILE


# what to do about a history.json that is not one at all (no entry can be read)
RECOVER = "move it aside to start a new history"


def read_history(given: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The readable entries of the history (none when it does not exist yet), and one
    line for each that cannot be read; CorruptFile (exit 3) when the file is no history
    at all (not JSON, no list of entries)."""
    path = history_file(given)
    if not path.exists():
        return [], []
    data = reading.json_file(path, RECOVER)
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        reading.fail(path, "not a kbisect rc history (expected {'entries': [...]})", RECOVER)
    kept, dropped = [], []
    for i, entry in enumerate(entries):
        if (problem := entry_problem(entry, f"entries[{i}]")) is None:
            kept.append(entry)
        else:
            dropped.append(problem)
    return kept, dropped


def load_history(given: Path) -> list[dict[str, Any]]:
    """The readable entries of the history; each entry that cannot be read is left out
    with one warning line (one bad entry never costs the others)."""
    entries, dropped = read_history(given)
    for line in dropped:
        progress.warn(
            f"{history_file(given)}: {line}: left out; `kbisect rc repair` drops it for good"
        )
    return entries


def entry_problem(entry: Any, where: str) -> str | None:
    """Why `entry` is not a measured tag as `record` writes one (its fields of their
    types; older entries may lack any but the tag), in one line; None when it is one."""
    if not isinstance(entry, dict):
        return f"{where}: not a table, got {reading.got(entry)}"
    try:
        f = reading.Fields(entry, "", f"{where}.", error=reading.CorruptFile)
        tag = f.string("tag")
        if not tag or not tag.isprintable():
            f.fail("tag", f"must be a tag name on one line, got {reading.got(tag)}")
        for key in ("commit", "result_dir", "scenario_hash", "recorded"):
            f.string(key, None)
        f.number("tps_mean", None)
        f.integer("n", None)
        values = f.items("tps", None)
        if values is not None and not all(reading.number(v) and v > 0 for v in values):
            f.fail("tps", "must be a list of positive numbers")
    except reading.CorruptFile as exc:
        return str(exc).removeprefix(": ")  # no source: the caller names the file
    return None


def add_entry(entries: list[dict[str, Any]], entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries with `entry` added, replacing one with the same tag and scenario hash."""
    same = (entry["tag"], entry["scenario_hash"])
    kept = [e for e in entries if (e.get("tag"), e.get("scenario_hash")) != same]
    return [*kept, entry]


def save_history(given: Path, entries: list[dict[str, Any]]) -> Path:
    """The history written whole (atomic), each entry checked first: one that `load`
    could not read back is refused (exit 3), and the file is left as it was."""
    path = history_file(given)
    for i, entry in enumerate(entries):
        if (problem := entry_problem(entry, f"entries[{i}]")) is not None:
            raise InfraError(f"{path}: not written, it would not read back: {problem}")
    data = {"version": HISTORY_VERSION, "kind": "rc-history", "entries": entries}
    atomic.write_text(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return path


def repair(given: Path) -> tuple[Path, int, list[str]]:
    """The history rewritten (atomic) with every entry that can be read: its path, how
    many entries it keeps, and a line for each dropped (nothing is written when none is)."""
    path = history_file(given)
    if not path.is_file():
        raise RcError(f"--history {given}: no {HISTORY_FILE} to repair")
    kept, dropped = read_history(path)
    if dropped:
        save_history(path, kept)
    return path, len(kept), dropped


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


def record(
    directory: Path,
    tag: str,
    commit: str,
    result: Path,
    scenario_hash: str | None,
    tps: float | None,
    measured: Callable[[Path, str], tuple[str, list[float]]],
) -> tuple[Path, float]:
    """Add a measured tag to the history in directory (its figures read from the samples
    of commit in the result dir, by `measured`, unless given); the history file and the
    tps recorded. A damaged entry of the history is left out, with a line."""
    check_commit(commit)
    if not result.is_dir():
        raise RcError(f"--result {result}: no such directory")
    values: list[float] = []
    if scenario_hash is None or tps is None:
        found_hash, found = measured(result, commit)
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
