"""`kbisect bisect`: find the commit that made a scenario slower.

Phases, each saved in the run's state.json (state.py), so that `--resume`
continues after Ctrl-C, a kill or a reboot:

1. endpoints: check the tree and revisions; measure both endpoints and refuse unless good
   is significantly better than bad; pick the threshold (check.py);
2. bisecting, `--method posterior` (the default): the posterior over the culprit from
   every sample, the next revision by information per cost, the adaptive re-check of the
   answer (search.py, recheck.py); `--method git`: `git bisect start B G` and
   `git bisect run bisect/run ...` in a scratch worktree, never the user's checkout
   (gitbisect.py);
3. recheck (git): the first bad commit against its parent with fresh samples;
4. done: report.md, summary.json and the plots (report.py, postreport.py).

Exit 0 when the re-check confirms the culprit, 1 when it does not or no answer holds the
confidence (the report says the answer is suspect), 2 for bad input (one line), 3 when a
step aborted the bisect.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from kbisect.bisect import check, postreport, report, samples, state
from kbisect.bisect.git import run
from kbisect.bisect.posterior import search
from kbisect.bisect.state import METHODS, Options, Outcome
from kbisect.core import lock, progress, stale
from kbisect.core.exceptions import EXIT_NEGATIVE, EXIT_OK, UserError
from kbisect.measure import results
from kbisect.scenario import scenario
from kbisect.source import git, tree, worktree
from kbisect.targets import registry


def validate(opts: Options) -> tuple[Path, str, str]:
    """The tree's top level and the full ids of good and bad, or a one-line UserError."""
    if not 2 <= opts.runs_min <= opts.runs_max:
        raise UserError(
            f"--runs-min {opts.runs_min} --runs-max {opts.runs_max}: need 2 <= runs-min <= runs-max"
        )
    if opts.method not in METHODS:
        raise UserError(f"--method {opts.method}: one of {', '.join(METHODS)}")
    if not 0.5 < opts.confidence < 1:
        raise UserError(f"--confidence {opts.confidence:g}: must be between 0.5 and 1")
    if opts.recheck_samples < 3:
        raise UserError(f"--recheck-samples {opts.recheck_samples}: need at least 3")
    if opts.threshold is not None and not opts.threshold > 0:
        raise UserError(f"--threshold {opts.threshold:g}: must be a positive tps figure")
    top = tree.resolve(opts.tree)
    good, bad = git.rev_parse(top, opts.good), git.rev_parse(top, opts.bad)
    if good == bad:
        problem = f"--good {opts.good} and --bad {opts.bad} are the same commit {good[:12]}"
    elif git.is_ancestor(top, bad, good):
        problem = f"good and bad are swapped: --bad {opts.bad} is an ancestor of --good {opts.good}"
    elif not git.is_ancestor(top, good, bad):
        problem = f"--good {opts.good} is not an ancestor of --bad {opts.bad}"
    else:
        return top, good, bad
    raise check.BadEndpoints(problem)


@contextmanager
def _exclusive(top: Path) -> Iterator[None]:
    """One driver per repository: they would share the scratch worktree. Nor may one
    start while a process of an earlier one (a step, git, QEMU) still works in it."""
    wt = worktree.path_for(top, run.SLOT)
    with lock.hold(
        wt.with_suffix(".driver.lock"),
        wait=False,
        busy=lambda pid: f"another kbisect bisect (pid {pid}) is running on {top}",
    ):
        if left := stale.wait_gone(wt):
            raise UserError(
                f"a process of an earlier bisect still runs in {wt}: pid {left[0]} "
                f"({left[1][:80]}); wait for it to end or kill it"
            )
        yield


