"""`kbisect bisect`: find the commit that made a scenario slower, through `git bisect run`.

Phases, each saved in the run's state.json so that `--resume` continues after Ctrl-C,
a kill or a reboot:

1. endpoints: check the tree and the revisions, measure both endpoints and refuse
   unless good is significantly better than bad (stats.verdict); pick the threshold
   (given, else the geometric mean of the two endpoint means).
2. bisecting: in a scratch worktree (never the user's checkout), `git bisect start B G`
   and `git bisect run bisect/run ...`; the bisect log is saved before every step and
   replayed (`git bisect replay`) on resume; stored samples are reused.
3. recheck: the first bad commit against its parent, with fresh samples, stats.verdict.
4. done: report.md, summary.json, bisect.png. Exit 0 if the re-check confirms the
   culprit, 1 if it does not (the answer is then suspect, and the report says so).
"""

from __future__ import annotations

import argparse
import fcntl
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kbisect import bisect_report, bisect_step, git, paths, progress, results, runner
from kbisect import bisect_state as state
from kbisect import scenario, stats, tree, worktree
from kbisect.exceptions import (
    EXIT_NEGATIVE,
    EXIT_OK,
    BenchmarkError,
    BootError,
    InfraError,
    UserError,
)

SLOT = "bisect"
RUN_SCRIPT = paths.CHECKOUT / "bisect" / "run"
RECHECK_INDEX = 1000  # fake measure only: re-check samples are fresh draws


class BadEndpoints(UserError):
    """The good and bad revisions cannot be bisected between."""


class BisectStopped(InfraError):
    """`git bisect run` stopped without an answer (a step aborted it)."""


@dataclass(frozen=True)
class Options:
    tree: str | None
    good: str
    bad: str
    scenario: str
    threshold: float | None = None
    higher_is_better: bool = True
    append: str = ""
    runs_min: int = 3
    runs_max: int = 10
    recheck_samples: int = 8
    configs: tuple[str, ...] = ()
    arch: str = "x86_64"

    def argv(self) -> list[str]:
        """The `kbisect bisect` arguments that reproduce this bisection."""
        out = ["bisect", "--tree", self.tree or "default", "--good", self.good,
               "--bad", self.bad, "--scenario", self.scenario]
        if self.threshold is not None:
            out += ["--threshold", f"{self.threshold:g}"]
        if not self.higher_is_better:
            out.append("--lower-is-better")
        if self.append:
            out += ["--append", self.append]
        out += ["--runs-min", str(self.runs_min), "--runs-max", str(self.runs_max),
                "--recheck-samples", str(self.recheck_samples), "--arch", self.arch]
        for c in self.configs:
            out += ["--config", c]
        return out

    def check(self) -> None:
        if not 2 <= self.runs_min <= self.runs_max:
            raise UserError(f"--runs-min {self.runs_min} --runs-max {self.runs_max}: "
                            "need 2 <= runs-min <= runs-max")
        if self.recheck_samples < 3:
            raise UserError(f"--recheck-samples {self.recheck_samples}: need at least 3")
        if self.threshold is not None and not self.threshold > 0:
            raise UserError(f"--threshold {self.threshold}: must be a positive tps figure")


# --- pure command builders -----------------------------------------------------------


def start_command(wt: Path, bad: str, good: str) -> list[str]:
    return ["git", "-C", str(wt), "bisect", "start", bad, good]


def run_command(wt: Path, script: Path, opts: Options, threshold: float, store: Path,
                scen: str) -> list[str]:
    cmd = ["git", "-C", str(wt), "bisect", "run", str(script), "--scenario", scen,
           "--threshold", repr(threshold), "--runs-min", str(opts.runs_min),
           "--runs-max", str(opts.runs_max), "--arch", opts.arch, "--store", str(store)]
    if not opts.higher_is_better:
        cmd.append("--lower-is-better")
    if opts.append:
        cmd += ["--append", opts.append]
    for c in opts.configs:
        cmd += ["--config", c]
    return cmd


def replay_command(wt: Path, log: Path) -> list[str]:
    return ["git", "-C", str(wt), "bisect", "replay", str(log)]


def reset_command(wt: Path) -> list[str]:
    return ["git", "-C", str(wt), "bisect", "reset"]


# --- phase 1: endpoints --------------------------------------------------------------


