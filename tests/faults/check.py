"""A chain of the fault-injection suite, run and checked (tests/faults/kit.py has the
machinery, tests/faults/test_faults.py the scenarios):

- after every interruption: the driver's exit code (130, or -9 for SIGKILL; 3 when a
  bisect step was killed), no process of the chain left, none in a scratch worktree;
- at the end: the last run's exit code and outcome equal the reference's (verdict and
  numbers, or culprit, bisect log and re-check), each sample taken once (the samples
  equal the reference's, key by key, in order; failed ones only where a fake guest was
  killed; at most one boot redone per interruption), every JSON file readable and every
  sample and summary valid, `kbisect report` renders; the results database sound and
  indexing no file that is not there, and after `kbisect db rebuild` exactly the samples.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from kbisect.db import rebuild, runs
from kbisect.measure import results
from tests.fakes import ROOT
from tests.faults.kit import Chain, Reference, describe, execute, expected_code, plan_run
from tests.faults.procs import check_gone

KILLS = ([1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4])  # interruptions per chain, and how often


def finished(chain: Chain, run_dir: Path | None) -> bool:
    return run_dir is not None and chain.scenario.phase(run_dir) == ("done",)


def run_chain(chain: Chain, ref: Reference, cache: Path) -> None:
    """Interrupt a run 1-4 times, resuming after each, then let it finish; check."""
    kills = chain.rng.choices(*KILLS)[0]
    run_dir: Path | None = None
    last = None
    for i in range(kills + 1):
        how = plan_run(chain, ref, interrupt=i < kills)
        argv = (
            chain.scenario.start(chain)
            if run_dir is None
            else chain.scenario.resume(chain, run_dir)
        )
        run = execute(chain, argv, how)
        if how["step"]:
            run.trigger = "step"
        gone = check_gone(chain.tag, cache, chain.problem)
        describe(chain, run)["gone_s"] = round(gone, 2)
        run_dir = chain.scenario.run_dir(chain)
        last = run
        if not run.fired:
            break  # it ran to its end before the interruption came
        late = finished(chain, run_dir)  # the signal came after the report was written
        if late:
            chain.events[-1]["late"] = True
        if run.code not in expected_code(chain, run) | ({ref.code} if late else set()):
            chain.problem(f"run {i} ({run.trigger}, SIG{chain.sig}) exited {run.code}: {run.log}")
            return
        if finished(chain, run_dir):
            break  # interrupted after its report was written: nothing left to resume
    if last is None or run_dir is None:
        chain.problem("no run directory at the end")
        return
    if last.fired and not finished(chain, run_dir):
        chain.problem(f"the last run was interrupted and the run is unfinished: {last.log}")
        return
    if not last.fired and last.code != ref.code:
        chain.problem(f"the last run exited {last.code}, the reference {ref.code}: {last.log}")
    started = time.monotonic()
    check_end(chain, ref, run_dir)
    chain.events[-1]["check_s"] = round(time.monotonic() - started, 2)


def check_end(chain: Chain, ref: Reference, run_dir: Path) -> None:
    outcome = chain.scenario.outcome(run_dir)
    for key, want in ref.outcome.items():
        if outcome.get(key) != want:
            (chain.dir / "outcome.json").write_text(json.dumps([outcome, ref.outcome], indent=1))
            chain.problem(f"{key} differs from the reference's: see {chain.dir}/outcome.json")
    check_samples(chain)
    check_files(chain, run_dir)
    check_db(chain, run_dir)


def check_samples(chain: Chain) -> None:
    """No sample lost or taken twice beyond what the faults explain."""
    files = chain.scenario.samples(chain)
    interrupted = sum(1 for e in chain.events if e["fired"])
    guests = sum(1 for e in chain.events if e["guest_killed"])
    failed = sum(1 for f in files if json.loads(f.read_text()).get("status") != "ok")
    if failed > guests:
        chain.problem(f"{failed} failed samples, but {guests} fake guests were killed")
    redone = chain.calls() - len(files)  # a guest killed before it logged its call: -1
    if not -guests <= redone <= interrupted:
        chain.problem(f"{redone} boots were not stored, {interrupted} interruptions")


def check_files(chain: Chain, run_dir: Path) -> None:
    """Every JSON readable, every sample and the summary valid, the report renders."""
    for path in sorted(chain.dir.rglob("*.json")):
        try:
            json.loads(path.read_text())
        except ValueError as exc:
            chain.problem(f"{path}: not JSON: {exc}")
    for folder in {p.parent.parent for p in chain.scenario.samples(chain)}:
        try:
            results.load_samples(folder)
        except results.InvalidResult as exc:
            chain.problem(str(exc))
    try:
        results.load_summary(run_dir)
    except (results.InvalidResult, results.NoResults) as exc:
        chain.problem(str(exc))
    report = kbisect(chain, "report", str(run_dir))
    if report.returncode != 0:
        chain.problem(f"kbisect report {run_dir} exited {report.returncode}: {report.stderr}")


def kbisect(chain: Chain, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m kbisect ARGV` in the chain's environment."""
    return subprocess.run(
        [sys.executable, "-m", "kbisect", *argv],
        cwd=ROOT,
        env=chain.env(),
        capture_output=True,
        text=True,
        check=False,
    )


def _indexed(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        check = conn.execute("PRAGMA integrity_check").fetchall()
        if check != [("ok",)]:
            raise sqlite3.DatabaseError(f"integrity_check: {check[:3]}")
        return {str(p) for (p,) in conn.execute("SELECT path FROM samples")}
    finally:
        conn.close()


def check_db(chain: Chain, run_dir: Path) -> None:
    """The results database after the kills: sound, indexing only files that exist (a
    kill between a sample's write and its indexing may leave one out); after `kbisect db
    rebuild` of the run (and the results dir), exactly the sample files."""
    db = chain.results / "kbisect.sqlite"
    files = {str(p.resolve()) for p in runs.sample_files(chain.dir)}
    try:
        indexed = _indexed(db) if db.is_file() else set()
    except sqlite3.Error as exc:
        chain.problem(f"{db}: {exc}")
        indexed = set()
    if indexed - files:
        chain.problem(f"{db} indexes files that are not there: {sorted(indexed - files)[:3]}")
    dirs = [d for d in (run_dir, chain.results) if d.is_dir() and runs.run_dirs(d)]
    try:  # in this process: what `kbisect db rebuild DIR...` runs (tests/db runs the command)
        rebuild.rebuild(dirs, db)
    except Exception as exc:  # any failure is the chain's problem to report
        chain.problem(f"kbisect db rebuild failed: {exc}")
        return
    if _indexed(db) != files:
        chain.problem(f"after kbisect db rebuild, {db} does not index exactly the samples")


def tmp_files(chain: Chain) -> int:
    """Temporary files left behind by a kill mid-write (never counted as samples)."""
    found = list(chain.dir.rglob("*.tmp"))
    counted = {p.name for p in chain.scenario.samples(chain)}
    if counted & {p.name for p in found}:
        raise AssertionError(f"a .tmp file is counted as a sample: {found}")
    return len(found)


def reference(chain: Chain) -> Reference:
    """The uninterrupted run of the scenario (no fault), once."""
    how = {"trigger": "", "guest": False, "step": False}
    run = execute(chain, chain.scenario.start(chain), how)
    run_dir = chain.scenario.run_dir(chain)
    assert run_dir is not None and finished(chain, run_dir), run.log.read_text()[-3000:]
    return Reference(
        run.code,
        run.seconds,
        chain.calls(),
        len(chain.scenario.samples(chain)),
        chain.scenario.outcome(run_dir),
    )
