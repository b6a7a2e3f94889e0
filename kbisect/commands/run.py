"""`kbisect run`: boot a kernel on a target and run a pinned pgbench scenario there.

One boot is one sample (kbisect/measure/sample.py); `--runs N` takes N of them in a row.
"""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path

from kbisect.commands import options
from kbisect.core import paths, progress
from kbisect.measure import preempt, results, retake, sample
from kbisect.measure.record import Sample
from kbisect.scenario import scenario
from kbisect.stats import means
from kbisect.targets.base import Kernel


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", required=True, help="kernel image, or a build artifact dir")
    options.add_scenario(parser)
    options.add_append(parser)
    options.add_set(parser)
    parser.add_argument("--runs", type=options.count(1), default=1, help="boots (one sample each)")
    options.add_where(parser)
    options.add_disturbance(parser)
    parser.add_argument(
        "--out",
        type=options.out_path,
        help="results dir (default: a new one in results/; adds to one)",
    )


def going_on(line: str, out: Path, left: int) -> list[str]:
    """`line` (this run's command) taking the `left` boots still to do into `out`: its
    --out and --runs replaced."""
    words, kept = shlex.split(line), []
    skip = False
    for word in words:
        if skip or word.startswith(("--out=", "--runs=")):
            skip = False
            continue
        skip = word in ("--out", "--runs")
        if not skip:
            kept.append(word)
    return [*kept, "--out", str(out.resolve()), "--runs", str(left)]


def main(args: argparse.Namespace) -> int:
    kernel = Kernel.find(args.kernel)
    scen = scenario.load(args.scenario).with_overrides(args.set)
    with options.target(args) as target:
        target.validate(kernel)
        target.preflight(scen)
        need = paths.results_need(args.runs * (args.retakes + 1))
        results.check_out(args.out, "run", need, fresh=False)
        out = results.out_dir(args.out, "run", scen.name, fresh=False)
        target.warn_if_busy()
        policy = options.retake_policy(args)
        tps: list[float] = []
        taken: list[Sample] = []
        start = time.monotonic()
        for i in range(args.runs):
            progress.set_resume(going_on(progress.reproduce_line(), out, args.runs - i))
            left = progress.time_left(time.monotonic() - start, i, args.runs - i)
            progress.step(f"boot {i + 1} of {args.runs}{left and ', '}{left}")
            s = retake.take(target, sample.Boot(kernel, scen, out, args.append), policy)
            if s.status == retake.DISTURBED:
                print(f"boot {i + 1}: disturbed, not counted")
                continue
            tps.append(s.tps or 0.0)
            taken.append(s)
            print(f"boot {i + 1}: {s.tps:.1f} tps  ({model_note(s)})")
    summary = means.summarize(tps)
    print(
        f"{scen.name}: mean {summary.mean:.1f} tps over {summary.n} boot(s), "
        f"CV {summary.cv * 100:.1f}%  results: {out}"
    )
    for line in preempt.first_warnings(taken, [(None, "the boots")]):
        progress.warn(line)
    return 0


def model_note(s: Sample) -> str:
    """`preempt=lazy`, and what was asked when the boot did not get it (measure/preempt.py)."""
    model = s.fingerprint.get("preempt")
    note = f"preempt={model or 'unknown'}"
    if (record := s.preempt) and preempt.message("", record):
        note += f", asked {record['asked']}" + ("" if model is None else ": NOT it")
    return note
