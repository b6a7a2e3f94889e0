"""A bisection's options and its state: state.json in the run directory, written
atomically after every phase (and, searching by the posterior, after every boot), so that
`kbisect bisect --resume` continues where it stopped.

Phases, in order: "endpoints", "bisecting", "verifying" (the revert check of the
answer, verify.py), "recheck" (the git method, when the revert could not be measured),
"done".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from kbisect.bisect.posterior.story import ALONE, Change, Story
from kbisect.bisect.request import Options
from kbisect.core import atomic, clock, progress, reading
from kbisect.core.exceptions import UserError

STATE_FILE = "state.json"
STATE_KIND = "bisect-state"
# state.json's keys: a field's is left out while it is None (or False), but for these
WRITTEN_NULL = ("threshold",)
# and the posterior search's are there once it began, and only then
SEARCH = ("bisect_t0", "visited", "failed", "rechecks", "posterior", "samples")


@dataclass
class Recheck:
    """The posterior's re-check of one answer (recheck.py), in state.json's "rechecks"
    under the commit re-checked: "running" until it decides; a key is written once set."""

    parent: str
    kind: str = "running"  # running | confirmed | refuted | unclear | error
    improvement: bool | None = None  # a fix inside the range: confirmed in that direction
    ratio: float | None = None  # the decision (confirm.Step): culprit / parent, its CI
    low: float | None = None
    high: float | None = None
    n: int | None = None  # fresh pairs
    parent_tps: list[float] | None = None
    culprit_tps: list[float] | None = None
    error: str | None = None
    confirmed: bool | None = None
    level: float | None = None  # the rule's CI level and minimum effect
    min_effect: float | None = None
    explains: dict[str, Any] | None = None  # confirm.explains: of good -> bad
    partial: bool | None = None  # the step explains only part of good -> bad

    def fail(self, why: str) -> None:
        self.kind, self.error, self.confirmed = "error", why, False

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Verification:
    """The revert check of the answer (verify.py), in state.json's "verification":
    "running" until it decides; the samples it decided on, so a resumed run goes on from
    them and the report computes the share restored again from them."""

    culprit: str  # the commit reverted on the bad endpoint
    kind: str = "running"  # running | all | part | none | unclear | no-revert
    reverted: str | None = None  # the bad endpoint with it reverted (kbisect's repository)
    good_tps: list[float] | None = None
    bad_tps: list[float] | None = None
    reverted_tps: list[float] | None = None
    stop: str | None = None  # how compare's sequential rule stopped (stopping.reason)
    error: str | None = None  # no-revert: why the revert was not measured
    without: list[str] | None = None  # the earlier passes' answers, reverted on bad too
    # a range answer: all its commits, oldest first, reverted together (None: culprit alone)
    members: list[str] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @property
    def measured(self) -> bool:
        """Whether the revert was measured: its share, not the re-check, decides."""
        return self.kind in MEASURED


MEASURED = ("all", "part", "none", "unclear")  # the kinds of a measured revert check


@dataclass
class Pass:
    """A pass of the search whose answer's revert restored part of the gap or none of it:
    the rest was bisected with that answer reverted (rule.Rest). Its answer
    (Answer.as_dict()) and its revert check; the rest's endpoint check (rule.Gap): good's
    and bad's stored samples when the rest began (its boots are the ones after them) and
    its verdict ("" until it is known)."""

    answer: dict[str, Any]
    verification: Verification
    ends: list[int] = field(default_factory=list)
    gap: str = ""

    def as_dict(self) -> dict[str, Any]:
        out = {"answer": self.answer, "verification": self.verification.as_dict()}
        return {**out, **({"ends": self.ends, "gap": self.gap} if self.ends else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pass:
        ends = [int(n) for n in data.get("ends") or []]
        return cls(data["answer"], Verification(**data["verification"]), ends, data.get("gap", ""))


@dataclass
class Run:
    """The state of one bisection: what was asked, what is known, where it stands.

    state.json holds one key per field, as `as_dict` writes them. The first keys are
    always there; the others only once they are known (the endpoints once measured, the
    git method's second pass once it ran, the posterior's search once it began), so a
    state reads as it always did and a state of an earlier kbisect loads as it is.
    """

    options: Options
    scenario: dict[str, str]  # the scenario measured: its name and hash
    tree: Path  # the kernel tree's top level
    good: str  # full commit ids
    bad: str
    store: Path  # the sample store (samples.py)
    created: str = field(default_factory=clock.utc_now)
    version: int = 1
    phase: str = "endpoints"
    threshold: float | None = None  # the endpoints' geometric mean, or --threshold
    bisect_log: str = ""  # the git method's `git bisect log`, saved before every step
    # known once the endpoints are measured
    endpoints: dict[str, Any] | None = None  # their stats.verdict (Verdict.as_dict)
    threshold_source: str | None = None
    refused: str | None = None  # why the endpoints cannot be bisected between
    exit: int | None = None  # the bisection's exit code, once done
    # the git method
    escalated: bool = False  # the second pass ran: unclear skips measured again
    first_pass_log: str | None = None
    recheck: dict[str, Any] | None = None  # the re-check of the answer (recheck.py)
    # the posterior method: its search, from bisect_t0 (the time it began) on
    bisect_t0: float | None = None
    visited: list[str] = field(default_factory=list)  # revisions tested, in order
    failed: dict[str, str] = field(default_factory=dict)  # untestable revision -> why
    rechecks: dict[str, Recheck] = field(default_factory=dict)  # answer -> re-check
    schedule: dict[str, int] | None = None  # the reference boots' turn: tests, turn
    posterior: dict[str, Any] = field(default_factory=dict)  # Posterior.as_dict()
    samples: list[dict[str, Any]] = field(default_factory=list)  # every sample, in order
    first_stop: dict[str, Any] | None = None  # the answer before its re-check
    answer: dict[str, Any] | None = None  # the final Answer.as_dict()
    story: Story | None = None  # the whole range's story (posterior/story.py)
    probes: list[str] | None = None  # revisions tested to check a single step's story
    git_bisect_log: str | None = None  # the log `git bisect replay` turns into the answer
    # the --patch files as the report names them (file, subject, sha256), if any
    patches: list[dict[str, Any]] | None = None
    verification: Verification | None = None  # the revert check of the answer (verify.py)
    passes: list[Pass] = field(default_factory=list)  # the passes before this one, in order
    later: dict[str, Any] = field(default_factory=dict)  # a later kbisect's keys, kept

    def as_dict(self) -> dict[str, Any]:
        """The state as state.json holds it (without its "kind")."""
        out: dict[str, Any] = dict(self.later)
        typed = {
            "rechecks": self.rechecks_dict(),
            "story": self.story and self.story.as_dict(),
            "verification": self.verification and self.verification.as_dict(),
            "passes": [p.as_dict() for p in self.passes] or None,
        }
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in SEARCH:
                keep = self.bisect_t0 is not None
            else:
                keep = f.name in WRITTEN_NULL or (value is not None and value is not False)
            if keep and f.name != "later" and (f.name not in typed or typed[f.name] is not None):
                out[f.name] = typed.get(f.name, value)
        paths = {"tree": str(self.tree), "store": str(self.store)}
        return {**out, "options": self.options.as_dict(), **paths}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        """A state as `as_dict` (or an earlier kbisect) wrote it; TypeError, KeyError or
        ValueError if it does not parse."""
        names = {f.name for f in fields(cls)} - {"later"}
        known = {k: v for k, v in data.items() if k in names}
        later = {k: v for k, v in data.items() if k not in names and k != "kind"}
        typed = {
            "options": Options.from_dict(data["options"]),
            "tree": Path(data["tree"]),
            "store": Path(data["store"]),
            "rechecks": {c: Recheck(**rc) for c, rc in data.get("rechecks", {}).items()},
            "story": Story.from_dict(data["story"]) if data.get("story") else None,
            "verification": (
                Verification(**data["verification"]) if data.get("verification") else None
            ),
            "passes": [Pass.from_dict(p) for p in data.get("passes", [])],
        }
        return cls(**{**known, **typed}, later=later)

    @property
    def reverted(self) -> list[str]:
        """The earlier passes' answers, reverted wherever the rest is bisected."""
        return [p.verification.culprit for p in self.passes]

    def rechecks_dict(self) -> dict[str, dict[str, Any]]:
        """The re-checks as state.json and summary.json hold them."""
        return {c: rc.as_dict() for c, rc in self.rechecks.items()}

    def recheck_of(self, change: Change) -> Recheck | None:
        """The re-check of a story's change (keyed by the commit re-checked, one of the
        change's members), or None. A finished one first: a member's re-check still
        "running" may have been started early for an answer that did not stand
        (Search._early_pairs)."""
        found = [self.rechecks[c] for c in change.members if c in self.rechecks]
        done = [rc for rc in found if rc.kind != "running"]
        return (done or found)[0] if found else None

    def confirmed(self, confidence: float) -> bool:
        """What exit 0 means: the story is single or several, every change in it holds the
        confidence, and each one's re-check confirmed it (a single step's also as the
        whole difference between the endpoints: not "partial")."""
        told = self.story
        if told is None or told.kind not in ("single", "several"):
            return False
        single = told.kind == "single"
        if single and (told.p_single < ALONE or told.against or told.unclear):
            return False  # one step is doubted: by the story, or by a revision it does not fit
        return all(
            c.p >= confidence
            and (rc := self.recheck_of(c)) is not None
            and bool(rc.confirmed)
            and not (single and rc.partial)  # a single step explains all of good -> bad
            for c in told.changes
        )