def validate(opts: Options) -> tuple[Path, str, str]:
    """The tree's top level and the full ids of good and bad, or a one-line UserError."""
    opts.check()
    top = tree.resolve(opts.tree)
    good, bad = git.rev_parse(top, opts.good), git.rev_parse(top, opts.bad)
    if good == bad:
        raise BadEndpoints(f"--good {opts.good} and --bad {opts.bad} are the same commit "
                           f"{good[:12]}")
    if git.is_ancestor(top, bad, good):
        raise BadEndpoints(f"good and bad are swapped: --bad {opts.bad} is an ancestor of "
                           f"--good {opts.good}")
    if not git.is_ancestor(top, good, bad):
        raise BadEndpoints(f"--good {opts.good} is not an ancestor of --bad {opts.bad}")
    return top, good, bad


def target(top: Path, commit: str, opts: Options, out: Path, index_base: int = 0
           ) -> state.Target:
    """Build commit in the driver's worktree (in place, cached per commit)."""
    wt = worktree.checkout(top, commit, SLOT)
    built = bisect_step.build_here(wt, opts.arch, opts.configs)
    return state.Target(commit, built.image, built.manifest, out, index_base)


def interleaved(ctx: state.Context, a: state.Target, b: state.Target, n: int
                ) -> tuple[list[float], list[float]]:
    """At least n samples of each, taken alternately (stored samples count)."""
    ta: list[float] = []
    tb: list[float] = []
    for k in range(1, n + 1):
        ta = bisect_step.top_up(ctx, a, k)
        tb = bisect_step.top_up(ctx, b, k)
    return ta, tb


def measure_endpoints(ctx: state.Context, top: Path, store: Path, opts: Options,
                      good: str, bad: str) -> tuple[list[float], list[float], stats.Verdict]:
    progress.step(f"measuring the endpoints: good {good[:12]}, bad {bad[:12]}")
    g = target(top, good, opts, state.commit_dir(store, good))
    b = target(top, bad, opts, state.commit_dir(store, bad))
    n = opts.runs_min
    while True:
        tg, tb = interleaved(ctx, g, b, n)
        v = stats.verdict(tg, tb, higher_is_better=opts.higher_is_better)
        if v.kind == "regression" or n >= opts.runs_max:
            return tg, tb, v
        n += 1


def check_endpoints(v: stats.Verdict, opts: Options) -> None:
    if v.kind == "regression":
        return
    r = v.ratio
    numbers = (f"good {v.a.mean:.1f} tps (n={v.a.n}), bad {v.b.mean:.1f} tps (n={v.b.n}), "
               f"ratio {r.ratio:.3f} [{r.low:.3f}, {r.high:.3f}]")
    if v.kind == "improvement":
        raise BadEndpoints(f"bad is better than good: {numbers}; swapped --good/--bad?")
    raise BadEndpoints(f"the endpoints do not differ significantly: {numbers}")


def pick_threshold(opts: Options, good_mean: float, bad_mean: float) -> tuple[float, str]:
    if opts.threshold is None:
        return math.sqrt(good_mean * bad_mean), "geometric mean of the endpoint means"
    low, high = sorted((good_mean, bad_mean))
    if not low < opts.threshold < high:
        raise BadEndpoints(f"--threshold {opts.threshold:g} is outside the endpoints' range "
                           f"({low:.1f} .. {high:.1f} tps)")
    return opts.threshold, "given"


# --- phase 2: git bisect run ---------------------------------------------------------


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


def bisect_log(wt: Path) -> str:
    return git.git(wt, "bisect", "log", check=False)


def _reset(wt: Path) -> None:
    if (wt / ".git").exists():
        runner.run(reset_command(wt), check=False, capture=True)


