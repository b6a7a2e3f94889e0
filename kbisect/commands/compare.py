"""`kbisect compare`: its options, into a typed spec for the compare engine (kbisect/compare/)."""

from __future__ import annotations

import argparse

from kbisect.commands import options
from kbisect.compare import run, sides
from kbisect.compare.sides import Spec
from kbisect.core.exceptions import UserError
from kbisect.stats import stopping


def configure(parser: argparse.ArgumentParser) -> None:
    k = parser.add_argument_group("kernels")
    k.add_argument("--tree", help=options.TREE_HELP)
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
    options.add_patch(s, what=" (both sides)")
    options.add_patch(s, "-a", " (side A)")
    options.add_patch(s, "-b", " (side B)")
    options.add_append(s, what=", both sides")
    options.add_append(s, "-a", ", side A")
    options.add_append(s, "-b", ", side B")
    options.add_set(s, what=" (both sides)")
    options.add_set(s, "-a", " (side A)")
    options.add_set(s, "-b", " (side B)")
    options.add_pg(s)
    s.add_argument("--label-a", type=options.label, help="name for side A in the report")
    s.add_argument("--label-b", type=options.label, help="name for side B in the report")
    m = parser.add_argument_group("measurement")
    options.add_scenario(m, required=False)
    m.add_argument(
        "--boots",
        type=options.count_or_auto(2, 1000),
        help="boots per side, at least 2, or auto: a pair at a time until the ratio is "
        "settled (docs/statistics.md); default: the scenario's [compare] boots, else auto",
    )
    m.add_argument(
        "--max-boots",
        type=options.count(2, 1000),
        help=f"with --boots auto (implied): the most boots per side (default {stopping.MOST})",
    )
    options.add_noise_prior(m)
    m.add_argument("--order", choices=["abba", "random"], default="abba")
    m.add_argument(
        "--retries",
        type=options.count(0, 20),
        default=1,
        help="retry a failed boot this many times (default 1); failures are kept",
    )
    options.add_disturbance(m)
    m.add_argument("--seed", type=options.seed, help="seed for --order random")
    options.add_min_effect(m)
    m.add_argument(
        "--out", type=options.out_path, help="results dir (default: a new one in results/)"
    )
    options.add_resume(m, "compare")


def spec(args: argparse.Namespace) -> Spec:
    if not args.scenario:
        raise UserError("missing --scenario (or use --resume)")
    given = options.typed(
        Spec,
        args,
        configs=tuple(args.config),
        sets=tuple(args.set),
        sets_a=tuple(args.set_a),
        sets_b=tuple(args.set_b),
        patch=options.paths(args.patch),
        patch_a=options.paths(args.patch_a),
        patch_b=options.paths(args.patch_b),
        pg_patch=options.paths(args.pg_patch),
        pg_patch_a=options.paths(args.pg_patch_a),
        pg_patch_b=options.paths(args.pg_patch_b),
    )
    sides.check_conflicts(given)
    options.check_base(args.base_config)  # a machine's config is fetched: after the rest
    return given


def main(args: argparse.Namespace) -> int:
    if args.resume is not None:
        return run.resume(options.resume_dir(args))
    return run.start(spec(args), options.retake_policy(args))
