"""`kbisect bisect-step`: one `git bisect run` step, answered in git's exit codes.

git runs bisect/run in the checkout under bisection, and bisect/run execs this. The
step builds the checked-out revision in place, then boots and measures it until
`sequential.decide()` gives a verdict against the threshold, and exits:

    0 good · 1 bad · 125 skip (build, boot or benchmark failed, or no clear verdict
    after --runs-max) · 128 abort the whole bisect (bad options, a missing tool,
    broken infrastructure, a bug).

A build or boot failure is never "bad". `main()` returns these codes itself: they are
git's protocol, not kbisect's usual exit codes. The samples and their store live in
bisect_state.py.
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

from kbisect import arch as arch_mod
from kbisect import atomic, build, git, progress, scenario, sequential, tree
from kbisect import bisect_state as state
from kbisect.exceptions import BenchmarkError, BootError, BuildError, KbisectError, UserError

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
            tps, policy.threshold, higher_is_better=policy.higher_is_better,
            runs_min=policy.runs_min, runs_max=policy.runs_max,
        )
        if d.verdict != "more":
            return d
        if len(tps) >= policy.runs_max:
            return sequential.Decision("unclear", f"still unclear after {len(tps)} samples",
                                       d.mean, d.low, d.high, d.n)
        tps.append(draw())


def judge(ctx: state.Context, policy: Policy, target: state.Target
          ) -> sequential.Decision:
    """The verdict on a built revision; raises BootError/BenchmarkError to skip it."""
    tps, failures = state.stored(target.out)
    if failures:
        raise BootError(f"stored failure, not retried: {failures[-1]}")
    if tps:
        progress.step(f"reusing {len(tps)} stored sample(s) of {target.commit[:12]}")
    return sample_until(tps, lambda: state.draw(ctx, target), policy)


def top_up(ctx: state.Context, target: state.Target, n: int) -> list[float]:
    """At least n samples of target (stored ones count); raises BootError if one failed."""
    tps, failures = state.stored(target.out)
    if failures:
        raise BootError(f"{target.commit[:12]}: stored failure, not retried: {failures[-1]}")
    while len(tps) < n:
        tps.append(state.draw(ctx, target))
    return tps


def build_here(top: Path, arch: str, configs: tuple[str, ...]) -> build.BuildResult:
    """Build the checkout at top as it is (in place; cached per commit)."""
    return build.build(build.Request(top, "HEAD", arch=arch_mod.get(arch), configs=configs,
                                     in_place=True))


def describe(commit: str, d: sequential.Decision, policy: Policy) -> str:
    """The one line that logs a decision with its numbers."""
    return (f"step: {commit[:12]} {d.verdict}: n={d.n} mean {d.mean:.1f} tps, "
            f"CI [{d.low:.1f}, {d.high:.1f}] vs threshold {policy.threshold:.1f} ({d.reason})")


def _check_driver() -> None:
    pid = os.environ.get(DRIVER_ENV)
    if not pid:
        return
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        raise UserError(f"the kbisect bisect driver (pid {pid}) is gone; "
                        "continue with `kbisect bisect --resume`") from None


def _record(out: Path, commit: str, verdict: str, reason: str, code: int,
            d: sequential.Decision | None = None, threshold: float | None = None) -> None:
    data: dict[str, object] = {"commit": commit, "verdict": verdict, "reason": reason,
                               "exit": code, "threshold": threshold}
    if d is not None:
        data.update(n=d.n, mean=d.mean, low=d.low, high=d.high)
    atomic.write_json(out / "step.json", data)


def step(args: argparse.Namespace) -> int:
    _check_driver()
    policy = Policy(args.threshold, not args.lower_is_better, args.runs_min, args.runs_max)
    policy.check()
    top = tree.check_kernel_tree(Path.cwd())
    ctx = state.Context(scenario.load(args.scenario), args.append, args.arch)
    store = state.store_for(args.store, top, ctx, tuple(args.config))
    commit = git.rev_parse(top, "HEAD")
    out = state.commit_dir(store, commit)
    progress.step(f"step: {commit[:12]} {git.subject(top, commit)}")
    try:
        built = build_here(top, args.arch, tuple(args.config))
        d = judge(ctx, policy, state.Target(commit, built.image, built.manifest, out))
    except (BuildError, BootError, BenchmarkError) as exc:
        kind = "build" if isinstance(exc, BuildError) else "boot"
        progress.step(f"step: {commit[:12]} skip: {exc}")
        _record(out, commit, "skip", f"{kind} failed: {exc}", SKIP, threshold=policy.threshold)
        return SKIP
    code = EXIT_FOR[d.verdict]
    progress.step(describe(commit, d, policy))
    _record(out, commit, {GOOD: "good", BAD: "bad"}.get(code, "skip"), d.reason, code, d,
            policy.threshold)
    return code


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", required=True, help="scenario name or .toml file")
    parser.add_argument("--threshold", type=float, required=True, metavar="TPS",
                        help="good above it (below it with --lower-is-better)")
    parser.add_argument("--lower-is-better", action="store_true",
                        help="the figure is better when lower")
    parser.add_argument("--append", default="", help="kernel command line extras")
    parser.add_argument("--runs-min", type=int, default=3, help="samples before deciding")
    parser.add_argument("--runs-max", type=int, default=10, help="give up (skip) after this")
    parser.add_argument("--config", action="append", default=[], metavar="NAME",
                        help="extra fragment from kernel-configs/ (repeatable)")
    parser.add_argument("--arch", default="x86_64", help="x86_64 or arm64")
    parser.add_argument("--store", type=Path, help="sample store (default: "
                        f"${state.STORE_ENV}, else one under the results dir)")


def main(args: argparse.Namespace) -> int:
    """One step; returns git bisect's exit code, never raises."""
    try:
        return step(args)
    except KbisectError as exc:
        progress.step(f"step: abort: {exc}")
        print(f"kbisect: {exc}", flush=True)
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


def entry(argv: list[str]) -> int:
    """bisect/run's entry: parse argv and run one step; only ever 0, 1, 125 or 128."""
    signal.signal(signal.SIGTERM, _sigterm)
    parser = _Parser(prog="bisect/run", description=__doc__.splitlines()[0] if __doc__ else None)
    configure(parser)
    try:
        args = parser.parse_args(argv)
    except UserError as exc:
        print(f"kbisect: {exc}", file=sys.stderr, flush=True)
        return ABORT
    return main(args)
