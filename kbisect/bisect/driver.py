"""`kbisect bisect`: find the commit that made a scenario slower.

Phases, each saved in the run's state.json (state.py), so that `--resume`
continues after Ctrl-C, a kill or a reboot:

1. endpoints: check the tree and revisions; measure both endpoints and refuse unless good
   is significantly better than bad; pick the threshold (check.py);
2. bisecting, `--method posterior` (the default): the posterior over the culprit from
   every sample, the next revision by information per cost, and the revert check of the
   answer inside the same loop (search.py, its decision rule rule.py; verify.py), the
   adaptive culprit/parent re-check (recheck.py) where the revert cannot be measured;
   `--story full` first tells the whole range's story (story_search.py); `--method git`:
   `git bisect start B G` and `git bisect run bisect/run ...` in a scratch worktree,
   never the user's checkout (git/run.py);
3. verifying, the git method: the bad endpoint with the answer reverted, measured against
   the bad endpoint (verify.py); an older posterior state in this phase resumes its search,
   which goes on with the check from its samples;
4. recheck (git, when the revert could not be measured): the first bad commit against
   its parent with fresh samples;
5. done: report.md, summary.json and the plots (report/).

Exit 0 when the revert restores the whole good-to-bad gap (or, when the revert could not
be measured, the re-check confirms the culprit), 1 when it does not or no answer holds
the confidence (the report says the answer is suspect), 2 for bad input (one line), 3
when a step aborted the bisect.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from kbisect.bisect import check, recheck, samples, state, verify
from kbisect.bisect.git import log
from kbisect.bisect.git import run as gitrun
from kbisect.bisect.git.log import Outcome
from kbisect.bisect.posterior import search
from kbisect.bisect.posterior.bench import Store
from kbisect.bisect.posterior.story_search import StorySearch
from kbisect.bisect.report import answer as answer_report
from kbisect.bisect.report import files
from kbisect.bisect.report import posterior as posterior_report
from kbisect.bisect.request import METHODS, Options
from kbisect.bisect.state import Run, Verification
from kbisect.core import lock, paths, progress, stale
from kbisect.core.exceptions import EXIT_NEGATIVE, EXIT_OK, UserError
from kbisect.kernel import make
from kbisect.measure import results
from kbisect.pgbuild import request
from kbisect.scenario import scenario
from kbisect.source import git, patches, tree, worktree
from kbisect.source.patches import Patch
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


def check_patches(top: Path, opts: Options, endpoints: tuple[str, ...]) -> tuple[Patch, ...]:
    """The --patch files, read, and applied on both endpoints before anything is built:
    one that does not apply there is bad input (exit 2); on a revision between them, a
    skip (git/step.build_here)."""
    files = patches.read_all(opts.patches)
    for commit in endpoints if files else ():
        patches.apply(top, commit, files)
    return files


def build_server(opts: Options) -> Options:
    """--pg-build's server (with its --pg-patch files) built once, before the bisection
    starts: every revision, every step and a resume run it by its key (pg_sets)."""
    if opts.pg_build is None or opts.pg_sets:
        return opts
    scenario.load(opts.scenario).with_overrides([*opts.sets, request.STAND_IN])
    made = request.Request(opts.pg_build, tuple(map(Path, opts.pg_patches))).make()
    progress.step(f"every revision runs {made.describe()} ({made.key})")
    return replace(opts, pg_sets=made.sets)


@contextmanager
def _exclusive(top: Path) -> Iterator[None]:
    """One driver per repository: they would share the scratch worktree. Nor may one
    start while a process of an earlier one (a step, git, QEMU) still works in it."""
    wt = worktree.path_for(top, gitrun.SLOT)
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


def drive(opts: Options, run_dir: Path | None = None, run: Run | None = None) -> int:
    """Run (or, with run_dir and its state, resume) a bisection; its exit code."""
    checked = opts if run is None else replace(opts, good=run.good, bad=run.bad)
    top, good, bad = validate(checked)
    with_patches = check_patches(top, opts, (good, bad))
    need = paths.results_need(opts.max_boots + 2 * (opts.runs_max + opts.recheck_samples))
    paths.check(run_dir or paths.results_dir(), need, "results dir")
    paths.check(paths.cache_dir(), paths.PER_BUILD, "the cache")
    make.check_dir(paths.cache_dir(), "the cache")
    if run is None:
        opts = build_server(opts)
    with registry.get(opts.target, opts.arch) as target, _exclusive(top):
        scen = scenario.load(opts.scenario).with_overrides(opts.overrides())
        target.preflight(scen)
        ctx = samples.Context(scen, opts.append, target, opts.policy(), with_patches)
        target.warn_if_busy()
        if run_dir is None or run is None:
            store = samples.store_for(None, top, ctx, opts.configs, opts.base_config)
            run_dir = results.new_run_dir("bisect", ctx.scen.name)
            ident = {"name": ctx.scen.name, "hash": ctx.scen.hash}
            run = Run(opts, ident, top, good, bad, store)
            if with_patches:
                made = patches.apply(top, good, with_patches)
                run.patches = patches.describe(top, good, with_patches, made)
            state.save(run_dir, run)
        progress.step(f"bisect run dir: {run_dir}")
        progress.set_resume(["kbisect", "bisect", "--resume", str(run_dir.resolve())])
        return _phases(ctx, top, run_dir, run)


def _endpoints(ctx: samples.Context, top: Path, run_dir: Path, run: Run) -> None:
    v = check.measure_endpoints(ctx, top, run.store, run.options, run.good, run.bad)
    run.endpoints = v.as_dict()
    try:
        check.check_endpoints(v)
        run.threshold, run.threshold_source = check.pick_threshold(
            run.options.threshold, v.a.mean, v.b.mean
        )
    except check.BadEndpoints as exc:
        state.save(run_dir, replace(run, phase="done", refused=str(exc)))
        raise
    progress.step(f"threshold {run.threshold:.1f} tps ({run.threshold_source})")


def _phases(ctx: samples.Context, top: Path, run_dir: Path, run: Run) -> int:
    if run.phase == "endpoints":
        _endpoints(ctx, top, run_dir, run)
        run.phase = "bisecting"
        state.save(run_dir, run)
    if run.options.method == "posterior":
        return _posterior(ctx, top, run_dir, run)
    if run.phase == "bisecting":
        gitrun.bisect(top, run_dir, run)
        first_bad = log.parse(run.bisect_log).first_bad
        run.verification = Verification(first_bad) if first_bad else None
        run.phase = "verifying"
        state.save(run_dir, run)
    outcome = log.parse(run.bisect_log)
    if run.phase == "verifying":
        _verify(ctx, top, run_dir, run)
        run.phase = (
            "done" if (run.verification is not None and run.verification.measured) else "recheck"
        )
        state.save(run_dir, run)
    if run.phase == "recheck":
        run.recheck = recheck.run_git(ctx, top, run_dir, run.options, outcome)
        run.phase = "done"
    summary = files.summary(top, run_dir, run)
    code = _finished(run_dir, run, EXIT_OK if summary["confirmed"] else EXIT_NEGATIVE)
    _print_answer(top, outcome, summary, files.write(run_dir, {**summary, "exit": code}))
    return code


def _verify(ctx: samples.Context, top: Path, run_dir: Path, run: Run) -> None:
    """The revert check of the answer, if there is one to revert (verify.py)."""
    if run.verification is not None:
        verify.verify(Store(ctx, top, run_dir, run), run, lambda: state.save(run_dir, run))


def _posterior(ctx: samples.Context, top: Path, run_dir: Path, run: Run) -> int:
    if run.phase in ("bisecting", "verifying"):  # "verifying": an older kbisect's state
        # an older kbisect's search that probed was telling the story: it goes on so
        kind = StorySearch if run.options.story == "full" or run.probes else search.Search
        found = search.start(ctx, top, run_dir, run, kind)
        answer = found.find()  # the search verified its answer
        run.answer = answer.as_dict()
        run.git_bisect_log = posterior_report.replay_log(top, found.post, answer, run)
        run.phase = "done"
        state.save(run_dir, run)
    summary = files.summary(top, run_dir, run)
    code = _finished(run_dir, run, EXIT_OK if summary["confirmed"] else EXIT_NEGATIVE)
    written = files.write(run_dir, {**summary, "exit": code})
    answer_report.print_answer(summary, written)
    return code


def _finished(run_dir: Path, run: Run, code: int) -> int:
    """The bisection's exit code, saved in its state; a finished state resumed to write
    its summary and report again is not rewritten."""
    if run.exit != code:
        run.exit = code
        state.save(run_dir, run)
    return code


def _print_answer(top: Path, outcome: Outcome, s: dict[str, Any], written: Path) -> None:
    if outcome.first_bad:
        print(f"first bad commit: {outcome.first_bad} {git.subject(top, outcome.first_bad)}")
    else:
        print(f"first bad commit: one of {len(outcome.candidates)} (skipped commits hide it):")
        for c in outcome.candidates:
            print(f"  {c} {git.subject(top, c)}")
    if rec := s.get("verification"):
        print(verify.line(rec))
    if s["recheck"].get("culprit"):
        print(recheck.git_line(s["recheck"]))
    if not s["confirmed"]:
        which = "revert check" if verify.measured_record(s) else "re-check"
        progress.warn(
            f"the {which} does NOT confirm this culprit: treat it as suspect "
            "(noise, a flaky boot, or a threshold too close to one side)"
        )
    print(f"report: {written}")
