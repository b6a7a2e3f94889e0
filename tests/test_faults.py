"""The fault-injection suite (`just faults`; marker `faults`, left out of `just unit`):
kill -9, SIGINT, SIGTERM and SIGHUP at random points of fake compares and bisections,
50+ interruptions of each kind per scenario, each run resumed until it ends; then the
answer, the samples, the processes and the user's repository are checked against one
uninterrupted reference run (tests/faultcheck.py says what is checked, tests/faultkit.py
how runs are interrupted).

Determinism: the fake target draws a boot's noise from (seed, commit, number of good
samples already stored there) (`noise_nth = "stored"`), so a boot redone after an
interruption draws what the reference drew: verdict, ratio and CI (compare), culprit,
bisect log and re-check numbers (bisect) must be equal, not just alike.

Replay: the session's seed is printed with the figures; KBISECT_FAULTS_SEED=S replays a
session's choices, KBISECT_FAULTS_CHAIN=N runs only chain seed N (named in a failure).
Timing (wall-clock and polling triggers) makes a replay close, not exact.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kbisect import results
from kbisect.bisect import state as bisect_state
from tests import faultkit
from tests.fakes import repo_snapshot, users_repo_at_work
from tests.faultcheck import reference, run_chain, tmp_files
from tests.faultkit import Chain, Reference, Scenario, Worker
from tests.test_bisect_step import write_scenario

pytestmark = pytest.mark.faults
PER_KIND = int(os.environ.get("KBISECT_FAULTS_PER_KIND", "50"))
WORKERS = 2
FIXED_DATES = {v: "2025-01-01T00:00:00+0000" for v in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")}
TARGET = {"cv": 0.01, "seed": 7, "noise_nth": "stored"}
FIGURES: list[dict[str, Any]] = []


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


def _env(base: Path, shadow: Path) -> dict[str, str]:
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
        "PYTHONPATH": faultkit.python_path(shadow),
    }


@pytest.fixture(scope="session")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    given = os.environ.get("KBISECT_FAULTS_DIR")  # kept: pytest keeps only 3 basetemps
    base = Path(given) if given else tmp_path_factory.mktemp("faults")
    base.mkdir(parents=True, exist_ok=False)
    seed = int(os.environ.get("KBISECT_FAULTS_SEED") or random.randrange(1 << 32))
    env = _env(base, faultkit.make_shadow(base / "shadow"))
    saved = {k: os.environ.get(k) for k in FIXED_DATES}
    os.environ.update(FIXED_DATES)  # the user's commits get the ids of every session
    try:
        specs = [{"subject": f"commit {i}", "tps": 1000 if i < 8 else 750} for i in range(1, 13)]
        repo, shas = users_repo_at_work(base, specs)
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    workers = [
        Worker(base / f"w{i}", {**env, "KBISECT_CACHE": str(base / f"w{i}" / "cache")})
        for i in range(WORKERS)
    ]
    s = Session(base, seed, repo, shas, write_scenario(base), env, workers)
    s.snapshot = repo_snapshot(repo)
    yield s
    assert repo_snapshot(repo) == s.snapshot, "the user's repository changed"
    (base / "away").rename(base / "mnt" / "linked")  # its disk is back: it still works
    assert not faultkit.marked_any(), "processes of the suite left"
    figures = {"seed": seed, "tests": FIGURES}
    (base / "figures.json").write_text(json.dumps(figures, indent=1))
    faultkit.SUMMARY.append(f"fault-injection figures: {base / 'figures.json'} (seed {seed})")


# -- the scenarios ------------------------------------------------------------------


def _compare(s: Session) -> Scenario:
    def start(c: Chain) -> list[str]:
        return [
            "compare", "--tree", str(s.repo), "--base", s.shas[12], "--revert", s.shas[8],
            "--scenario", "smoke", "--boots", "3", "--target", str(c.target_file),
            "--out", str(c.dir / "cmp"),
        ]  # fmt: skip

    def run_dir(c: Chain) -> Path | None:
        return c.dir / "cmp" if (c.dir / "cmp" / "plan.json").is_file() else None

    def phase(run: Path) -> tuple[Any, ...]:
        if (run / "summary.json").is_file():
            return ("done",) if (run / "report.md").is_file() else ("summary",)
        return ("plan",) if (run / "plan.json").is_file() else ("none",)

    def outcome(run: Path) -> dict[str, Any]:
        ok = [x for x in results.load_samples(run) if x["status"] == "ok"]
        return {
            "verdict": results.load_summary(run)["verdict"],
            "tps": [(x["label"], x["tps"]) for x in ok],
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


def _bisect(s: Session) -> Scenario:
    def start(c: Chain) -> list[str]:
        return [
            "bisect", "--tree", str(s.repo), "--good", s.shas[1], "--bad", s.shas[12],
            "--scenario", str(s.scenario_file), "--target", str(c.target_file),
            "--runs-min", "2", "--runs-max", "3", "--recheck-samples", "3",
        ]  # fmt: skip

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
        tps: dict[str, list[float]] = {}
        for path in _bisect_samples(run.parent):
            x = json.loads(path.read_text())
            key = f"{path.parents[2].name}/{path.parents[1].name}"  # store or recheck/commit
            if x["status"] == "ok":
                tps.setdefault(key, []).append(x["tps"])
        return {k: summary[k] for k in ("first_bad", "bisect_log", "recheck")} | {"tps": tps}

    return Scenario(
        "bisect",
        start,
        lambda c, run: ["bisect", "--resume", str(run)],
        run_dir,
        lambda c: _bisect_samples(c.results),
        phase,
        outcome,
        TARGET,
    )


def _bisect_samples(root: Path) -> list[Path]:
    """Every sample of a bisection: its store's and its re-check's."""
    found = root.glob("bisect-store/*/*/samples/[0-9]*-*.json")
    return sorted([*found, *root.glob("*/recheck/*/samples/[0-9]*-*.json")])


SCENARIOS = {"compare": _compare, "bisect": _bisect}


def _chain(s: Session, name: str, worker: Worker, sig: str, seed: int) -> Chain:
    worker.chains += 1
    tag = f"{name}-{sig}-{seed}"
    return Chain(SCENARIOS[name](s), worker, sig, seed, tag, worker.root / tag)


def _reference(s: Session, name: str) -> Reference:
    if name not in s.refs:
        ref_worker = Worker(
            s.base / f"ref-{name}", {**s.env, "KBISECT_CACHE": str(s.base / "ref-cache")}
        )
        s.refs[name] = reference(_chain(s, name, ref_worker, "KILL", 0))
    return s.refs[name]


# -- the suite ------------------------------------------------------------------------


@pytest.mark.parametrize("sig", ["KILL", "INT", "HUP", "TERM"])
@pytest.mark.parametrize("name", ["compare", "bisect"])
def test_interrupted_runs_end_like_an_uninterrupted_one(
    session: Session, name: str, sig: str
) -> None:
    ref = _reference(session, name)
    started = time.monotonic()
    lock, done = threading.Lock(), [0]
    chains: list[Chain] = []
    only = os.environ.get("KBISECT_FAULTS_CHAIN")
    seeds = random.Random(f"{session.seed}-{name}-{sig}")

    def work(worker: Worker) -> None:
        while True:
            with lock:
                if done[0] >= PER_KIND or (only and chains):
                    return
                seed = int(only) if only else seeds.getrandbits(32)
                chain = _chain(session, name, worker, sig, seed)
                chains.append(chain)
            run_chain(chain, ref, Path(worker.env["KBISECT_CACHE"]))
            with lock:
                done[0] += sum(1 for e in chain.events if e["fired"] and not e["step_killed"])

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(work, session.workers[: 1 if only else WORKERS]))
    FIGURES.append(_figures(name, sig, chains, ref, time.monotonic() - started))
    problems = [p for c in chains for p in c.problems]
    assert not problems, (
        f"{len(problems)} problem(s); replay a chain with KBISECT_FAULTS_CHAIN=<seed> "
        f"pytest -m faults 'tests/test_faults.py::{_node(name, sig)}':\n" + "\n".join(problems[:20])
    )
    assert repo_snapshot(session.repo) == session.snapshot


def _node(name: str, sig: str) -> str:
    return f"test_interrupted_runs_end_like_an_uninterrupted_one[{name}-{sig}]"


def _figures(
    name: str, sig: str, chains: list[Chain], ref: Reference, seconds: float
) -> dict[str, Any]:
    events = [e for c in chains for e in c.events]
    fired = [e for e in events if e["fired"] and not e["step_killed"]]
    return {
        "scenario": name,
        "signal": sig,
        "chains": len(chains),
        "runs": len(events),
        "interruptions": len(fired),
        "by_trigger": {t: sum(e["trigger"] == t for e in fired) for t in faultkit.TRIGGERS},
        "default_exit": sum(e["default_exit"] for e in fired),
        "late": sum(bool(e.get("late")) for e in fired),
        "step_kills": sum(e["step_killed"] for e in events),
        "guest_kills": sum(e["guest_killed"] for e in events),
        "not_fired": sum(not e["fired"] for e in events),
        "tmp_left": sum(tmp_files(c) for c in chains),
        "problems": sum(len(c.problems) for c in chains),
        "reference_s": round(ref.seconds, 2),
        "seconds": round(seconds, 1),
    }
