"""The fault-injection suite (`just faults`; marker `faults`, left out of `just unit`):
kill -9, SIGINT, SIGTERM and SIGHUP at random points of fake compares and bisections,
50+ interruptions of each kind per scenario, each run resumed until it ends; then the
answer, the samples, the processes and the user's repository are checked against one
uninterrupted reference run (tests/faults/check.py says what is checked, tests/faults/kit.py
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
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kbisect.source import tarball
from tests.bisect.test_step import write_scenario
from tests.fakes import repo_snapshot, users_repo_at_work
from tests.faults import kills_at_setup, kit, procs
from tests.faults.check import reference, run_chain, tmp_files
from tests.faults.kit import Chain, Reference, Worker
from tests.faults.scenarios import FIXED_DATES, HISTORY, SCENARIOS, Session, session_env

pytestmark = pytest.mark.faults
PER_KIND = int(os.environ.get("KBISECT_FAULTS_PER_KIND", "50"))
WORKERS = 2
FIGURES: list[dict[str, Any]] = []


@contextmanager
def fixed_dates() -> Iterator[None]:
    """The same commit ids in every session, whatever HOME's git identity."""
    fixed = {**FIXED_DATES, **tarball.FIXED_IDENTITY}
    saved = {k: os.environ.get(k) for k in fixed}
    os.environ.update(fixed)
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture(scope="session")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    given = os.environ.get("KBISECT_FAULTS_DIR")  # kept: pytest keeps only 3 basetemps
    base = Path(given) if given else tmp_path_factory.mktemp("faults")  # mktemp makes it
    if given:
        base.mkdir(parents=True, exist_ok=False)  # never mixed with an earlier session's
    seed = int(os.environ.get("KBISECT_FAULTS_SEED") or random.randrange(1 << 32))
    env = session_env(base, procs.make_shadow(base / "shadow"))
    with fixed_dates():  # the user's commits get the ids of every session
        repo, shas = users_repo_at_work(base, HISTORY)
    workers = [
        Worker(base / f"w{i}", {**env, "KBISECT_CACHE": str(base / f"w{i}" / "cache")})
        for i in range(WORKERS)
    ]
    s = Session(base, seed, repo, shas, write_scenario(base), env, workers)
    s.snapshot = repo_snapshot(repo)
    yield s
    assert repo_snapshot(repo) == s.snapshot, "the user's repository changed"
    (base / "away").rename(base / "mnt" / "linked")  # its disk is back: it still works
    assert not procs.marked_any(base), "processes of the suite left"
    figures = {"seed": seed, "tests": FIGURES}
    (base / "figures.json").write_text(json.dumps(figures, indent=1))
    procs.SUMMARY.append(f"fault-injection figures: {base / 'figures.json'} (seed {seed})")


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


def _run_chains(session: Session, name: str, sig: str) -> list[Chain]:
    """Chains of one scenario and signal until PER_KIND interruptions have fired."""
    ref = _reference(session, name)
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
    return chains


@pytest.mark.parametrize("sig", ["KILL", "INT", "HUP", "TERM"])
@pytest.mark.parametrize("name", ["compare", "bisect", "bisect-posterior"])
def test_interrupted_runs_end_like_an_uninterrupted_one(
    session: Session, name: str, sig: str
) -> None:
    ref = _reference(session, name)
    started = time.monotonic()
    chains = _run_chains(session, name, sig)
    FIGURES.append(_figures(name, sig, chains, ref, time.monotonic() - started))
    problems = [p for c in chains for p in c.problems]
    assert not problems, (
        f"{len(problems)} problem(s); replay a chain with KBISECT_FAULTS_CHAIN=<seed> "
        f"pytest -m faults 'tests/faults/test_faults.py::{_node(name, sig)}':\n"
        + "\n".join(problems[:20])
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
        "by_trigger": {t: sum(e["trigger"] == t for e in fired) for t in kit.TRIGGERS},
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


def test_kills_while_kbisect_sets_up(session: Session) -> None:
    """Kills while kbisect makes its scratch repository, checks out a scratch worktree,
    makes a revert or moves an old cache's worktrees out of the user's repository (a
    second user's repository, which that migration must leave as it was before)."""
    ref = _reference(session, "compare")
    shim_dir = kills_at_setup.shim(session.base / "gitshim")
    with fixed_dates():
        mig_repo, _ = users_repo_at_work(session.base / "mig", HISTORY)
    before = repo_snapshot(mig_repo)
    rng = random.Random(f"{session.seed}-setup")
    jobs = [(n, p, rng.choice(list(kit.SIGNALS))) for n, p in enumerate(kills_at_setup.POINTS * 2)]
    chains: list[Chain] = []

    def work(migration: bool) -> None:
        for n, point, sig in (j for j in jobs if j[1][3] == migration):
            worker = kills_at_setup.worker_for(session.base, session.env, n)
            where = replace(session, repo=mig_repo) if migration else session
            tag = f"setup-{n}-{sig}"
            chain = Chain(SCENARIOS["compare"](where), worker, sig, n, tag, worker.root / tag)
            chains.append(chain)
            if migration:
                kills_at_setup.old_cache(
                    mig_repo, Path(worker.env["KBISECT_CACHE"]), session.shas[12]
                )
            kills_at_setup.attempt(chain, ref, point, shim_dir)
            if migration and repo_snapshot(mig_repo) != before:
                chain.problem("the migration left the user's repository changed")

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(work, [False, True]))
    FIGURES.append(
        {
            "scenario": "setup",
            "attempts": len(chains),
            "problems": sum(len(c.problems) for c in chains),
        }
    )
    problems = [p for c in chains for p in c.problems]
    assert not problems, "\n".join(problems[:20])
    assert repo_snapshot(session.repo) == session.snapshot
