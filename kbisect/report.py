"""`kbisect report`: Markdown and PNG plots from a stored run directory.

A compare report is recomputed from the stored samples every time, so it never disagrees
with them: only boots with status "ok" enter the statistics; failed boots are listed.
The report opens with the command that reproduces the run and one sentence a maintainer
can paste, then the numbers behind it, the fingerprints, every boot, and the plots.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect import atomic, fingerprint, plots, progress, results, stats
from kbisect.exceptions import EXIT_OK, UserError

REPORT = "report.md"
METHODS = {stats.METHOD: "delta method on the log ratio, Welch df"}
TCG_NOTE = (
    "**TCG:** these boots ran under QEMU's software emulation (no KVM). Timings are "
    "emulated, so compare only ratios between sides measured the same way, never "
    "absolute tps."
)


class NotAReport(UserError):
    """The directory holds no run kbisect can report on."""


@dataclass(frozen=True)
class Rendered:
    path: Path
    line: str  # the one-line answer


def load(run_dir: Path) -> dict[str, Any]:
    """The run's summary.json, or NotAReport with one line saying why not."""
    if not run_dir.is_dir():
        raise NotAReport(f"{run_dir}: no such directory")
    if not (run_dir / "summary.json").is_file():
        raise NotAReport(f"{run_dir}: no summary.json (not a finished compare or bisect run)")
    try:
        summary: dict[str, Any] = results.load_summary(run_dir)
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        raise NotAReport(f"{run_dir}/summary.json: unreadable ({exc})") from exc
    if not isinstance(summary, dict) or "kind" not in summary:
        raise NotAReport(f"{run_dir}/summary.json: no 'kind' field")
    return summary


def verdict_line(v: stats.Verdict) -> str:
    """`B/A = 0.512x [0.471, 0.556] (95% CI, ...): regression`."""
    r = v.ratio
    method = METHODS.get(r.method, r.method)
    return (f"B/A = {r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}] "
            f"({r.confidence * 100:g}% CI, {method}): {v.kind}")  # fmt: skip


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _kernel(k: Mapping[str, Any]) -> str:
    commit, describe, subject = k.get("commit"), k.get("describe"), k.get("subject")
    head = describe or (commit[:12] if commit else Path(str(k.get("image") or "?")).name)
    parts = [f"`{head}`"]
    if commit and describe:
        parts.append(f"({commit[:12]})")
    if subject:
        parts.append(subject)
    return " ".join(parts)


