"""`git bisect` in the driver's scratch worktree (slot "bisect"): start or replay, then
`git bisect run bisect/run`, streamed to a log with progress lines.

The user's checkout is never touched: a linked worktree has its own HEAD, index and
BISECT_* state. Before each step (git's "running ..." line) the bisect log is saved in
the run's state, so that `--resume` can replay it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kbisect.bisect import state
from kbisect.bisect.git import liveness
from kbisect.bisect.state import Options, Outcome, parse_log
from kbisect.core import paths, proc, progress
from kbisect.core.exceptions import InfraError
from kbisect.source import git, worktree

SLOT = "bisect"
RUN_SCRIPT = paths.CHECKOUT / "bisect" / "run"


class BisectStopped(InfraError):
    """`git bisect run` stopped without an answer (a step aborted it)."""


def start_command(wt: Path, bad: str, good: str) -> list[str]:
    return ["git", "-C", str(wt), "bisect", "start", bad, good]


def run_command(wt: Path, script: Path, step_args: list[str]) -> list[str]:
    return ["git", "-C", str(wt), "bisect", "run", str(script), *step_args]


def replay_command(wt: Path, log: Path) -> list[str]:
    return ["git", "-C", str(wt), "bisect", "replay", str(log)]


def reset_command(wt: Path) -> list[str]:
    return ["git", "-C", str(wt), "bisect", "reset"]


def bisect_log(wt: Path) -> str:
    return git.git(wt, "bisect", "log", check=False)


def reset(wt: Path) -> None:
    """End a bisect left in the worktree, if any (harmless without one)."""
    if (wt / ".git").exists():
        proc.run(reset_command(wt), check=False, capture=True)


class _Watch:
    """Shows git's and the steps' progress; saves the bisect log before each step."""

    def __init__(self, wt: Path, run_dir: Path, data: dict[str, Any]) -> None:
        self.wt, self.run_dir, self.data = wt, run_dir, data

    def __call__(self, line: str) -> None:
        if line.startswith("running "):
            self.data["bisect_log"] = bisect_log(self.wt)
            state.save(self.run_dir, self.data)
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


def _begin(wt: Path, run_dir: Path, data: dict[str, Any]) -> None:
    """`git bisect start`, or replay the saved log of an interrupted run."""
    reset(wt)
    if not data.get("bisect_log"):
        proc.run(start_command(wt, data["bad"], data["good"]), capture=True)
        return
    replay = run_dir / "bisect-replay.log"
    replay.write_text(data["bisect_log"])
    progress.step(f"replaying the saved bisect log ({replay})")
    proc.run(replay_command(wt, replay), capture=True)


def references(data: dict[str, Any]) -> tuple[str, str] | None:
    """The endpoints, for the steps to sample alongside (drift-aware references), unless
    --references 0 or a given --threshold (an absolute figure: nothing to re-measure)."""
    opts = Options.from_dict(data["options"])
    if opts.references and opts.threshold is None:
        return data["good"], data["bad"]
    return None


def one_pass(
    top: Path, run_dir: Path, data: dict[str, Any], opts: Options, runs_max: int
) -> Outcome:
    """Start (or replay), then `git bisect run` until git has an answer."""
    wt = worktree.checkout(top, data["bad"], SLOT)
    _begin(wt, run_dir, data)
    if not parse_log(bisect_log(wt)).finished:
        log = run_dir / "bisect-run.log"
        if not log.exists():
            log.write_text(progress.log_header(opts.argv()))
        progress.step(f"git bisect run in {wt}, up to {runs_max} samples a revision ({log})")
        args = opts.step_argv(data["threshold"], Path(data["store"]), runs_max, references(data))
        proc.run(
            run_command(wt, RUN_SCRIPT, args),
            cwd=wt,
            log=log,
            check=False,
            env={liveness.DRIVER_ENV: str(os.getpid())},
            on_line=_Watch(wt, run_dir, data),
        )
        data["bisect_log"] = bisect_log(wt)
        state.save(run_dir, data)
        if not parse_log(data["bisect_log"]).finished:
            raise BisectStopped(
                f"git bisect run stopped: {_stop_reason(log)} (log: {log}); "
                f"fix it, then: kbisect bisect --resume {run_dir}"
            )
    data["bisect_log"] = bisect_log(wt)
    reset(wt)
    return parse_log(data["bisect_log"])


def run(top: Path, run_dir: Path, data: dict[str, Any], opts: Options) -> Outcome:
    """Bisect. If git can only name a range because revisions next to the answer were
    unclear (not broken), a second pass un-skips them with twice --runs-max samples."""
    second = bool(data.get("escalated"))
    outcome = one_pass(top, run_dir, data, opts, opts.runs_max * (2 if second else 1))
    unclear = state.unclear_skips(Path(data["store"]), outcome)
    if second or not unclear:
        return outcome
    progress.step(
        f"{len(unclear)} unclear revision(s) hide the answer: measuring them "
        f"again with up to {2 * opts.runs_max} samples"
    )
    data.update(
        escalated=True,
        first_pass_log=data["bisect_log"],
        bisect_log=state.without_skips(data["bisect_log"], unclear),
    )
    state.save(run_dir, data)
    return one_pass(top, run_dir, data, opts, 2 * opts.runs_max)
