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
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import NoReturn

from kbisect import atomic, build, git, options, progress, scenario, sequential, tree
from kbisect.arch import Arch
from kbisect.bisect import samples
from kbisect.exceptions import BenchmarkError, BootError, BuildError, KbisectError, UserError
from kbisect.targets import Kernel

GOOD, BAD, SKIP, ABORT = 0, 1, 125, 128
EXIT_FOR = {"good": GOOD, "bad": BAD, "unclear": SKIP}
DRIVER_ENV = "KBISECT_BISECT_DRIVER"  # pid of the `kbisect bisect` that started git


@dataclass(frozen=True)
class Policy:
    """How a revision is judged: against a threshold, with sequential sampling."""

    threshold: float
    higher_is_better: bool = True
    runs_min: int = 3
    runs_max: int = 10

    def check(self) -> None:
        if not self.threshold > 0:
            raise UserError(f"--threshold {self.threshold}: must be a positive tps figure")
        if not 2 <= self.runs_min <= self.runs_max:
            raise UserError(
                f"--runs-min {self.runs_min} --runs-max {self.runs_max}: "
                "need 2 <= runs-min <= runs-max"
            )


def sample_until(
    tps: list[float], draw: Callable[[], float], policy: Policy
) -> sequential.Decision:
    """Add samples (draw() each) to `tps` until the decision is not "more"."""
    while True:
        d = sequential.decide(
            tps,
            policy.threshold,
            higher_is_better=policy.higher_is_better,
            runs_min=policy.runs_min,
            runs_max=policy.runs_max,
        )
        if d.verdict != "more":
            return d
        if len(tps) >= policy.runs_max:
            return sequential.Decision(
                "unclear", f"still unclear after {len(tps)} samples", d.mean, d.low, d.high, d.n
            )
        tps.append(draw())


def judge(ctx: samples.Context, policy: Policy, rev: samples.Revision) -> sequential.Decision:
    """The verdict on a built revision; BootError/BenchmarkError (skip it) if a boot failed."""
    tps, failures = samples.stored(rev.out)
    if failures and not tps:
        raise BootError(f"stored failure, not retried: {failures[-1]}")
    if tps:
        progress.step(f"reusing {len(tps)} stored sample(s) of {rev.commit[:12]}")
    return sample_until(tps, lambda: samples.draw(ctx, rev), policy)


def build_here(
    top: Path, arch: Arch, configs: tuple[str, ...], base: str = "tinyconfig"
) -> build.BuildResult:
    """Build the checkout at top as it is (in place; cached per commit)."""
    req = build.Request(top, "HEAD", arch=arch, configs=configs, base=base, in_place=True)
    return build.build(req)


def describe(commit: str, d: sequential.Decision) -> str:
    """The one line that logs a decision with its numbers."""
    return f"step: {commit[:12]} {d.verdict}: {d.reason}"


def _check_driver() -> None:
    pid = os.environ.get(DRIVER_ENV)
    if not pid:
        return
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        raise UserError(
            f"the kbisect bisect driver (pid {pid}) is gone; "
            "continue with `kbisect bisect --resume`"
        ) from None


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
    _check_driver()
    policy = Policy(args.threshold, not args.lower_is_better, args.runs_min, args.runs_max)
    policy.check()
    top = tree.check_kernel_tree(Path.cwd())
    with options.target(args) as target:
        scen = scenario.load(args.scenario).with_overrides(args.set)
        ctx = samples.Context(scen, args.append, target)
        store = samples.store_for(args.store, top, ctx, tuple(args.config), args.base_config)
        commit = git.rev_parse(top, "HEAD")
        out = samples.commit_dir(store, commit)
        progress.step(f"step: {commit[:12]} {git.subject(top, commit)}")
        try:
            target.preflight()
            built = build_here(top, target.arch, tuple(args.config), args.base_config)
            rev = samples.Revision(commit, Kernel(built.image, built.manifest), out)
            d = judge(ctx, policy, rev)
        except (BuildError, BootError, BenchmarkError) as exc:
            return _skip(out, commit, exc, policy.threshold)
    code = EXIT_FOR[d.verdict]
    progress.step(describe(commit, d))
    verdict = {GOOD: "good", BAD: "bad"}.get(code, "skip")
    skip = "unclear" if code == SKIP else None
    _record(out, commit, verdict, d.reason, policy.threshold, skip, d)
    return code


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


def configure(parser: argparse.ArgumentParser) -> None:
    add_measured(parser)
    parser.add_argument(
        "--threshold",
        type=options.positive,
        required=True,
        metavar="TPS",
        help="good above it (below it with --lower-is-better)",
    )
    where = f"${samples.STORE_ENV}, else one in the results dir"
    parser.add_argument("--store", type=Path, help=f"sample store (default {where})")


def main(args: argparse.Namespace) -> int:
    """One step; returns git bisect's exit code, never raises."""
    try:
        return step(args)
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
    """bisect/run's way in: parse argv, run one step; only ever 0, 1, 125 or 128."""
    signal.signal(signal.SIGTERM, _sigterm)
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
