"""`kbisect compare`: two sides measured fairly, a ratio with its uncertainty, a verdict.

A side is a kernel (a revision to build, or a prebuilt image) plus kernel command-line
extras plus scenario overrides, so "base vs base+revert", "preempt=none vs
preempt=full on one kernel" and "huge pages off vs on" are the same command. Boots are
interleaved in ABBA blocks so that drift (thermal, page cache, the host) hits both sides.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbisect import (
    build,
    clock,
    git,
    options,
    progress,
    report,
    results,
    sample,
    scenario,
    stats,
    tree,
    worktree,
)
from kbisect.exceptions import EXIT_NEGATIVE, EXIT_OK, BenchmarkError, BootError, UserError
from kbisect.targets import Kernel, Target


@dataclass
class Side:
    name: str  # "A" or "B"
    label: str
    append: str
    overrides: list[str]
    scen: scenario.Scenario
    kernel: Kernel | None = None
    rev: str | None = None  # a revision to build
    tps: list[float] = field(default_factory=list)
    failed: int = 0

    def describe(self) -> dict[str, Any]:
        m = (self.kernel.manifest if self.kernel else None) or {}
        kernel = {k: m.get(k) for k in ("commit", "describe", "subject", "config_hash")}
        kernel["image"] = str(self.kernel.image) if self.kernel else None
        return {
            "label": self.label,
            "kernel": kernel,
            "append": self.append,
            "overrides": self.overrides,
            "scenario_hash": self.scen.hash,
        }


def order(boots: int, scheme: str = "abba", seed: int | None = None) -> list[str]:
    """Boot order for `boots` per side: ABBA blocks, or pairs in random order."""
    if scheme == "random":
        rng = random.Random(seed)
        return [x for _ in range(boots) for x in rng.sample(["A", "B"], 2)]
    pairs = [["A", "B"] if i % 2 == 0 else ["B", "A"] for i in range(boots)]
    return [x for pair in pairs for x in pair]


def _side(name: str, args: argparse.Namespace, base_scen: scenario.Scenario) -> Side:
    """Side A or B from the shared options plus that side's own (`--append-a`, ...)."""
    x = name.lower()
    own_sets: list[str] = getattr(args, f"set_{x}")
    side = Side(
        name,
        getattr(args, f"label_{x}") or name,
        " ".join(filter(None, [args.append, getattr(args, f"append_{x}")])),
        own_sets,
        base_scen.with_overrides(args.set + own_sets),
    )
    image = getattr(args, f"kernel_{x}") or args.kernel
    if image:
        side.kernel = Kernel.find(image)
    return side


def _sides(args: argparse.Namespace, base_scen: scenario.Scenario) -> tuple[Side, Side]:
    return _side("A", args, base_scen), _side("B", args, base_scen)


def _resolve_revisions(args: argparse.Namespace, a: Side, b: Side) -> Path | None:
    if not (args.base or args.rev_b or args.revert):
        return None
    repo = tree.resolve(args.tree)
    if args.base and a.kernel is None:
        a.rev = git.rev_parse(repo, args.base)
        a.label = args.label_a or f"base {git.describe(repo, a.rev)}"
    if args.revert:
        if a.rev is None:
            raise UserError("--revert needs --base")
        commit = git.rev_parse(repo, args.revert)
        if not git.is_ancestor(repo, commit, a.rev):
            raise UserError(f"{args.revert} is not an ancestor of {args.base}: nothing to revert")
        progress.step(f"creating base + revert of {commit[:12]} in a scratch worktree")
        b.rev = worktree.revert_onto(repo, a.rev, commit)
        b.label = args.label_b or f"revert {commit[:12]} ({git.subject(repo, commit)[:50]})"
    elif args.rev_b:
        b.rev = git.rev_parse(repo, args.rev_b)
        b.label = args.label_b or git.describe(repo, b.rev)
    elif a.rev and b.kernel is None:
        b.rev = a.rev
    return repo


