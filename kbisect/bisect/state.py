"""A bisection's state: its options, the resume file (state.json in the run directory,
written atomically after every step) and the parsed `git bisect log`.

Phases, in order: "endpoints", "bisecting", "recheck", "done". `kbisect bisect --resume`
continues from the phase saved, replaying the saved bisect log.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbisect.bisect import samples
from kbisect.core import atomic, clock, progress
from kbisect.core.arch import host_arch
from kbisect.core.exceptions import UserError
from kbisect.measure import retake
from kbisect.targets import monitor

METHODS = ("posterior", "git")
STATE_FILE = "state.json"
STATE_KIND = "bisect-state"


@dataclass(frozen=True)
class Options:
    """What `kbisect bisect` was asked; saved in the state, so --resume needs none."""

    tree: str | None
    good: str
    bad: str
    scenario: str
    threshold: float | None = None
    higher_is_better: bool = True
    append: str = ""
    runs_min: int = 3
    runs_max: int = 10
    recheck_samples: int = 8
    configs: tuple[str, ...] = ()
    arch: str = field(default_factory=host_arch)  # resolved: targets.get(target, --arch)
    target: str = "vng"
    sets: tuple[str, ...] = ()  # scenario overrides (--set)
    base_config: str = "tinyconfig"
    method: str = "posterior"  # or "git": git bisect run with bisect/run
    confidence: float = 0.95  # posterior: stop when one commit (or group) holds this
    max_boots: int = 100  # posterior: boots after the endpoints, re-checks included
    references: int = 3  # a reference boot after every N test boots; 0: none
    retakes: int = retake.RETAKES  # of a disturbed sample (retake.py)
    disturbed_share: float = monitor.THRESHOLD

    def measured_argv(self) -> list[str]:
        """What is measured and where: the options the driver and every step share."""
        out = ["--scenario", self.scenario, "--target", self.target, "--arch", self.arch]
        if not self.higher_is_better:
            out.append("--lower-is-better")
        if self.append:
            out += ["--append", self.append]
        for c in self.configs:
            out += ["--config", c]
        for s in self.sets:
            out += ["--set", s]
        if self.base_config != "tinyconfig":
            out += ["--base-config", self.base_config]
        if self.policy() != retake.Policy():
            out += ["--retakes", str(self.retakes), "--disturbed-share", repr(self.disturbed_share)]
        return out

    def policy(self) -> retake.Policy:
        return retake.Policy(self.retakes, self.disturbed_share)

    def argv(self) -> list[str]:
        """The `kbisect bisect` arguments that reproduce this bisection."""
        out = ["bisect", "--tree", self.tree or "default", "--good", self.good, "--bad", self.bad]
        if self.threshold is not None:
            out += ["--threshold", f"{self.threshold:g}"]
        out += ["--method", self.method, "--references", str(self.references)]
        if self.method == "posterior":
            out += ["--confidence", f"{self.confidence:g}", "--max-boots", str(self.max_boots)]
        out += ["--runs-min", str(self.runs_min), "--runs-max", str(self.runs_max),
                "--recheck-samples", str(self.recheck_samples)]  # fmt: skip
        return out + self.measured_argv()

    def step_argv(self, threshold: float, store: Path, runs_max: int,
                  refs: tuple[str, str] | None = None) -> list[str]:  # fmt: skip
        """bisect/run's arguments, the same for every step of one pass; refs: the good and
        bad references each step samples alongside (drift-aware references)."""
        out = ["--threshold", repr(threshold), "--runs-min", str(self.runs_min),
               "--runs-max", str(runs_max), "--store", str(store)]  # fmt: skip
        if refs is not None:
            out += ["--reference-good", refs[0], "--reference-bad", refs[1],
                    "--references", str(self.references)]  # fmt: skip
        return out + self.measured_argv()

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "configs": list(self.configs), "sets": list(self.sets)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Options:
        """Options saved by this or an earlier kbisect (which had no --target: vng, and
        only git's method, without references)."""
        old = {"method": "git", "references": 0}
        return cls(**{**old, **data, "configs": tuple(data["configs"]),
                      "sets": tuple(data.get("sets", ()))})  # fmt: skip


def new(
    opts: Options, scen: dict[str, str], top: Path, good: str, bad: str, store: Path
) -> dict[str, Any]:
    """The state of a bisection that has not measured anything yet."""
    return {
        "version": 1,
        "created": clock.utc_now(),
        "options": opts.as_dict(),
        "scenario": scen,
        "tree": str(top),
        "good": good,
        "bad": bad,
        "store": str(store),
        "phase": "endpoints",
        "threshold": None,
        "bisect_log": "",
    }


def save(run_dir: Path, data: dict[str, Any]) -> None:
    atomic.write_json(run_dir / STATE_FILE, {**data, "kind": STATE_KIND})


REQUIRED = ("version", "options", "scenario", "tree", "good", "bad", "store", "phase")


class BadState(UserError):
    """A state.json that kbisect cannot resume from."""


def load(run_dir: Path) -> dict[str, Any]:
    """The saved state; BadState, one line, if it is missing, truncated or incomplete."""
    f = run_dir / STATE_FILE
    if not f.is_file():
        raise BadState(f"{run_dir}: not a kbisect bisect run (no {STATE_FILE})")
    try:
        data = json.loads(f.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadState(f"{f}: unreadable ({exc}); this run cannot be resumed") from None
    if not isinstance(data, dict) or data.get("kind") != STATE_KIND:
        raise BadState(f"{f}: not a kbisect bisect state")
    if missing := [k for k in REQUIRED if k not in data]:
        raise BadState(f"{f}: incomplete (no {', '.join(missing)}); it cannot be resumed")
    try:
        Options.from_dict(data["options"])
    except (TypeError, KeyError) as exc:
        raise BadState(f"{f}: its options do not parse ({exc})") from None
    return data


def newest_unfinished(root: Path) -> Path:
    """The most recently started bisect run under root that has not finished; runs
    whose state cannot be read are named in a warning and passed over."""
    runs = []
    for f in root.glob(f"*/{STATE_FILE}"):
        try:
            data = load(f.parent)
        except BadState as exc:
            progress.warn(f"skipping {f.parent}: {exc}")
            continue
        if data.get("phase") != "done":
            runs.append((data.get("created", ""), f.parent.name, f.parent))
    if not runs:
        raise UserError(f"no unfinished bisect run under {root}")
    return max(runs)[2]


# --- `git bisect log` ---------------------------------------------------------------

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


def parse_log(text: str) -> Outcome:
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
        if record.exists() and json.loads(record.read_text()).get("skip") == "unclear":
            found.append(commit)
    return found


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