def drive(opts: Options, run_dir: Path | None = None, data: dict[str, Any] | None = None) -> int:
    """Run (or, with run_dir and data, resume) a bisection; its exit code."""
    checked = opts if data is None else replace(opts, good=data["good"], bad=data["bad"])
    top, good, bad = validate(checked)
    with registry.get(opts.target, opts.arch) as target, _exclusive(top):
        scen = scenario.load(opts.scenario).with_overrides(list(opts.sets))
        target.preflight(scen)
        ctx = samples.Context(scen, opts.append, target, opts.policy())
        target.warn_if_busy()
        if run_dir is None or data is None:
            store = samples.store_for(None, top, ctx, opts.configs, opts.base_config)
            run_dir = results.new_run_dir("bisect", ctx.scen.name)
            ident = {"name": ctx.scen.name, "hash": ctx.scen.hash}
            data = state.new(opts, ident, top, good, bad, store)
            state.save(run_dir, data)
        progress.step(f"bisect run dir: {run_dir}")
        try:
            return _phases(ctx, top, run_dir, data, opts)
        except KeyboardInterrupt:
            progress.step(f"interrupted; continue with: kbisect bisect --resume {run_dir}")
            raise


def _endpoints(
    ctx: samples.Context, top: Path, run_dir: Path, data: dict[str, Any], opts: Options
) -> None:
    store = Path(data["store"])
    v = check.measure_endpoints(ctx, top, store, opts, data["good"], data["bad"])
    data["endpoints"] = v.as_dict()
    try:
        check.check_endpoints(v)
        data["threshold"], data["threshold_source"] = check.pick_threshold(
            opts.threshold, v.a.mean, v.b.mean
        )
    except check.BadEndpoints as exc:
        state.save(run_dir, {**data, "phase": "done", "refused": str(exc)})
        raise
    progress.step(f"threshold {data['threshold']:.1f} tps ({data['threshold_source']})")


def _phases(
    ctx: samples.Context, top: Path, run_dir: Path, data: dict[str, Any], opts: Options
) -> int:
    if data["phase"] == "endpoints":
        _endpoints(ctx, top, run_dir, data, opts)
        data["phase"] = "bisecting"
        state.save(run_dir, data)
    if opts.method == "posterior":
        return _posterior(ctx, top, run_dir, data, opts)
    if data["phase"] == "bisecting":
        run.run(top, run_dir, data, opts)
        data["phase"] = "recheck"
        state.save(run_dir, data)
    outcome = state.parse_log(data["bisect_log"])
    if data["phase"] == "recheck":
        data["recheck"] = check.recheck(ctx, top, run_dir, opts, outcome)
        data["phase"] = "done"
    data["exit"] = EXIT_OK if data["recheck"]["confirmed"] else EXIT_NEGATIVE
    state.save(run_dir, data)
    summary = report.summary(top, data, outcome, opts.argv())
    _print_answer(top, outcome, data["recheck"], report.write(run_dir, summary))
    return int(data["exit"])


def _posterior(
    ctx: samples.Context, top: Path, run_dir: Path, data: dict[str, Any], opts: Options
) -> int:
    if data["phase"] == "bisecting":
        found = search.Search(ctx, top, run_dir, data, opts)
        answer = found.run()
        data["answer"] = answer.as_dict()
        data["git_bisect_log"] = postreport.replay_log(top, found.post, answer, data)
        data["phase"] = "done"
        state.save(run_dir, data)
    summary = postreport.summary(top, run_dir, data, opts.argv())
    data["exit"] = EXIT_OK if summary["confirmed"] else EXIT_NEGATIVE
    state.save(run_dir, data)
    written = report.write(run_dir, {**summary, "exit": data["exit"]})
    postreport.print_answer(summary, written)
    return int(data["exit"])


def _print_answer(top: Path, outcome: Outcome, rc: dict[str, Any], written: Path) -> None:
    if outcome.first_bad:
        print(f"first bad commit: {outcome.first_bad} {git.subject(top, outcome.first_bad)}")
    else:
        print(f"first bad commit: one of {len(outcome.candidates)} (skipped commits hide it):")
        for c in outcome.candidates:
            print(f"  {c} {git.subject(top, c)}")
    print(check.recheck_line(rc))
    if not rc["confirmed"]:
        progress.warn(
            "the re-check does NOT confirm this culprit: treat it as suspect "
            "(noise, a flaky boot, or a threshold too close to one side)"
        )
    print(f"report: {written}")
