"""The scenarios of the fault-injection suite (tests/faults/test_faults.py): a compare of a
revert and a bisection over 12 commits, both in a user's repository in the middle of
their own work, on the fake tree and the fake target; and the session they share.

The fake target draws a boot's noise from (seed, commit, number of good samples already
stored there) (`noise_nth = "stored"`): a boot redone after an interruption draws what the
reference drew, so answers and numbers must be equal, not just alike.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbisect.bisect import state as bisect_state
from kbisect.measure import results
from tests.faults import procs
from tests.faults.kit import Chain, Reference, Scenario, Worker

FIXED_DATES = {v: "2025-01-01T00:00:00+0000" for v in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")}
TARGET = {"cv": 0.01, "seed": 7, "noise_nth": "stored"}
HISTORY = [{"subject": f"commit {i}", "tps": 1000 if i < 8 else 750} for i in range(1, 13)]


@dataclass
class Session:
    base: Path
    seed: int
    repo: Path
    shas: list[str]
    scenario_file: Path
    env: dict[str, str]
    workers: list[Worker]
    refs: dict[str, Reference] = field(default_factory=dict)
    snapshot: dict[str, tuple[bytes, int]] = field(default_factory=dict)


def session_env(base: Path, shadow: Path) -> dict[str, str]:
    home = base / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = kbisect test\n\temail = test@kbisect.invalid\n"
        "[init]\n\tdefaultBranch = main\n"
    )
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    return {
        **keep,
        **FIXED_DATES,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONPATH": procs.python_path(shadow),
    }


def _compare(s: Session) -> Scenario:
    def start(c: Chain) -> list[str]:
        return [
            "compare",
            "--tree",
            str(s.repo),
            "--base",
            s.shas[12],
            "--revert",
            s.shas[8],
            "--scenario",
            "smoke",
            "--boots",
            "3",
            "--target",
            str(c.target_file),
            "--out",
            str(c.dir / "cmp"),
        ]

    def run_dir(c: Chain) -> Path | None:
        return c.dir / "cmp" if (c.dir / "cmp" / "plan.json").is_file() else None

    def phase(run: Path) -> tuple[Any, ...]:
        if (run / "summary.json").is_file():
            return ("done",) if (run / "report.md").is_file() else ("summary",)
        return ("plan",) if (run / "plan.json").is_file() else ("none",)

    def outcome(run: Path) -> dict[str, Any]:
        ok = [x for x in results.load_samples(run) if x.ok]
        return {
            "verdict": results.load_summary(run)["verdict"],
            "tps": [(x.label, x.tps) for x in ok],
        }

    return Scenario(
        "compare",
        start,
        lambda c, run: ["compare", "--resume", str(run)],
        run_dir,
        lambda c: sorted((c.dir / "cmp").glob("samples/[0-9]*-*.json")),
        phase,
        outcome,
        TARGET,
    )


def _bisect(s: Session, method: str) -> Scenario:
    def start(c: Chain) -> list[str]:
        return [
            "bisect",
            "--tree",
            str(s.repo),
            "--good",
            s.shas[1],
            "--bad",
            s.shas[12],
            "--scenario",
            str(s.scenario_file),
            "--target",
            str(c.target_file),
            "--runs-min",
            "2",
            "--runs-max",
            "3",
            "--recheck-samples",
            "3",
            "--method",
            method,
            # git: no reference boots, whose drift-corrected threshold depends on when each
            # boot ran, so a resumed run must sample exactly like the uninterrupted one
            *(["--references", "0"] if method == "git" else []),
        ]

    def run_dir(c: Chain) -> Path | None:
        found = sorted(c.results.glob(f"*/{bisect_state.STATE_FILE}"))
        return found[0].parent if found else None

    def phase(run: Path) -> tuple[Any, ...]:
        try:
            data = json.loads((run / bisect_state.STATE_FILE).read_text())
        except (OSError, ValueError):
            return ("none",)
        if data.get("phase") == "done" and (run / "report.md").is_file():
            return ("done",)
        log = str(data.get("bisect_log") or "")
        return (data.get("phase"), sum(line.startswith("git bisect ") for line in log.split("\n")))

    def outcome(run: Path) -> dict[str, Any]:
        summary = results.load_summary(run)
        if method == "posterior":
            # The search adapts to every stored sample, so a resumed run may take a boot
            # more or less than an uninterrupted one (each is stored and counted: see
            # check_samples); what must not change is the answer and its re-check.
            first, rc = summary["first_bad"], summary["recheck"]
            checked = (summary.get("verification") or {}).get("kind")
            return {"culprit": first and first["commit"], "recheck": rc and rc.get("kind")} | {
                "revert check": checked
            }
        tps: dict[str, list[float]] = {}
        for path in _bisect_samples(run.parent):
            x = json.loads(path.read_text())
            key = f"{path.parents[2].name}/{path.parents[1].name}"  # store or recheck/commit
            if x["status"] == "ok":
                tps.setdefault(key, []).append(x["tps"])
        answer = {k: summary.get(k) for k in ("first_bad", "bisect_log", "recheck", "verification")}
        return answer | {"tps": tps}

    return Scenario(
        "bisect" if method == "git" else f"bisect-{method}",
        start,
        lambda c, run: ["bisect", "--resume", str(run)],
        run_dir,
        lambda c: _bisect_samples(c.results),
        phase,
        outcome,
        TARGET,
    )


def _bisect_samples(root: Path) -> list[Path]:
    """Every sample of a bisection: its store's, its re-check's and its revert check's."""
    found = root.glob("bisect-store/*/*/samples/[0-9]*-*.json")
    git = root.glob("*/recheck/*/samples/[0-9]*-*.json")  # --method git: recheck/<commit>
    posterior = root.glob("*/recheck/*/*/samples/[0-9]*-*.json")  # recheck/<culprit>/<commit>
    reverted = root.glob("*/verify/*/*/samples/[0-9]*-*.json")  # verify/<culprit>/<side>
    return sorted([*found, *git, *posterior, *reverted])


SCENARIOS: dict[str, Callable[[Session], Scenario]] = {
    "compare": _compare,
    "bisect": lambda s: _bisect(s, "git"),
    "bisect-posterior": lambda s: _bisect(s, "posterior"),
}
