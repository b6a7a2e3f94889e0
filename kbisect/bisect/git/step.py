"""`kbisect bisect-step`: one `git bisect run` step, answered in git's exit codes.

git runs bisect/run in the checkout under bisection; bisect/run calls `entry()`. The
step builds the checked-out revision in place, then boots and measures it until
`sequential.decide()` gives a verdict against the threshold, and exits:

    0 good · 1 bad · 125 skip (build, boot or benchmark failed, or no clear verdict
    after --runs-max) · 128 abort the whole bisect (bad options, a missing tool,
    broken infrastructure, a bug).

A build or boot failure is never "bad". `main()` returns these codes itself (they are
git's protocol, not kbisect's exit codes) and never raises. Samples are stored per
commit (samples.py); a revisited revision reuses them and only adds if needed.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import NoReturn

from kbisect.bisect import samples, state
from kbisect.bisect.git import judge, ktest, liveness
from kbisect.build import build
from kbisect.commands import options
from kbisect.core import atomic, progress
from kbisect.core.arch import Arch
from kbisect.core.exceptions import BenchmarkError, BootError, BuildError, KbisectError, UserError
from kbisect.scenario import scenario
from kbisect.source import git, tree
from kbisect.stats import sequential
from kbisect.targets.base import Kernel

GOOD, BAD, SKIP, ABORT = 0, 1, 125, 128
EXIT_FOR = {"good": GOOD, "bad": BAD, "unclear": SKIP}


def build_here(
    top: Path, arch: Arch, configs: tuple[str, ...], base: str = "tinyconfig"
) -> build.BuildResult:
    """Build the checkout at top as it is (in place; cached per commit)."""
    req = build.Request(top, "HEAD", arch=arch, configs=configs, base=base, in_place=True)
    return build.build(req)


def describe(commit: str, d: sequential.Decision) -> str:
    """The one line that logs a decision with its numbers."""
    return f"step: {commit[:12]} {d.verdict}: {d.reason}"


def _record(
    out: Path,
    commit: str,
    verdict: str,
    reason: str,
    threshold: float,
    skip: str | None = None,
    d: sequential.Decision | None = None,
) -> None:
    """step.json: this visit's verdict, for the report and the driver's second pass.

    skip: why the revision was skipped: "build", "boot", "benchmark" or "unclear".
    """
    numbers = d.as_dict() if d is not None else {}
    atomic.write_json(
        out / "step.json",
        {
            **numbers,
            "commit": commit,
            "verdict": verdict,
            "reason": reason,
            "skip": skip,
            "threshold": threshold,
        },
    )


def _skip_kind(exc: Exception) -> str:
    if isinstance(exc, BuildError):
        return "build"
    return "boot" if isinstance(exc, BootError) else "benchmark"


def step(args: argparse.Namespace) -> int:
    if args.booted:  # ktest.pl's TEST: the kernel ktest booted on a machine (ktest.py)
        return ktest.booted_step(args)
    liveness.check_driver()
    ends = _reference_args(args)
    policy = judge.Policy(
        args.threshold or 1.0, not args.lower_is_better, args.runs_min, args.runs_max
    )
    policy.check()
    top = tree.check_kernel_tree(Path.cwd())
    with options.target(args) as target:
        scen = scenario.load(args.scenario).with_overrides(args.set)
        ctx = samples.Context(scen, args.append, target, options.retake_policy(args))
        store = samples.store_for(args.store, top, ctx, tuple(args.config), args.base_config)
        commit = git.rev_parse(top, "HEAD")
        out = samples.commit_dir(store, commit)
        progress.step(f"step: {commit[:12]} {git.subject(top, commit)}")
        target.preflight(ctx.scen)
        refs = _references(ctx, top, args, store, ends) if ends else None
        threshold = policy.threshold
        try:
            built = build_here(top, target.arch, tuple(args.config), args.base_config)
            rev = samples.Revision(commit, Kernel(built.image, built.manifest), out)
            if refs is None:
                _warn_stale(top, store)
                d = judge.judge(ctx, policy, rev)
            else:
                d, threshold, slope = judge.judge_with_refs(ctx, policy, rev, refs, store)
                progress.step(f"step: drift-corrected threshold {threshold:.1f} tps at the "
                              f"start, drift {slope * 3600:+.2%} per hour")  # fmt: skip
        except (BuildError, BootError, BenchmarkError) as exc:
            return _skip(out, commit, exc, threshold)
    code = EXIT_FOR[d.verdict]
    progress.step(describe(commit, d))
    verdict = {GOOD: "good", BAD: "bad"}.get(code, "skip")
    skip = "unclear" if code == SKIP else None
    _record(out, commit, verdict, d.reason, threshold, skip, d)
    return code


def _reference_args(args: argparse.Namespace) -> tuple[str, str] | None:
    """(good, bad) references, or None; UserError without them and without --threshold."""
    good, bad = args.reference_good, args.reference_bad
    if (good is None) != (bad is None):
        raise UserError("--reference-good and --reference-bad go together")
    if good is None and args.threshold is None:
        raise UserError("--threshold TPS is needed (or --reference-good and --reference-bad)")
    return None if good is None else (good, bad)


def _references(ctx: samples.Context, top: Path, args: argparse.Namespace, store: Path,
                ends: tuple[str, str]) -> judge.References:  # fmt: skip
    """The references built (cached per commit; else in kbisect's build worktree). One
    that does not build is bad input, not this revision's skip."""
    revs = []
    for rev in ends:
        commit = git.rev_parse(top, rev)
        req = build.Request(top, commit, arch=ctx.target.arch, configs=tuple(args.config),
                            base=args.base_config)  # fmt: skip
        try:
            built = build.build(req)
        except BuildError as exc:
            raise UserError(f"reference {rev} does not build: {exc}") from None
        kernel = Kernel(built.image, built.manifest)
        revs.append(samples.Revision(commit, kernel, samples.commit_dir(store, commit)))
    return judge.References(revs[0], revs[1], args.reference_every)


def _warn_stale(top: Path, store: Path) -> None:
    """A fixed threshold: say so when the endpoints' stored samples are old or drifted."""
    marks = state.parse_log(git.git(top, "bisect", "log", check=False)).marks
    firsts = {m.verdict: m.commit for m in reversed(marks) if m.verdict in ("good", "bad")}
    if "good" in firsts and "bad" in firsts:
        good, bad = (git.rev_parse(top, firsts[v]) for v in ("good", "bad"))
        for line in judge.stale_warning(store, good, bad, time.time()):
            progress.warn(line)


def _skip(out: Path, commit: str, exc: Exception, threshold: float) -> int:
    kind = _skip_kind(exc)
    progress.step(f"step: {commit[:12]} skip: {kind} failed: {exc}")
    _record(out, commit, "skip", f"{kind} failed: {exc}", threshold, kind)
    return SKIP


def add_measured(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """The options `kbisect bisect` and every step share: what is measured, where, and how
    a revision is judged (state.Options.measured_argv turns them back into argv)."""
    options.add_scenario(parser, required)
    options.add_where(parser)
    options.add_append(parser)
    options.add_set(parser)
    options.add_configs(parser)
    add = parser.add_argument
    add("--base-config", default="tinyconfig", help="base config for builds")
    add("--lower-is-better", action="store_true", help="the figure is better when lower")
    add(
        "--runs-min",
        type=options.count(2, 100),
        default=3,
        help="samples before deciding (default 3)",
    )
    add(
        "--runs-max",
        type=options.count(2, 1000),
        default=10,
        help="skip a revision after this (default 10)",
    )
    options.add_disturbance(parser)


def configure(parser: argparse.ArgumentParser) -> None:
    add_measured(parser)
    add = parser.add_argument
    add(
        "--threshold",
        type=options.positive,
        metavar="TPS",
        help="good above it (below it with --lower-is-better); unused with references",
    )
    where = f"${samples.STORE_ENV}, else one in the results dir"
    add("--store", type=Path, help=f"sample store (default {where})")
    ktest.add_booted_options(add)
    add(
        "--reference-good",
        metavar="REV",
        help="drift-aware: sample this good revision "
        "alongside, and decide on the position between it and --reference-bad",
    )
    add("--reference-bad", metavar="REV", help="the bad reference (with --reference-good)")
    add(
        "--reference-every",
        type=options.count(1, 1000),
        default=3,
        metavar="N",
        help="a reference boot after every N test boots (default 3)",
    )


def main(args: argparse.Namespace) -> int:
    """One step; returns git bisect's exit code, never raises."""
    try:
        code = step(args)
        liveness.check_driver()  # no verdict for a driver that died meanwhile
        return code
    except KbisectError as exc:
        progress.step(f"step: abort: {exc}")
        print(f"kbisect: {exc}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        progress.step("step: interrupted; aborting the bisect")
    except Exception:
        traceback.print_exc()
        progress.step("step: abort: unexpected error (a kbisect bug); see the traceback above")
    return ABORT


class _Parser(argparse.ArgumentParser):
    """A usage error must abort the bisect (128), not exit 2 (which git reads as bad)."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"bisect-step: {message}")


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def bisecting(where: Path) -> bool:
    """Is a `git bisect` in progress in the checkout at `where`?"""
    try:
        start = git.git(where, "rev-parse", "--path-format=absolute", "--git-path", "BISECT_START")
    except KbisectError:
        return False
    return Path(start).is_file()


def entry(argv: list[str]) -> int:
    """bisect/run's way in: parse argv, run one step; only ever 0, 1, 125 or 128. A step
    whose output reader is gone (EPIPE: the driver died) aborts, and stays quiet."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _sigterm)
    try:
        return _entry(argv)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):  # nothing left to flush at exit can fail again
            os.dup2(devnull, fd)
        return ABORT


def _entry(argv: list[str]) -> int:
    parser = _Parser(prog="bisect/run", description="one `git bisect run` step")
    configure(parser)
    try:
        args = parser.parse_args(argv)
    except UserError as exc:
        print(f"kbisect: {exc}", file=sys.stderr, flush=True)
        return ABORT
    if not bisecting(Path.cwd()):
        print(
            "kbisect: bisect/run: no `git bisect` in progress here; it runs under "
            "`git bisect run` (for one measurement: kbisect bisect-step)",
            file=sys.stderr,
            flush=True,
        )
        return ABORT
    progress.set_command(["kbisect", "bisect-step", *argv])  # what the logs say
    try:
        return main(args)
    finally:
        progress.set_command([])
