"""`kbisect diff RUN_A RUN_B`: any two stored sets of samples of one scenario (a run, one
side of a compare, one revision of a bisection's store), compared with the statistics of
`kbisect compare` (kbisect/compare/diff.py); exit 1 for a regression of B against A, as
compare (docs/exit-codes.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kbisect.bisect import state
from kbisect.commands import options
from kbisect.compare import diff, text
from kbisect.compare.report import METHODS, SIDES, Run
from kbisect.core.exceptions import EXIT_NEGATIVE, EXIT_OK
from kbisect.report.text import fingerprint_lines, fit, para, warning_lines

SPEC_HELP = "DIR (a run), DIR:A or DIR:B (a compare's side), DIR:COMMIT (a bisection's revision)"


def bisect_store(run: Path) -> Path | None:
    """Where the bisection in `run` keeps its samples per revision; None: no bisection."""
    return state.samples_store(run) if (run / state.STATE_FILE).is_file() else None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", help=f"side A: {SPEC_HELP}")
    parser.add_argument("run_b", metavar="RUN_B", help="side B, named the same ways")
    parser.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="text (72 columns, as the compare text report's head), json or markdown",
    )
    parser.add_argument(
        "--min-effect",
        type=options.fraction,
        default=0.02,
        help="smallest change called a regression/improvement (default 0.02 = 2%%)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="compare runs of different scenarios, listing the settings that differ",
    )


def _text(run: Run, differs: list[str]) -> str:
    lines = [*para(f"kbisect diff: {text.head(run).removeprefix('kbisect ')}"), ""]
    lines += [*text.figures(run), ""]
    if differs:
        lines += ["scenario settings that differ (A -> B), compared anyway (--force):"]
        lines += [x for d in differs for x in para(d, "  ", "  ")] + [""]
    fps = {x: [s.get("fingerprint") or {} for s in run.side(x)] for x in SIDES}
    lines += ["fingerprint differences (A, B):", *fingerprint_lines(fps, ("A", "B"))]
    return fit([*lines, *warning_lines(run.verdict.warnings)])


def _markdown(run: Run, differs: list[str]) -> str:
    v, r = run.verdict, run.verdict.ratio
    out = [
        f"# kbisect diff: {run.name('A')} vs {run.name('B')}",
        "",
        f"**{v.kind}**: B/A = {r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}] "
        f"({r.confidence * 100:g}% CI, {METHODS.get(r.method, r.method)}), "
        f"scenario `{run.summary['scenario']['name']}`",
        "",
        "| side | run | n | mean tps | CV |",
        "|---|---|---:|---:|---:|",
    ]
    for side, s in zip(SIDES, (v.a, v.b), strict=True):
        out.append(f"| {side} | `{run.name(side)}` | {s.n} | {s.mean:.1f} | {s.cv * 100:.1f}% |")
    if differs:
        out += ["", "Scenario settings that differ (compared anyway, `--force`):", ""]
        out += [f"- `{d}`" for d in differs]
    if v.warnings:
        out += ["", "Warnings:", "", *(f"- {w}" for w in v.warnings)]
    return "\n".join(out) + "\n"


def main(args: argparse.Namespace) -> int:
    a, b = (diff.resolve(spec, bisect_store) for spec in (args.run_a, args.run_b))
    differs = diff.check_scenarios(a, b, force=args.force)
    run = diff.as_run(a, b, args.min_effect)
    if args.format == "json":
        print(json.dumps(diff.as_json(run, (a, b), differs), indent=2, sort_keys=True))
    elif args.format == "markdown":
        print(_markdown(run, differs), end="")
    else:
        print(_text(run, differs), end="")
    return EXIT_NEGATIVE if run.verdict.kind == "regression" else EXIT_OK