def save(run_dir: Path, run: Run) -> None:
    atomic.write_json(run_dir / STATE_FILE, {**run.as_dict(), "kind": STATE_KIND})


PHASES = ("endpoints", "bisecting", "verifying", "recheck", "done")  # "recheck": git's only
COPIED_STORE = "store"  # beside state.json: the run's samples, copied with it
REQUIRED = ("version", "options", "scenario", "tree", "good", "bad", "store", "phase")


class BadState(UserError):
    """A directory that holds no kbisect bisect state to resume from."""


# state.json is written whole (by rename): only damage from outside truncates it. The
# samples a bisection took are kept in its store, keyed by what is measured, not by run.
RECOVER = (
    "this run cannot be resumed: run the same kbisect bisect again (without --resume); "
    "the kernels it built and the samples it took are reused"
)


def load(run_dir: Path) -> Run:
    """The saved state; BadState (exit 2) when run_dir holds none, CorruptFile (exit 3,
    saying how to recover) when it is truncated, incomplete or does not parse."""
    f = run_dir / STATE_FILE
    if not f.exists():
        raise BadState(f"{run_dir}: not a kbisect bisect run (no {STATE_FILE})")
    data = reading.json_table(f, RECOVER)
    if data.get("kind") != STATE_KIND:
        raise BadState(f"{f}: not a kbisect bisect state")
    if missing := [k for k in REQUIRED if k not in data]:
        reading.fail(f, f"incomplete (no {', '.join(missing)})", RECOVER)
    reading.check_dataclass(Run, reading.own_fields(data, f, RECOVER))
    for i, done in enumerate(data.get("passes") or []):  # a list, checked: each a Pass
        reading.check_dataclass(Pass, reading.own_fields(done, f, RECOVER, f"passes.{i}."))
    try:
        Options.from_dict(data["options"])
    except (TypeError, KeyError, ValueError) as exc:
        reading.fail(f, f"its options do not parse ({exc})", RECOVER)
    try:
        run = Run.from_dict(data)
    except (TypeError, KeyError, ValueError) as exc:
        reading.fail(f, f"does not parse ({exc})", RECOVER)
    git = run.options.method == "git"
    if run.phase not in (known := PHASES if git else tuple(p for p in PHASES if p != "recheck")):
        reading.fail(f, f"phase {reading.got(run.phase)} is none of {', '.join(known)}", RECOVER)
    v = run.verification
    reverted = v is not None and v.kind not in ("running", "no-revert")  # its share decided
    if (
        run.phase == "done"
        and not run.refused
        and not ((run.recheck is not None or reverted) if git else run.answer is not None)
    ):
        reading.fail(f, f"phase done without its {'re-check' if git else 'answer'}", RECOVER)
    return run


def samples_store(run_dir: Path) -> Path:
    """Where a finished run's samples are read from (a report, a diff): a `store/` beside
    state.json when the run was copied with its samples (an example), else the store it
    recorded. That one is the machine's, shared by every bisection of the tree: it may
    hold later samples of the same revisions, or be another machine's path."""
    copied = run_dir / COPIED_STORE
    return copied if copied.is_dir() else load(run_dir).store


def newest_unfinished(root: Path) -> Path:
    """The most recently started bisect run under root that has not finished; runs
    whose state cannot be read are named in a warning and passed over."""
    runs = []
    for f in root.glob(f"*/{STATE_FILE}"):
        try:
            run = load(f.parent)
        except (BadState, reading.CorruptFile) as exc:
            progress.warn(f"skipping {f.parent}: {exc}")
            continue
        if run.phase != "done":
            runs.append((run.created, f.parent.name, f.parent))
    if not runs:
        raise UserError(f"no unfinished bisect run under {root}")
    return max(runs)[2]
