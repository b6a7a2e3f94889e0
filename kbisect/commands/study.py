"""`kbisect study`: the subcommand.

    kbisect study [STUDY | --kernels K1,K2,... --axis KEY=V1,V2 ...] --scenario S
                  [--boots N] [--target T] [--arch A] [--config NAME] [--yes] [--share I/N]
    kbisect study --resume [RUN_DIR]
    kbisect study plan STUDY [--runners N] [--runner-prefix LABEL]
    kbisect study merge DIR DIR... [--out DIR]

Everything that can be wrong with the input is found before the first build: the axes
and every cell's scenario, the kernels (tags, revisions, images, arches), the budget.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kbisect.commands import options
from kbisect.core.exceptions import EXIT_OK, UserError
from kbisect.study import budget, fanout, report, run, spec

ACTIONS = ("plan", "merge")


def given(args: argparse.Namespace) -> spec.Given:
    """The command line's part of a study."""
    return options.typed(
        spec.Given,
        args,
        configs=tuple(args.config),
        axes=tuple(args.axis),
        sets=tuple(args.set),
        budget_hours=args.budget,
    )


def plan(args: argparse.Namespace, words: list[str]) -> int:
    if len(words) != 1:
        raise UserError("usage: kbisect study plan STUDY [--runners N] [--runner-prefix LABEL]")
    study = spec.apply(spec.load(words[0]), given(args))
    all_cells, scens, _ = run.cells(study)
    parts = fanout.partition([budget.boot_seconds(s) for s in scens], args.runners)
    labels = [c.label(study.axes) for c in all_cells]
    print(json.dumps(fanout.matrix(words[0], parts, labels, args.runner_prefix)))
    return EXIT_OK


def merge(args: argparse.Namespace, words: list[str]) -> int:
    out = fanout.merge([Path(w) for w in words], args.out)
    print(f"report: {report.write(out)}")
    return EXIT_OK


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "words",
        nargs="*",
        metavar="STUDY | plan STUDY | merge DIR...",
        help=f"a study file or name (shipped: {', '.join(spec.names())})",
    )
    k = parser.add_argument_group("kernels")
    k.add_argument(
        "--kernels",
        help="revisions, tags or images, comma-separated; or a tag "
        "pattern such as 'v6.*' (version order); or trees by name, each at its HEAD, "
        "such as debian:6.1,debian:7.2",
    )
    k.add_argument(
        "--tree",
        help=options.TREE_HELP + "; a study file's [[kernels.list]] entries may name their own",
    )
    k.add_argument("--baseline", help="the kernel ratios are taken against (default: the first)")
    k.add_argument("--base-config", help="base config for builds (default tinyconfig)")
    options.add_configs(k)
    options.add_where(k)
    c = parser.add_argument_group("cells")
    options.add_scenario(c, required=False)
    c.add_argument(
        "--axis",
        type=options.kernel_line,
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="an axis over a scenario key, append=ARGS1,ARGS2, or PostgreSQL builds: "
        "postgres=SPEC[+PATCH...],... (repeatable)",
    )
    options.add_set(c, what=" (every cell)")
    options.add_append(c, what=" (every cell)")
    m = parser.add_argument_group("measurement")
    m.add_argument(
        "--boots",
        type=options.count(2, 1000),
        help="boots per kernel and cell (default: the study's)",
    )
    m.add_argument(
        "--retries",
        type=options.count(0, 20),
        help="retry a failed boot this many times (default 1)",
    )
    options.add_disturbance(m)
    m.add_argument(
        "--seed", type=options.seed, help="seed of the block order (default: random, recorded)"
    )
    m.add_argument(
        "--min-effect", type=options.fraction, help="smallest step called (default 0.02)"
    )
    m.add_argument(
        "--budget", type=options.hours, metavar="HOURS", help="refuse more without --yes"
    )
    m.add_argument("--yes", action="store_true", help="run even if over the budget")
    m.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    m.add_argument(
        "--name", type=options.name, help="the study's name without a study file (default: study)"
    )
    m.add_argument(
        "--share",
        type=options.share,
        metavar="I/N",
        help="run only share I of N (see `study plan`)",
    )
    m.add_argument(
        "--out", type=options.out_path, help="results dir (default: a new one in results/)"
    )
    options.add_resume(m, "study")
    f = parser.add_argument_group("plan")
    f.add_argument(
        "--runners", type=options.count(1, 1000), default=2, help="plan: machines to share among"
    )
    f.add_argument(
        "--runner-prefix",
        default="kbisect-metal-x86_64-",
        help="plan: runner label prefix; share I runs on PREFIX + I",
    )


def main(args: argparse.Namespace) -> int:
    words = list(args.words)
    if words and words[0] in ACTIONS:
        return plan(args, words[1:]) if words[0] == "plan" else merge(args, words[1:])
    if args.resume is not None:
        return run.resume(options.resume_dir(args))
    if len(words) > 1:
        raise UserError(f"one study file at a time, got {' '.join(words)}")
    study = spec.apply(spec.load(words[0]) if words else None, given(args))
    request = options.typed(run.Request, args, policy=options.retake_policy(args))
    return run.start(study, request)