def _stop_reason(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    for line in reversed(lines):
        if line.startswith("kbisect: ") or "bisect run failed" in line:
            return line.removeprefix("kbisect: ").strip()
    return lines[-1].strip() if lines else "no output"


def run_bisect(ctx: state.Context, top: Path, run_dir: Path, data: dict[str, Any],
               opts: Options) -> state.Outcome:
    wt = worktree.checkout(top, data["bad"], SLOT)
    _reset(wt)
    if data.get("bisect_log"):
        replay = run_dir / "bisect-replay.log"
        replay.write_text(data["bisect_log"])
        progress.step(f"replaying the saved bisect log ({replay})")
        runner.run(replay_command(wt, replay), capture=True)
    else:
        runner.run(start_command(wt, data["bad"], data["good"]), capture=True)
    if not state.parse_log(bisect_log(wt)).finished:
        scen = opts.scenario if not Path(opts.scenario).is_file() else str(
            Path(opts.scenario).resolve())
        log = run_dir / "bisect-run.log"
        if not log.exists():
            log.write_text(progress.log_header(opts.argv()))
        progress.step(f"git bisect run in {wt} (log: {log})")
        runner.run(run_command(wt, RUN_SCRIPT, opts, data["threshold"], Path(data["store"]),
                               scen),
                   cwd=wt, log=log, env={bisect_step.DRIVER_ENV: str(os.getpid())},
                   on_line=_Watch(wt, run_dir, data), check=False)
        if not state.parse_log(bisect_log(wt)).finished:
            data["bisect_log"] = bisect_log(wt)
            state.save(run_dir, data)
            raise BisectStopped(f"git bisect run stopped: {_stop_reason(log)} (log: {log}); "
                                f"fix it, then: kbisect bisect --resume {run_dir}")
    data["bisect_log"] = bisect_log(wt)
    _reset(wt)
    return state.parse_log(data["bisect_log"])


# --- phase 3: re-check ---------------------------------------------------------------


def recheck_pair(top: Path, outcome: state.Outcome) -> tuple[str, str]:
    """(last good, first bad) to re-check: the culprit and its first parent, or the
    newest good and bad marks when git could only name a range."""
    if outcome.first_bad:
        return git.rev_parse(top, f"{outcome.first_bad}^"), outcome.first_bad
    goods = [m.commit for m in outcome.marks if m.verdict == "good"]
    bads = [m.commit for m in outcome.marks if m.verdict == "bad"]
    return goods[-1], bads[-1]


def recheck(ctx: state.Context, top: Path, run_dir: Path, opts: Options,
            outcome: state.Outcome) -> dict[str, Any]:
    parent, culprit = recheck_pair(top, outcome)
    progress.step(f"re-checking {culprit[:12]} against {parent[:12]}, "
                  f"{opts.recheck_samples} fresh samples each")
    out = run_dir / "recheck"
    p = target(top, parent, opts, out / parent, RECHECK_INDEX)
    c = target(top, culprit, opts, out / culprit, RECHECK_INDEX)
    result: dict[str, Any] = {"parent": parent, "culprit": culprit}
    try:
        tp, tc = interleaved(ctx, p, c, opts.recheck_samples)
    except (BootError, BenchmarkError) as exc:
        return {**result, "confirmed": False, "error": str(exc)}
    v = stats.verdict(tp, tc, higher_is_better=opts.higher_is_better)
    r = v.ratio
    return {**result, "parent_tps": tp, "culprit_tps": tc, "kind": v.kind,
            "ratio": r.ratio, "low": r.low, "high": r.high, "method": r.method,
            "warnings": list(v.warnings), "confirmed": v.kind == "regression"}


def recheck_line(rc: dict[str, Any]) -> str:
    if "error" in rc:
        return f"re-check failed: {rc['error']}"
    word = "confirmed" if rc["confirmed"] else "NOT CONFIRMED"
    mean = sum(rc["parent_tps"]) / len(rc["parent_tps"])
    cmean = sum(rc["culprit_tps"]) / len(rc["culprit_tps"])
    return (f"re-check: {mean:.1f} -> {cmean:.1f} tps, ratio {rc['ratio']:.3f} "
            f"[{rc['low']:.3f}, {rc['high']:.3f}] (95% CI): {rc['kind']}, {word}")


# --- the driver ----------------------------------------------------------------------


@contextmanager
def _exclusive(top: Path) -> Iterator[None]:
    lock = worktree.path_for(top, SLOT).with_suffix(".driver.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"another kbisect bisect is running on {top}") from None
        yield


def _new_state(opts: Options, top: Path, good: str, bad: str, store: Path) -> dict[str, Any]:
    return {"version": 1, "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "options": {**asdict(opts), "configs": list(opts.configs)}, "tree": str(top),
            "good": good, "bad": bad, "store": str(store), "phase": "endpoints",
            "threshold": None, "bisect_log": ""}


def drive(opts: Options, run_dir: Path | None, data: dict[str, Any] | None) -> int:
    top, good, bad = validate(opts)
    ctx = state.Context(scenario.load(opts.scenario), opts.append, opts.arch)
    with _exclusive(top):
        if run_dir is None or data is None:
            store = state.store_for(None, top, ctx, opts.configs)
            run_dir = results.new_run_dir("bisect", ctx.scen.name)
            data = _new_state(opts, top, good, bad, store)
            state.save(run_dir, data)
        progress.step(f"bisect run dir: {run_dir}")
        try:
            return _phases(ctx, top, run_dir, data, opts)
        except KeyboardInterrupt:
            progress.step(f"interrupted; continue with: kbisect bisect --resume {run_dir}")
            raise


def _phases(ctx: state.Context, top: Path, run_dir: Path, data: dict[str, Any],
            opts: Options) -> int:
    if data["phase"] == "endpoints":
        tg, tb, v = measure_endpoints(ctx, top, Path(data["store"]), opts, data["good"],
                                      data["bad"])
        data["endpoints"] = {"good": tg, "bad": tb, "kind": v.kind, "ratio": v.ratio.ratio,
                             "low": v.ratio.low, "high": v.ratio.high}
        try:
            check_endpoints(v, opts)
            data["threshold"], data["threshold_source"] = pick_threshold(opts, v.a.mean,
                                                                         v.b.mean)
        except BadEndpoints as exc:
            state.save(run_dir, {**data, "phase": "done", "refused": str(exc)})
            raise
        progress.step(f"threshold {data['threshold']:.1f} tps ({data['threshold_source']})")
        data["phase"] = "bisecting"
        state.save(run_dir, data)
    if data["phase"] == "bisecting":
        run_bisect(ctx, top, run_dir, data, opts)
        data["phase"] = "recheck"
        state.save(run_dir, data)
    outcome = state.parse_log(data["bisect_log"])
    if data["phase"] == "recheck":
        data["recheck"] = recheck(ctx, top, run_dir, opts, outcome)
        data["phase"] = "done"
    confirmed = bool(data["recheck"]["confirmed"])
    data["exit"] = EXIT_OK if confirmed else EXIT_NEGATIVE
    state.save(run_dir, data)
    report = bisect_report.write(run_dir, bisect_report.summary(top, data, outcome,
                                                                opts.argv()))
    _print_answer(top, outcome, data["recheck"], report)
    return int(data["exit"])


def _print_answer(top: Path, outcome: state.Outcome, rc: dict[str, Any], report: Path) -> None:
    if outcome.first_bad:
        print(f"first bad commit: {outcome.first_bad} {git.subject(top, outcome.first_bad)}")
    else:
        print(f"first bad commit: one of {len(outcome.candidates)} (skipped commits hide it):")
        for c in outcome.candidates:
            print(f"  {c} {git.subject(top, c)}")
    print(recheck_line(rc))
    if not rc["confirmed"]:
        progress.warn("the re-check does NOT confirm this culprit: treat it as suspect "
                      "(noise, a flaky boot, or a threshold too close to one side)")
    print(f"report: {report}")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tree", help="kernel git tree (default: the embedded 6.12 tree)")
    parser.add_argument("--good", help="a revision with the good (fast) figure")
    parser.add_argument("--bad", help="a later revision with the bad (slow) figure")
    parser.add_argument("--scenario", help="scenario name or .toml file")
    parser.add_argument("--threshold", type=float, metavar="TPS",
                        help="good above, bad below (default: geometric mean of the endpoints)")
    parser.add_argument("--lower-is-better", action="store_true",
                        help="the figure is better when lower")
    parser.add_argument("--append", default="", help="kernel command line extras")
    parser.add_argument("--runs-min", type=int, default=3, help="samples before deciding")
    parser.add_argument("--runs-max", type=int, default=10, help="skip a revision after this")
    parser.add_argument("--recheck-samples", type=int, default=8,
                        help="fresh samples of the culprit and its parent (default 8)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME",
                        help="extra fragment from kernel-configs/ (repeatable)")
    parser.add_argument("--arch", default="x86_64", help="x86_64 or arm64")
    parser.add_argument("--resume", nargs="?", const="", metavar="RUN_DIR",
                        help="continue an interrupted bisect (default: the newest unfinished)")


def options_from_args(args: argparse.Namespace) -> Options:
    missing = [f"--{n}" for n in ("good", "bad", "scenario") if not getattr(args, n)]
    if missing:
        raise UserError(f"missing {', '.join(missing)} (or use --resume)")
    return Options(args.tree, args.good, args.bad, args.scenario, args.threshold,
                   not args.lower_is_better, args.append, args.runs_min, args.runs_max,
                   args.recheck_samples, tuple(args.config), args.arch)


def main(args: argparse.Namespace) -> int:
    if args.resume is None:
        return drive(options_from_args(args), None, None)
    run_dir = Path(args.resume) if args.resume else state.newest_unfinished(paths.results_dir())
    data = state.load(run_dir)
    if data.get("phase") == "done":
        raise UserError(f"{run_dir}: this bisect has finished (see its report.md)")
    opts = Options(**{**data["options"], "configs": tuple(data["options"]["configs"])})
    progress.step(f"resuming {run_dir} ({data['phase']}); its own options apply")
    return drive(opts, run_dir, data)
