"""`kbisect report`: Markdown and PNG plots from a stored run directory.

A compare report is recomputed from the stored samples every time, so it never disagrees
with them: only boots with status "ok" enter the statistics; failed boots are listed.
The report opens with the command that reproduces the run and one sentence a maintainer
can paste, then the numbers behind it, the fingerprints, every boot, and the plots.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect import (
    atomic,
    disturbreport,
    fingerprint,
    fiodiff,
    options,
    plots,
    progress,
    results,
    stats,
    textreport,
    timeline,
)
from kbisect.bisect import report as bisect_report
from kbisect.compare import schedule
from kbisect.compare import summary as compare_summary
from kbisect.exceptions import EXIT_OK, UserError
from kbisect.study import report as study_report

REPORT = "report.md"
TIME = "tps-time.png"
SIDES = ("A", "B")
METHODS = {stats.METHOD: "delta method on the log ratio, Welch df"}
TCG_NOTE = (
    "**TCG:** these boots ran under QEMU's software emulation (no KVM). Timings are "
    "emulated, so compare only ratios between sides measured the same way, never "
    "absolute tps."
)


PARTIAL_NOTE = (
    "the figures below are from the boots taken so far (`kbisect compare --resume RUN_DIR` "
    "takes the rest)"
)


class NotAReport(UserError):
    """The directory holds no run kbisect can report on."""


@dataclass(frozen=True)
class Run:
    """A compare run as the report sees it: the summary, the samples, the recomputed verdict."""

    dir: Path
    summary: Mapping[str, Any]
    samples: list[dict[str, Any]]  # in boot order
    verdict: stats.Verdict
    min_effect: float
    confidence: float
    copies: tuple[str, ...] = ()  # sample files that repeat a boot, left out

    def side(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.samples if s.get("label") == name]

    def name(self, side: str) -> str:
        return str(self.summary["sides"][side].get("label") or side)

    def accels(self, side: str) -> set[str]:
        """Where a side ran: the target and its accelerator, e.g. `vng/tcg`."""
        return {_where(s["target"]) for s in self.side(side)}


def load(run_dir: Path) -> dict[str, Any]:
    """The run's summary.json, or NotAReport with one line saying why not.

    A compare summary is validated against schema/summary.json here; other kinds are
    checked by the module that renders them.
    """
    path = run_dir / results.SUMMARY
    if not run_dir.is_dir():
        raise NotAReport(f"{run_dir}: no such directory")
    if not path.is_file() and (run_dir / schedule.PLAN).is_file():
        return compare_summary.partial(run_dir)  # an interrupted compare: marked partial
    if not path.is_file() and (run_dir / study_report.DEFINITION).is_file():
        return {"kind": "study"}  # a study in progress: rendered from what it has
    if not path.is_file():
        raise NotAReport(f"{run_dir}: no summary.json (not a finished compare or bisect run)")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotAReport(f"{path}: unreadable: {exc}") from exc
    if not isinstance(summary, dict) or not isinstance(summary.get("kind"), str):
        raise NotAReport(f"{path}: no 'kind' field: not a kbisect summary")
    if summary["kind"] == "compare":
        try:
            results.validate(summary, "summary", where=str(path))
        except results.InvalidResult as exc:
            raise NotAReport(str(exc)) from exc
        if missing := [x for x in SIDES if x not in summary["sides"]]:
            raise NotAReport(f"{path}: a compare without side {', '.join(missing)}")
    return summary


def _where(target: Mapping[str, Any]) -> str:
    accel = target.get("accel")
    return f"{target['name']}/{accel}" if accel else str(target["name"])


def ok_tps(samples: Sequence[Mapping[str, Any]]) -> list[float]:
    """The tps of the boots that count: status "ok" only."""
    return [float(s["tps"]) for s in samples if s.get("status") == "ok" and s.get("tps")]


def load_run(run_dir: Path, summary: Mapping[str, Any], min_effect: float | None) -> Run:
    """The samples and the verdict recomputed from them (min_effect overrides the run's)."""
    try:
        samples, copies = results.without_copies(run_dir)
    except results.InvalidResult as exc:
        raise NotAReport(str(exc)) from exc
    for line in copies:
        progress.warn(line)
    samples = disturbreport.counted(samples)  # a retaken sample is listed on its own
    listed = [f for side in summary["sides"].values() for f in side.get("samples") or []]
    if listed and not samples:
        raise NotAReport(
            f"{run_dir}: summary.json lists {len(listed)} sample files and none is here: "
            "a report is re-rendered from its samples; re-run the command at the top of "
            "its report.md to get them"
        )
    effect = float(summary.get("min_effect", 0.02)) if min_effect is None else min_effect
    confidence = float(summary.get("confidence", 0.95))
    a, b = (ok_tps([s for s in samples if s.get("label") == x]) for x in SIDES)
    try:
        v = stats.verdict(a, b, min_effect=effect, confidence=confidence)
    except stats.StatsError as exc:
        raise NotAReport(f"{run_dir}: {exc}") from exc
    return Run(run_dir, summary, samples, v, effect, confidence, tuple(copies))


def verdict_line(v: stats.Verdict) -> str:
    """`B/A = 0.512x [0.471, 0.556] (95% CI, ...): regression`."""
    r = v.ratio
    method = METHODS.get(r.method, r.method)
    return (
        f"B/A = {r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}] "
        f"({r.confidence * 100:g}% CI, {method}): {v.kind}"
    )


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _kernel(k: Mapping[str, Any]) -> str:
    commit, describe, subject = k.get("commit"), k.get("describe"), k.get("subject")
    head = describe or (commit[:12] if commit else Path(str(k.get("image") or "?")).name)
    extra = [f"({commit[:12]})"] if commit and describe else []
    return " ".join([f"`{head}`", *extra, *([subject] if subject else [])])


def _sentence(run: Run) -> str:
    v = run.verdict
    return (
        f"{run.summary['scenario']['name']}: B ({run.name('B')}) vs A ({run.name('A')}), "
        f"{verdict_line(v)} ({v.a.n} + {v.b.n} boots; changes under "
        f"{run.min_effect * 100:g}% are not called)."
    )


def _side_table(run: Run) -> list[str]:
    out = [
        "| side | label | kernel | append | boots ok / failed | mean tps | median | stdev "
        "| CV | min | max |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for side, s in zip(SIDES, (run.verdict.a, run.verdict.b), strict=True):
        info, boots = run.summary["sides"][side], run.side(side)
        ok = len(ok_tps(boots))
        out.append(
            f"| {side} | {_cell(run.name(side))} | {_cell(_kernel(info.get('kernel') or {}))} "
            f"| `{_cell(info.get('append') or '')}` | {ok} / {len(boots) - ok} | {s.mean:,.1f} "
            f"| {s.median:,.1f} | {s.stdev:,.1f} | {s.cv * 100:.1f}% | {s.min:,.1f} "
            f"| {s.max:,.1f} |"
        )
    return out


def _warnings(run: Run) -> list[str]:
    out = [*run.verdict.warnings, *run.copies, *filter(None, [timeline.sides(run.samples)[1]])]
    for side in SIDES:
        boots = run.side(side)
        failed = len(boots) - len(ok_tps(boots))
        if failed:
            out.append(
                f"side {side}: {failed} failed boot(s), listed below and kept out of the statistics"
            )
        recorded = int((run.summary.get("failed") or {}).get(side, failed))
        if recorded != failed:
            out.append(
                f"side {side}: summary.json counts {recorded} failed boot(s) but "
                f"{failed} have a sample file"
            )
    if run.accels("A") != run.accels("B"):
        seen = "; ".join(f"{s}: {', '.join(sorted(run.accels(s)))}" for s in SIDES)
        out.append(
            f"the sides ran on different targets or accelerators ({seen}): the ratio "
            "mixes places; rerun both sides on the same one"
        )
    out += fiodiff.warnings(_storage(run), {x: x for x in SIDES})
    stored = run.summary.get("verdict") or {}
    kind = stored.get("kind") or stored.get("result")
    new = run.verdict.kind
    if (
        not run.summary.get("partial")
        and kind
        and kind not in (new, new.replace(" ", "-"))
        and (kind, new) != ("no-change", stats.NO_DIFFERENCE)
    ):
        out.append(f"summary.json says '{kind}'; recomputed from the samples: '{new}'")
    return out


def _storage(run: Run) -> list[fiodiff.Row]:
    """The sides' fio preflight figures (fiodiff.py), from the boots that count."""
    ok = {x: [b.get("fingerprint") for b in run.side(x) if b.get("status") == "ok"] for x in SIDES}
    return fiodiff.rows(ok)


def _boot_table(samples: Sequence[Mapping[str, Any]]) -> list[str]:
    out = ["| # | side | tps | status | boot s | error |", "|---:|---|---:|---|---:|---|"]
    for i, s in enumerate(samples, 1):
        ok = s.get("status") == "ok"
        tps = f"{s['tps']:,.1f}" if ok and s.get("tps") else "—"
        boot = (s.get("timings") or {}).get("boot_s")
        boot_s = f"{boot:.1f}" if isinstance(boot, int | float) else "—"
        status = "ok" if ok else f"**{s.get('status') or 'unknown'}**"
        out.append(
            f"| {i} | {s.get('label')} | {tps} | {status} | {boot_s} "
            f"| {_cell(s.get('error') or '')} |"
        )
    return out


def _plots(run: Run) -> list[str]:
    names = {s: run.name(s) for s in SIDES}
    bands = {}
    for side in SIDES:
        _, low, high = stats.mean_ci(ok_tps(run.side(side)), run.confidence)
        bands[side] = (low, high)
    try:
        plots.tps_per_boot(run.samples, run.dir / plots.PER_BOOT, names=names, bands=bands)
        plots.series(run.samples, run.dir / plots.SERIES, names=names)
        timeline.plot(timeline.sides(run.samples)[0], run.dir / TIME, names=names,
                      title="tps against wall-clock time, per side")  # fmt: skip
    except ImportError as exc:
        progress.warn(f"no plots ({exc}): install matplotlib (scripts/setup)")
        return [f"No plots: {exc}."]
    return [
        f"![tps per boot]({plots.PER_BOOT})",
        "",
        f"![tps per second of each run]({plots.SERIES})",
        "",
        f"![tps against wall-clock time]({TIME})",
    ]


def markdown(run: Run, *, override: bool = False) -> str:
    """The whole report; `override`: the min effect is not the run's own."""
    v, scen, s = run.verdict, run.summary["scenario"], run.summary
    rows = fingerprint.diff({x: [b.get("fingerprint") or {} for b in run.side(x)] for x in SIDES})
    accels = sorted(run.accels("A") | run.accels("B"))
    note = (
        [
            f"(--min-effect {run.min_effect:g} given to `kbisect report`; the run used "
            f"{s.get('min_effect')}.)",
            "",
        ]
        if override
        else []
    )
    partial = (
        [f"**PARTIAL:** this compare was interrupted; {PARTIAL_NOTE}", ""]
        if s.get("partial")
        else []
    )
    lines = [
        f"# {scen['name']}: {'PARTIAL, ' if partial else ''}{v.kind} (B/A = {v.ratio.ratio:.3f}x)",
        "",
        *partial,
        "Reproduce:",
        "",
        "```sh",
        s.get("command") or "(not recorded)",
        "```",
        "",
        _sentence(run),
        "",
        *note,
        "## Sides",
        "",
        *_side_table(run),
        "",
        "## Warnings",
        "",
        *([f"- {w}" for w in _warnings(run)] or ["None."]),
        "",
        "## Fingerprints",
        "",
        *fingerprint.markdown(rows, {x: run.name(x) for x in SIDES}),
        "",
        "## Storage",
        "",
        *fiodiff.markdown(_storage(run), {x: run.name(x) for x in SIDES}),
        "",
        *disturbreport.markdown(disturbreport.rows(run.dir)),
        "## Boots, in run order",
        "",
        "Failed boots are listed here and kept out of every statistic above.",
        "",
        *_boot_table(run.samples),
        "",
        "## Plots",
        "",
        *_plots(run),
        "",
        "## Scenario",
        "",
        f"`{scen['name']}`, hash `{scen.get('hash')}`; ran on: {', '.join(accels)}.",
        "",
        *([TCG_NOTE, ""] if any(a.endswith("/tcg") for a in accels) else []),
    ]
    return "\n".join(lines)


def render_compare(run_dir: Path, *, min_effect: float | None = None) -> Path:
    """Write RUN/report.md and the PNGs from RUN's samples; return the report's path."""
    return _compare(run_dir, load(run_dir), min_effect)[0]


def _compare(
    run_dir: Path, summary: Mapping[str, Any], min_effect: float | None
) -> tuple[Path, str]:
    run = load_run(run_dir, summary, min_effect)
    path = run_dir / REPORT
    atomic.write_text(path, markdown(run, override=min_effect is not None))
    return path, verdict_line(run.verdict)


def _text(run_dir: Path, summary: Mapping[str, Any], min_effect: float | None) -> str:
    if summary["kind"] == "compare":
        return textreport.compare_text(load_run(run_dir, summary, min_effect))
    if summary["kind"] in ("bisect", "bisect-summary"):
        return textreport.bisect_text(run_dir, summary)
    if summary["kind"] == "study":
        return study_report.text_of(run_dir)
    raise NotAReport(f"{run_dir}: kind '{summary['kind']}' has no text report")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results_dir",
        type=Path,
        metavar="RESULTS_DIR",
        help="a compare, bisect or study run directory",
    )
    parser.add_argument(
        "--format",
        choices=("markdown", "text"),
        default="markdown",
        help="markdown (report.md and plots) or text: a plain-text report "
        "of at most 72 columns for a mailing list (report.txt, also printed)",
    )
    parser.add_argument(
        "--min-effect",
        type=options.fraction,
        help="compare: smallest change called a regression/improvement (default: the run's)",
    )


def main(args: argparse.Namespace) -> int:
    """Print the report's path, then (compare) the verdict line."""
    summary = load(args.results_dir)
    kind = summary["kind"]
    if args.format == "text":
        text = _text(args.results_dir, summary, args.min_effect)
        atomic.write_text(args.results_dir / textreport.TEXT, text)
        print(text, end="")
    elif kind == "study":
        print(study_report.write(args.results_dir))
    elif kind == "compare":
        path, line = _compare(args.results_dir, summary, args.min_effect)
        print(path)
        print(line)
    elif kind in ("bisect", "bisect-summary"):
        print(bisect_report.render(args.results_dir))
    else:
        raise NotAReport(f"{args.results_dir}: kind '{kind}' has no report")
    return EXIT_OK
