"""`git bisect` in the driver's scratch worktree (slot "bisect"): start or replay, then
`git bisect run bisect/run`, streamed to a log with progress lines.

The user's checkout is never touched: a linked worktree has its own HEAD, index and
BISECT_* state. Before each step (git's "running ..." line) the bisect log is saved in
the run's state, so that `--resume` can replay it.
"""

from __future__ import annotations

import os
from pathlib import Path

from kbisect.bisect import state
from kbisect.bisect.git import liveness, log
from kbisect.bisect.git.log import Outcome
from kbisect.bisect.state import Run
from kbisect.core import paths, proc, progress
from kbisect.core.exceptions import InfraError
from kbisect.source import git, worktree

SLOT = "bisect"
RUN_SCRIPT = paths.CHECKOUT / "bisect" / "run"


class BisectStopped(InfraError):
    """`git bisect run` stopped without an answer (a step aborted it)."""


def run_command(wt: Path, script: Path, step_args: list[str]) -> list[str]:
    return ["git", "-C", str(wt), "bisect", "run", str(script), *step_args]


def bisect_log(wt: Path) -> str:
    return git.git(wt, "bisect", "log", check=False)


def reset(wt: Path) -> None:
    """End a bisect left in the worktree, if any (harmless without one)."""
    if (wt / ".git").exists():
        proc.run(["git", "-C", str(wt), "bisect", "reset"], check=False, capture=True)


class _Watch:
    """Shows git's and the steps' progress; saves the bisect log before each step."""

    def __init__(self, wt: Path, run_dir: Path, run: Run) -> None:
        self.wt, self.run_dir, self.run = wt, run_dir, run

    def __call__(self, line: str) -> None:
        if line.startswith("running "):
            self.run.bisect_log = bisect_log(self.wt)
            state.save(self.run_dir, self.run)
        elif line.startswith("Bisecting:") or "is the first bad commit" in line:
            progress.step(line)
        elif "] step: " in line:
            progress.step("  " + line.split("] step: ", 1)[1])


def _stop_reason(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    for line in reversed(lines):
        if line.startswith("kbisect: ") or "bisect run failed" in line:
            return line.removeprefix("kbisect: ").strip()
    return lines[-1].strip() if lines else "no output"


def _begin(wt: Path, run_dir: Path, run: Run) -> None:
    """`git bisect start`, or replay the saved log of an interrupted run."""
    reset(wt)
    if not run.bisect_log:
        proc.run(["git", "-C", str(wt), "bisect", "start", run.bad, run.good], capture=True)
        return
    replay = run_dir / "bisect-replay.log"
    replay.write_text(run.bisect_log)
    progress.step(f"replaying the saved bisect log ({replay})")
    proc.run(["git", "-C", str(wt), "bisect", "replay", str(replay)], capture=True)


def references(run: Run) -> tuple[str, str] | None:
    """The endpoints, for the steps to sample alongside (drift-aware references), unless
    --references 0 or a given --threshold (an absolute figure: nothing to re-measure)."""
    if run.options.references and run.options.threshold is None:
        return run.good, run.bad
    return None


def one_pass(top: Path, run_dir: Path, run: Run, runs_max: int) -> Outcome:
    """Start (or replay), then `git bisect run` until git has an answer."""
    wt = worktree.checkout(top, run.bad, SLOT)
    _begin(wt, run_dir, run)
    if not log.parse(bisect_log(wt)).finished:
        out = run_dir / "bisect-run.log"
        if not out.exists():
            out.write_text(progress.log_header(run.options.argv()))
        progress.step(f"git bisect run in {wt}, up to {runs_max} samples a revision ({out})")
        assert run.threshold is not None  # the endpoints' phase set it
        args = run.options.step_argv(run.threshold, run.store, runs_max, references(run))
        proc.run(
            run_command(wt, RUN_SCRIPT, args),
            cwd=wt,
            log=out,
            check=False,
            env={liveness.DRIVER_ENV: str(os.getpid())},
            on_line=_Watch(wt, run_dir, run),
        )
        run.bisect_log = bisect_log(wt)
        state.save(run_dir, run)
        if not log.parse(run.bisect_log).finished:
            raise BisectStopped(
                f"git bisect run stopped: {_stop_reason(out)} (log: {out}); "
                f"fix it, then: kbisect bisect --resume {run_dir}"
            )
    run.bisect_log = bisect_log(wt)
    reset(wt)
    return log.parse(run.bisect_log)


def bisect(top: Path, run_dir: Path, run: Run) -> Outcome:
    """Bisect. If git can only name a range because revisions next to the answer were
    unclear (not broken), a second pass un-skips them with twice --runs-max samples."""
    most = run.options.runs_max
    outcome = one_pass(top, run_dir, run, most * (2 if run.escalated else 1))
    unclear = log.unclear_skips(run.store, outcome)
    if run.escalated or not unclear:
        return outcome
    progress.step(
        f"{len(unclear)} unclear revision(s) hide the answer: measuring them "
        f"again with up to {2 * most} samples"
    )
    run.escalated = True
    run.first_pass_log = run.bisect_log
    run.bisect_log = log.without_skips(run.bisect_log, unclear)
    state.save(run_dir, run)
    return one_pass(top, run_dir, run, 2 * most)
