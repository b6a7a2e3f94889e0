"""`git bisect log`, parsed: the marks in the order git made them and git's answer; and
the log edited for the git method's second pass (its unclear skips taken out, to replay).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.bisect import samples
from kbisect.core import reading

_MARK = re.compile(r"# (good|bad|skip): \[([0-9a-f]+)\] ?(.*)")
_FIRST = re.compile(r"# first bad commit: \[([0-9a-f]+)\] ?(.*)")
_POSSIBLE = re.compile(r"# possible first bad commit: \[([0-9a-f]+)\] ?(.*)")


@dataclass(frozen=True)
class Mark:
    verdict: str  # good | bad | skip
    commit: str
    subject: str


@dataclass(frozen=True)
class Outcome:
    marks: list[Mark]  # in the order git made them; the first two are the endpoints
    first_bad: str | None  # git named one commit
    candidates: list[str]  # that commit, or the range skipped commits leave

    @property
    def finished(self) -> bool:
        return bool(self.candidates)


def parse(text: str) -> Outcome:
    """The marks in order, and git's answer if it has one."""
    marks: list[Mark] = []
    first: str | None = None
    candidates: list[str] = []
    for line in text.splitlines():
        if m := _MARK.fullmatch(line):
            marks.append(Mark(m.group(1), m.group(2), m.group(3)))
        elif m := _FIRST.fullmatch(line):
            first = m.group(1)
            candidates = [first]
        elif m := _POSSIBLE.fullmatch(line):
            candidates.append(m.group(1))
    return Outcome(marks, first, candidates)


def unclear_skips(store: Path, outcome: Outcome) -> list[str]:
    """The commits of a range that were skipped for want of a clear verdict."""
    if outcome.first_bad:
        return []
    found = []
    for commit in outcome.candidates:
        record = samples.commit_dir(store, commit) / "step.json"
        if step_record(record).get("skip") == "unclear":
            found.append(commit)
    return found


def step_record(path: Path) -> dict[str, Any]:
    """What a bisect step recorded about its commit (step.json), {} when it recorded
    nothing; CorruptFile when it cannot be read back."""
    if not path.exists():
        return {}
    return reading.json_table(path, f"remove {path.parent} to measure that commit again")


def without_skips(log: str, commits: list[str]) -> str:
    """The bisect log with the skips of `commits` taken out, to replay and test them again."""
    drop = set(commits)
    keep = []
    for line in log.splitlines():
        m = _MARK.fullmatch(line)
        if m and m.group(1) == "skip" and m.group(2) in drop:
            continue
        if line.startswith("git bisect skip ") and line.split()[-1] in drop:
            continue
        keep.append(line)
    return "\n".join(keep) + "\n"