def _side_table(summary: Mapping[str, Any], by_side: Mapping[str, list[dict[str, Any]]],
                v: stats.Verdict) -> list[str]:
    out = ["| side | label | kernel | append | boots ok / failed | mean tps | median | stdev "
           "| CV | min | max |", "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, s in (("A", v.a), ("B", v.b)):
        info = summary["sides"][name]
        boots = by_side[name]
        ok = sum(1 for b in boots if b.get("status") == "ok")
        out.append(
            f"| {name} | {_cell(info.get('label', name))} | {_cell(_kernel(info['kernel']))} "
            f"| `{_cell(info.get('append') or '')}` | {ok} / {len(boots) - ok} | {s.mean:,.1f} "
            f"| {s.median:,.1f} | {s.stdev:,.1f} | {s.cv * 100:.1f}% | {s.min:,.1f} "
            f"| {s.max:,.1f} |")  # fmt: skip
    return out


def _fp_cell(row: fingerprint.Row, side: str) -> str:
    text = " / ".join(row.values.get(side, ())) or fingerprint.MISSING
    text = f"**{_cell(text)}**" if row.differs else _cell(text)
    return text + (" ⚠ varies across boots" if side in row.varies else "")


def fingerprint_section(by_side: Mapping[str, list[dict[str, Any]]],
                        names: Mapping[str, str]) -> list[str]:
    rows = fingerprint.diff({s: [b.get("fingerprint") or {} for b in bs]
                             for s, bs in by_side.items()})
    sides = list(by_side)
    differ = [r for r in rows if r.differs]
    vary = [r for r in rows if r.varies]
    out = ["Differences between the sides: "
           + (", ".join(f"**{r.field}**" for r in differ) if differ else "none") + ".",
           "Varies across boots within a side: "
           + (", ".join(f"{r.field} ({', '.join(r.varies)})" for r in vary) if vary else "none")
           + ".", "",
           "| field | " + " | ".join(f"{s}: {_cell(names.get(s, s))}" for s in sides) + " |",
           "|---|" + "---|" * len(sides)]  # fmt: skip
    for r in rows:
        field = f"⚠ **{r.field}**" if r.differs else r.field
        out.append(f"| {field} | " + " | ".join(_fp_cell(r, s) for s in sides) + " |")
    return out


def _boot_table(samples: Sequence[Mapping[str, Any]]) -> list[str]:
    out = ["| # | side | tps | status | boot s | error |", "|---:|---|---:|---|---:|---|"]
    for i, s in enumerate(samples, 1):
        tps = f"{s['tps']:,.1f}" if s.get("status") == "ok" and s.get("tps") else "—"
        boot = (s.get("timings") or {}).get("boot_s")
        boot_s = f"{boot:.1f}" if isinstance(boot, int | float) else "—"
        status = s.get("status") or "unknown"
        status = status if status == "ok" else f"**{status}**"
        out.append(f"| {i} | {s.get('label')} | {tps} | {status} | {boot_s} "
                   f"| {_cell(s.get('error') or '')} |")  # fmt: skip
    return out


def _ok_tps(boots: Sequence[Mapping[str, Any]]) -> list[float]:
    return [float(b["tps"]) for b in boots if b.get("status") == "ok" and b.get("tps")]


def _warnings(summary: Mapping[str, Any], by_side: Mapping[str, list[dict[str, Any]]],
              v: stats.Verdict, accels: Mapping[str, set[str]]) -> list[str]:
    out = list(v.warnings)
    for side, boots in by_side.items():
        failed = sum(1 for b in boots if b.get("status") != "ok")
        if failed:
            out.append(f"side {side}: {failed} failed boot(s), listed below and kept out of "
                       "the statistics")  # fmt: skip
        recorded = int((summary.get("failed") or {}).get(side, failed))
        if recorded != failed:
            out.append(f"side {side}: summary.json counts {recorded} failed boot(s) but "
                       f"{failed} have a sample file")  # fmt: skip
    if len({frozenset(a) for a in accels.values()}) > 1:
        seen = "; ".join(f"{s}: {', '.join(sorted(a))}" for s, a in accels.items())
        out.append(f"the sides ran with different accelerators ({seen}): the ratio compares "
                   "emulation with hardware, rerun both on the same one")  # fmt: skip
    stored = (summary.get("verdict") or {}).get("kind")
    if stored and stored != v.kind:
        out.append(f"summary.json says '{stored}'; recomputed from the samples: '{v.kind}'")
    return out


def _sentence(summary: Mapping[str, Any], v: stats.Verdict, min_effect: float) -> str:
    sides = summary["sides"]
    return (f"{summary['scenario']['name']}: B ({sides['B'].get('label', 'B')}) vs "
            f"A ({sides['A'].get('label', 'A')}), {verdict_line(v)} "
            f"({v.a.n} + {v.b.n} boots; changes under {min_effect * 100:g}% are not "
            "called).")  # fmt: skip


def _plots(run_dir: Path, samples: list[dict[str, Any]], names: Mapping[str, str],
           by_side: Mapping[str, list[dict[str, Any]]], confidence: float) -> list[str]:
    bands = {}
    for side, boots in by_side.items():
        _, low, high = stats.mean_ci(_ok_tps(boots), confidence)
        bands[side] = (low, high)
    try:
        plots.tps_per_boot(samples, run_dir / plots.PER_BOOT, names=names, bands=bands)
        plots.series(samples, run_dir / plots.SERIES, names=names)
    except ImportError as exc:
        progress.warn(f"no plots ({exc}): install matplotlib (scripts/setup)")
        return [f"No plots: {exc}."]
    return [f"![tps per boot]({plots.PER_BOOT})", "",
            f"![tps per second of each run]({plots.SERIES})"]


def _compare(run_dir: Path, summary: Mapping[str, Any], min_effect: float | None) -> Rendered:
    samples = results.load_samples(run_dir)
    by_side = {s: [b for b in samples if b.get("label") == s] for s in ("A", "B")}
    effect = float(summary.get("min_effect", 0.02)) if min_effect is None else min_effect
    confidence = float(summary.get("confidence", 0.95))
    try:
        v = stats.verdict(_ok_tps(by_side["A"]), _ok_tps(by_side["B"]), min_effect=effect,
                          confidence=confidence)
    except stats.StatsError as exc:
        raise NotAReport(f"{run_dir}: {exc}") from exc
    names = {s: str(summary["sides"][s].get("label", s)) for s in by_side}
    accels = {s: {str(b.get("accel")) for b in bs} for s, bs in by_side.items()}
    line = verdict_line(v)
    scen = summary["scenario"]
    lines = [
        f"# {scen['name']}: {v.kind} (B/A = {v.ratio.ratio:.3f}x)", "",
        "Reproduce:", "", "```sh", summary.get("command", "(not recorded)"), "```", "",
        _sentence(summary, v, effect), "",
    ]
    if min_effect is not None:
        lines += [f"(--min-effect {min_effect:g} given to `kbisect report`; the run used "
                  f"{summary.get('min_effect')}.)", ""]  # fmt: skip
    warnings = _warnings(summary, by_side, v, accels)
    lines += ["## Sides", "", *_side_table(summary, by_side, v), "",
              "## Warnings", "", *([f"- {w}" for w in warnings] or ["None."]), "",
              "## Fingerprints", "", *fingerprint_section(by_side, names), "",
              "## Boots, in run order", "",
              "Failed boots are listed here and kept out of every statistic above.", "",
              *_boot_table(samples), "",
              "## Plots", "", *_plots(run_dir, samples, names, by_side, confidence), "",
              "## Scenario", "",
              f"`{scen['name']}`, hash `{scen.get('hash')}`; accelerator: "
              + ", ".join(sorted(set().union(*accels.values()))) + ".", ""]  # fmt: skip
    if any("tcg" in a for a in accels.values()):
        lines += [TCG_NOTE, ""]
    path = run_dir / REPORT
    atomic.write_text(path, "\n".join(lines))
    return Rendered(path, line)


def render_compare(run_dir: Path, *, min_effect: float | None = None) -> Path:
    """Write RUN/report.md and the PNGs from RUN's samples; return the report's path."""
    return _compare(run_dir, load(run_dir), min_effect).path


def _bisect(run_dir: Path) -> Rendered:
    try:
        module = importlib.import_module("kbisect.bisect_report")
    except ModuleNotFoundError as exc:
        raise NotAReport(f"{run_dir}: a bisect run, and this kbisect has no bisect "
                         "report module") from exc  # fmt: skip
    render = getattr(module, "render", None)
    if render is None:
        raise NotAReport(f"{run_dir}: a bisect run; kbisect.bisect_report cannot re-render "
                         "it (no render())")  # fmt: skip
    path: Path = render(run_dir)
    return Rendered(path, "bisect report")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results_dir", type=Path, metavar="RESULTS_DIR",
                        help="a compare or bisect run directory (has summary.json)")
    parser.add_argument("--min-effect", type=float,
                        help="compare: smallest change called a regression/improvement "
                        "(default: the run's)")  # fmt: skip


def main(args: argparse.Namespace) -> int:
    summary = load(args.results_dir)
    kind = summary["kind"]
    if kind == "compare":
        out = _compare(args.results_dir, summary, args.min_effect)
    elif kind in ("bisect", "bisect-summary"):
        out = _bisect(args.results_dir)
    else:
        raise NotAReport(f"{args.results_dir}: kind '{kind}' has no report")
    print(out.path)
    print(out.line)
    return EXIT_OK