def validate(a: Side, b: Side, boots: int) -> None:
    if boots < 2:
        raise UserError(
            f"--boots {boots}: need at least 2 boots per side for a confidence interval"
        )
    same_kernel = (a.rev is not None and a.rev == b.rev) or (
        a.rev is None and b.rev is None and a.kernel == b.kernel
    )
    if same_kernel and a.append == b.append and a.scen.hash == b.scen.hash:
        raise UserError(
            "both sides are the same kernel, command line and scenario: nothing to compare"
        )
    if (a.kernel is None and a.rev is None) or (b.kernel is None and b.rev is None):
        raise UserError("each side needs a kernel: --kernel/--kernel-a/--kernel-b or --base")
    if a.scen.name != b.scen.name:
        raise UserError(f"mismatched scenarios: {a.scen.name} vs {b.scen.name}")


def _build(repo: Path, side: Side, target: Target, args: argparse.Namespace) -> None:
    if side.kernel is not None or side.rev is None:
        return
    progress.step(f"side {side.name}: building {side.rev[:12]} ({side.label})")
    req = build.Request(
        tree=repo,
        rev=side.rev,
        arch=target.arch,
        configs=tuple(args.config),
        base=args.base_config,
    )
    result = build.build(req)
    side.kernel = Kernel(result.image, result.manifest)


def _measure(
    target: Target, sides: dict[str, Side], plan: list[str], out: Path, retries: int = 1
) -> None:
    """Boot in plan order; a failed boot is recorded, kept out of the statistics and
    retried in place (up to `retries` times) so both sides keep their boot count."""
    for i, name in enumerate(plan, 1):
        side = sides[name]
        assert side.kernel is not None
        for attempt in range(retries + 1):
            again = f", retry {attempt}" if attempt else ""
            progress.step(f"boot {i}/{len(plan)}: side {name} ({side.label}){again}")
            try:
                s = sample.take(
                    target, side.kernel, side.scen, append=side.append, out_dir=out, label=name
                )
            except (BootError, BenchmarkError) as exc:
                side.failed += 1
                progress.warn(f"side {name} boot {i} failed, kept out of the statistics: {exc}")
                continue
            side.tps.append(float(s["tps"]))
            progress.step(f"side {name}: {s['tps']:.1f} tps")
            break


def sample_files(out: Path) -> dict[str, list[str]]:
    """This run's sample files per side, relative to the run dir."""
    files: dict[str, list[str]] = {}
    for path in results.sample_paths(out):
        label = json.loads(path.read_text()).get("label") or "?"
        files.setdefault(label, []).append(str(path.relative_to(out)))
    return files


def summary(
    a: Side,
    b: Side,
    plan: list[str],
    verdict: stats.Verdict,
    args: argparse.Namespace,
    duration: float,
    files: dict[str, list[str]],
) -> dict[str, Any]:
    return {
        "version": 1,
        "kind": "compare",
        "command": progress.reproduce_line(),
        "created": clock.utc_now(),
        "scenario": {"name": a.scen.name, "hash": a.scen.hash},
        "sides": {
            "A": {**a.describe(), "samples": files.get("A", [])},
            "B": {**b.describe(), "samples": files.get("B", [])},
        },
        "order": plan,
        "failed": {"A": a.failed, "B": b.failed},
        "stats": {"A": verdict.a.as_dict(), "B": verdict.b.as_dict()},
        "verdict": verdict.as_dict(),
        "min_effect": args.min_effect,
        "confidence": 0.95,
        "duration_s": round(duration, 1),
    }


