"""Kills while kbisect sets up (tests/faults/test_faults.py): while it creates its scratch
repository, checks out a scratch worktree, makes a revert, or moves the worktrees of an
old cache out of the user's repository. A `git` earlier on PATH (GIT_SHIM) signals the
driver at the Nth git command whose arguments contain a given word, while that command
runs; the driver's reaper (or its Ctrl-C handling) then ends git. A fresh cache each time,
so the setup really happens; then the command is run (or resumed) to its end and must
answer as the reference, with the user's repository as it was before.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.fakes import git
from tests.faults.kit import Chain, Reference, Worker, describe, execute, expected_code
from tests.faults.procs import check_gone

GIT_SHIM = """#!/bin/sh
real=$FAULTS_REAL_GIT
case " $* " in
*" $FAULTS_GIT_MATCH "*)
    n=$(($(cat "$FAULTS_GIT_COUNT" 2>/dev/null || echo 0) + 1))
    echo "$n" >"$FAULTS_GIT_COUNT"
    if [ "$n" -eq "$FAULTS_GIT_AT" ]; then
        "$real" "$@" &
        kill -s "$FAULTS_SIGNAL" "$(cat "$FAULTS_PID_FILE")"
        wait $!
        exit $?
    fi ;;
esac
exec "$real" "$@"
"""

# (what is set up, a word of the git command to kill in, which one, an old cache first)
POINTS = [
    ("scratch repository", "--bare", 1, False),
    ("scratch repository", "gc.auto", 1, False),
    ("scratch repository", "advice.detachedHead", 1, False),
    ("worktree checkout", "add", 1, False),
    ("worktree checkout", "add", 2, False),
    ("worktree checkout", "checkout", 1, False),
    ("worktree checkout", "clean", 1, False),
    ("revert", "revert", 1, False),
    ("migration", "--no-checkout", 1, True),
    ("migration", "--no-checkout", 2, True),
    ("migration", "repair", 1, True),
    ("migration", "update-index", 1, True),
]


def shim(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "git").write_text(GIT_SHIM)
    (folder / "git").chmod(0o755)
    return folder


def old_cache(repo: Path, cache: Path, commit: str) -> None:
    """A cache from before the scratch repositories: kbisect's worktrees registered in the
    user's repository (kbisect/source/worktree.py: retire_old)."""
    from kbisect.source import worktree

    os.environ["KBISECT_CACHE"] = str(cache)
    try:
        for slot in ("build", "revert"):
            git(
                repo,
                "worktree",
                "add",
                "-q",
                "--detach",
                str(worktree.path_for(repo, slot)),
                commit,
            )
    finally:
        del os.environ["KBISECT_CACHE"]


def attempt(
    chain: Chain, ref: Reference, point: tuple[str, str, int, bool], shim_dir: Path
) -> None:
    """Kill at the point, then run (or resume) to the end; check as for any chain."""
    what, word, nth, _ = point
    cache = Path(chain.worker.env["KBISECT_CACHE"])
    real = shutil.which("git")
    chain.worker.env.update(
        PATH=f"{shim_dir}:{chain.worker.env['PATH']}",
        FAULTS_REAL_GIT=str(real),
        FAULTS_GIT_MATCH=word,
        FAULTS_GIT_AT=str(nth),
        FAULTS_GIT_COUNT=str(chain.dir / "git-count"),
        FAULTS_SIGNAL=chain.sig,
        FAULTS_PID_FILE=str(chain.dir / "driver.pid"),
    )
    how = {"trigger": "", "guest": False, "step": False}
    run = execute(chain, chain.scenario.start(chain), how)
    counted = (
        (chain.dir / "git-count").read_text().strip() if (chain.dir / "git-count").exists() else "0"
    )
    run.fired, run.trigger = int(counted) >= nth, f"git {word} #{nth} ({what})"
    describe(chain, run)
    check_gone(chain.tag, cache, chain.problem)
    chain.worker.env["FAULTS_GIT_AT"] = "0"  # the run that finishes is not interrupted
    if not run.fired:
        chain.problem(f"never ran a git command with {word!r} {nth} time(s): {run.log}")
        return
    if run.code not in expected_code(chain, run):
        chain.problem(f"killed in {what} ({word}), SIG{chain.sig}: exited {run.code}: {run.log}")
        return
    run_dir = chain.scenario.run_dir(chain)
    argv = chain.scenario.start(chain) if run_dir is None else chain.scenario.resume(chain, run_dir)
    end = execute(chain, argv, how)
    describe(chain, end)
    check_gone(chain.tag, cache, chain.problem)
    if end.code != ref.code:
        chain.problem(f"after a kill in {what} ({word}): the run exited {end.code}: {end.log}")
        return
    run_dir = chain.scenario.run_dir(chain)
    assert run_dir is not None
    outcome = chain.scenario.outcome(run_dir)
    if outcome != ref.outcome:
        chain.problem(f"after a kill in {what} ({word}): {outcome} != {ref.outcome}")


def worker_for(base: Path, env: dict[str, str], n: int) -> Worker:
    """A worker with a cache of its own, fresh for this attempt."""
    root = base / f"setup-{n}"
    return Worker(root, {**env, "KBISECT_CACHE": str(root / "cache")})
