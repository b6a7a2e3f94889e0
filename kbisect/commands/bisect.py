"""`kbisect bisect`'s command line: its options, and turning them into request.Options
(paths made absolute and the target's arch resolved once, so that --resume and every
step see the same)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kbisect.bisect import driver, state
from kbisect.bisect.report import files
from kbisect.bisect.request import METHODS, RECHECK_SAMPLES, STORIES, Options
from kbisect.commands import options
from kbisect.core import paths, progress
from kbisect.core.exceptions import UserError
from kbisect.kernel import config, kconfig
from kbisect.pgbuild import request
from kbisect.targets import registry


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--tree", help=options.TREE_HELP)
    add("--good", help="a revision with the good (fast) figure")
    add("--bad", help="a later revision with the bad (slow) figure")
    options.add_measured(parser, required=False)
    add(
        "--threshold",
        type=options.positive,
        metavar="TPS",
        help="git method: good above, bad below (default: geometric mean of the endpoint "
        "means; a given threshold turns --references off)",
    )
    add(
        "--recheck-samples",
        type=options.count(3, 1000),
        default=None,
        help="fresh samples of the culprit and its parent (git: exactly, default 8; "
        "posterior: at most, adaptive from 3, default 12)",
    )
    add(
        "--method",
        choices=METHODS,
        default="posterior",
        help="posterior (default): every sample is evidence; git: git bisect run bisect/run",
    )
    add(
        "--confidence",
        type=options.confidence,
        default=0.95,
        help="posterior: stop when one commit holds this probability (default 0.95)",
    )
    add(
        "--max-boots",
        type=options.count(1, 100_000),
        default=100,
        help="posterior: boots after the endpoints, re-checks included (default 100)",
    )
    add(
        "--story",
        choices=STORIES,
        default="one",
        help="posterior: one (default): the one-step search, its answer verified by revert; "
        "full: also tell the whole range's story, probing untested stretches (more boots)",
    )
    add(
        "--batch",
        type=options.count(1, 64),
        default=None,
        metavar="K",
        help="posterior: samples per round, taken at once (default: the target's machines, "
        "a plain target 1)",
    )
    options.add_references(parser)
    options.add_resume(parser, "bisect")


def _absolute(path: str | None) -> str | None:
    """A path made absolute, so that --resume and the reproduce line work from anywhere."""
    if path is None or path == "default" or not Path(path).exists():
        return path
    return str(Path(path).resolve())


def _file_or_name(spec: str) -> str:
    """A scenario or target: a file (made absolute: steps run elsewhere) or a name."""
    if "/" in spec or spec.endswith(".toml"):
        return str(_absolute(spec))
    return spec


def options_from_args(args: argparse.Namespace) -> Options:
    missing = [f"--{n}" for n in ("good", "bad", "scenario") if not getattr(args, n)]
    if missing:
        raise UserError(f"missing {', '.join(missing)} (or use --resume)")
    where = _file_or_name(args.target)
    arch = registry.get(where, args.arch).arch.name  # resolved once, then passed on
    kconfig.resolve(list(args.config), arch)  # an unknown fragment: exit 2 before any run dir
    pg_patches = options.paths(args.pg_patch)
    pg = request.given(args.pg_build, pg_patches)  # built by the driver, after its checks
    options.check_base(args.base_config)
    return Options(
        _absolute(args.tree),
        args.good,
        args.bad,
        _file_or_name(args.scenario),
        args.threshold,
        not args.lower_is_better,
        args.append,
        args.runs_min,
        args.runs_max,
        args.recheck_samples or RECHECK_SAMPLES[args.method],
        tuple(args.config),
        arch,
        where,
        tuple(args.set),
        _file_or_name(args.base_config)
        if args.base_config not in config.BASES
        else args.base_config,
        args.method,
        args.confidence,
        args.max_boots,
        args.references,
        args.retakes,
        args.disturbed_share,
        args.count_disturbed,
        tuple(str(p) for p in options.paths(args.patch)),
        pg.named() if pg else None,
        tuple(map(str, pg_patches)),
        batch=args.batch,
        story=args.story,
    )


def main(args: argparse.Namespace) -> int:
    if args.resume is None:
        return driver.drive(options_from_args(args))
    run_dir = options.resume_dir(args) or state.newest_unfinished(paths.results_dir())
    data = state.load(run_dir)
    if data.refused:
        raise UserError(f"{run_dir}: this bisect was refused: {data.refused}")
    if data.phase == "done" and (run_dir / files.REPORT).exists():
        raise UserError(f"{run_dir}: this bisect has finished (see its report.md)")
    progress.step(f"resuming {run_dir} ({data.phase}); its saved options apply")
    return driver.drive(data.options, run_dir, data)