def print_table(a: Side, b: Side, verdict: stats.Verdict) -> None:
    print(
        f"{'side':<4} {'label':<44} {'n':>3} {'mean':>9} {'median':>9} {'CV':>6} "
        f"{'min':>9} {'max':>9}"
    )
    for side, s in ((a, verdict.a), (b, verdict.b)):
        print(
            f"{side.name:<4} {side.label[:44]:<44} {s.n:>3} {s.mean:>9.1f} {s.median:>9.1f} "
            f"{s.cv * 100:>5.1f}% {s.min:>9.1f} {s.max:>9.1f}"
        )
    r = verdict.ratio
    print(f"B/A = {r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}] (95% CI): {verdict.kind}")
    for w in verdict.warnings:
        progress.warn(w)


def configure(parser: argparse.ArgumentParser) -> None:
    k = parser.add_argument_group("kernels")
    k.add_argument("--tree", help="kernel git tree (default: the embedded 6.12 tree)")
    k.add_argument("--base", help="revision for side A (and B unless --revert/--rev-b)")
    k.add_argument("--revert", metavar="COMMIT", help="side B = base with COMMIT reverted")
    k.add_argument("--rev-b", help="revision for side B")
    k.add_argument("--kernel", help="one prebuilt image (or build dir) for both sides")
    k.add_argument("--kernel-a", help="prebuilt image for side A")
    k.add_argument("--kernel-b", help="prebuilt image for side B")
    options.add_configs(k, " for both builds")
    k.add_argument("--base-config", default="tinyconfig", help="base config for builds")
    options.add_where(k)
    s = parser.add_argument_group("sides")
    options.add_append(s, what=", both sides")
    options.add_append(s, "-a", ", side A")
    options.add_append(s, "-b", ", side B")
    options.add_set(s, what=" (both sides)")
    options.add_set(s, "-a", " (side A)")
    options.add_set(s, "-b", " (side B)")
    s.add_argument("--label-a", help="name for side A in the report")
    s.add_argument("--label-b", help="name for side B in the report")
    m = parser.add_argument_group("measurement")
    options.add_scenario(m)
    m.add_argument("--boots", type=int, help="boots per side (default: the scenario's)")
    m.add_argument("--order", choices=["abba", "random"], default="abba")
    m.add_argument(
        "--retries",
        type=int,
        default=1,
        help="retry a failed boot this many times (default 1); failures are kept",
    )
    m.add_argument("--seed", type=int, help="seed for --order random")
    m.add_argument(
        "--min-effect",
        type=float,
        default=0.02,
        help="smallest change called a regression/improvement (default 0.02 = 2%%)",
    )
    m.add_argument("--out", type=Path, help="results dir (default: a new one in results/)")


def main(args: argparse.Namespace) -> int:
    base_scen = scenario.load(args.scenario)
    a, b = _sides(args, base_scen)
    repo = _resolve_revisions(args, a, b)
    boots = args.boots or int(base_scen.data.get("compare", {}).get("boots", 3))
    validate(a, b, boots)
    with options.target(args) as target:
        target.preflight()
        for side in (a, b):
            if side.kernel is not None:
                target.validate(side.kernel)
        start = time.monotonic()
        if repo is not None:
            _build(repo, a, target, args)
            _build(repo, b, target, args)
        plan = order(boots, args.order, args.seed)
        out = args.out or results.new_run_dir("compare", base_scen.name)
        progress.step(f"{len(plan)} boots, interleaved ({args.order}); results in {out}")
        _measure(target, {"A": a, "B": b}, plan, out, args.retries)
        where = target.describe()
    if len(a.tps) < 2 or len(b.tps) < 2:
        raise BootError(f"too many failed boots (A: {a.failed}, B: {b.failed}); see {out}")
    verdict = stats.verdict(a.tps, b.tps, min_effect=args.min_effect)
    data = summary(a, b, plan, verdict, args, time.monotonic() - start, sample_files(out))
    results.write_summary(out, {**data, "target": where})
    print_table(a, b, verdict)
    print(f"report: {report.render_compare(out)}")
    return EXIT_NEGATIVE if verdict.kind == "regression" else EXIT_OK
