"""A compare report's Markdown (report.md) and its plots: the headline and the sentence to
paste, the sides, the warnings (report.py), fingerprints, storage, every boot, the plots
and the scenario."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kbisect.compare import machines, revert
from kbisect.compare.report import (
    SIDES,
    Run,
    load,
    load_summary,
    ok_tps,
    stopped,
    storage,
    verdict_line,
    warnings,
)
from kbisect.core import atomic, progress
from kbisect.measure import fingerprint, fiodiff, timeline
from kbisect.measure.record import Sample
from kbisect.report import disturbed, patches, plots, profile
from kbisect.report.formats import cell, reproduce, section
from kbisect.report.text import host_line
from kbisect.stats import means

REPORT = "report.md"
TIME = "tps-time.png"
TCG_NOTE = (
    "**TCG:** these boots ran under QEMU's software emulation (no KVM). Timings are "
    "emulated, so compare only ratios between sides measured the same way, never "
    "absolute tps."
)


PARTIAL_NOTE = (
    "the figures below are from the boots taken so far (`kbisect compare --resume RUN_DIR` "
    "takes the rest)"
)


def _kernel(k: Mapping[str, Any]) -> str:
    commit, describe, subject = k.get("commit"), k.get("describe"), k.get("subject")
    head = describe or (commit[:12] if commit else Path(str(k.get("image") or "?")).name)
    extra = [f"({commit[:12]})"] if commit and describe else []
    return " ".join([f"`{head}`", *extra, *([subject] if subject else [])])


def _sentence(run: Run) -> str:
    v = run.verdict
    return (
        f"{run.summary['scenario']['name']}, B ({run.name('B')}) vs A ({run.name('A')}): "
        f"{verdict_line(run.summary, v)}, {v.a.n} + {v.b.n} boots; changes under "
        f"{run.min_effect * 100:g}% are not called."
    )


def side_patches(run: Run, side: str) -> list[dict[str, object]]:
    """The patches the side's kernel was built with (its build manifest's), if any."""
    return list((run.summary["sides"][side].get("kernel") or {}).get("patches") or [])


def _side_table(run: Run) -> list[str]:
    """Each side's figures; over a pool, per machine (a machine's level is its own, so
    figures mixing the machines would show their spread, not the noise)."""
    pooled = any(machines.parts(run.samples, x) for x in SIDES)
    out = []
    if pooled:
        out += [
            "Per machine (B/A is within machines; figures mixing the machines would show "
            "their spread, not the boots' noise):",
            "",
        ]
    out += [
        f"| side | label | kernel | append |{' machine |' if pooled else ''} boots ok / failed "
        "| mean tps | median | stdev | CV | min | max |",
        f"|---|---|---|---|{'---|' if pooled else ''}---|---:|---:|---:|---:|---:|---:|",
    ]
    for side, s in zip(SIDES, (run.verdict.a, run.verdict.b), strict=True):
        info, boots = run.summary["sides"][side], run.side(side)
        head = (
            f"| {side} | {cell(run.name(side))} | {cell(_kernel(info.get('kernel') or {}))} "
            f"| `{cell(info.get('append') or '')}`"
        )
        if not pooled:
            ok = len(ok_tps(boots))
            out.append(f"{head} | {ok} / {len(boots) - ok} {_figures(s)}")
        for part in machines.parts(run.samples, side):
            figures = _figures(means.summarize(part.tps) if part.tps else None)
            out.append(f"{head} | {cell(part.machine)} | {len(part.tps)} / {part.failed} {figures}")
    return out


def _figures(s: means.Summary | None) -> str:
    """Mean, median, stdev, CV, min and max as the side table's cells; dashes for none."""
    if s is None:
        return "| — | — | — | — | — | — |"
    return (
        f"| {s.mean:,.1f} | {s.median:,.1f} | {s.stdev:,.1f} | {s.cv * 100:.1f}% "
        f"| {s.min:,.1f} | {s.max:,.1f} |"
    )


def _machine_table(run: Run) -> list[str]:
    """A pool's machines: each one's boots that count, means and B/A (none for one)."""
    found = machines.rows(run.samples)
    if not found:
        return []
    out = [
        "## Machines",
        "",
        "B/A above is within machines (a machine fixed effect); each machine alone:",
        "",
        "| machine | boots A | mean A | boots B | mean B | B/A |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in found:
        a = f"{r.mean_a:,.1f}" if r.mean_a is not None else "—"
        b = f"{r.mean_b:,.1f}" if r.mean_b is not None else "—"
        ratio = f"{r.ratio:.3f}x" if r.ratio is not None else "—"
        out.append(f"| {cell(r.machine)} | {r.n_a} | {a} | {r.n_b} | {b} | {ratio} |")
    return [*out, ""]


def _boot_table(samples: Sequence[Sample]) -> list[str]:
    lava = any(s.target.get("lava") for s in samples)  # a LAVA lab's: the device and job
    head = "| # | side | tps | status | boot s | error |" + (" device | LAVA job |" if lava else "")
    out = [head, "|---:|---|---:|---|---:|---|" + ("---|---|" if lava else "")]
    for i, s in enumerate(samples, 1):
        tps = f"{s.tps:,.1f}" if s.ok and s.tps else "—"
        boot = s.timings.get("boot_s")
        boot_s = f"{boot:.1f}" if isinstance(boot, int | float) else "—"
        status = "ok" if s.ok else f"**{s.status}**"
        row = f"| {i} | {s.label} | {tps} | {status} | {boot_s} | {cell(s.error or '')} |"
        if lava:
            job = (s.target.get("lava") or {}).get("job") or "—"
            row += f" {cell(s.machine)} | {cell(str(job))} |"
        out.append(row)
    return out


def _plots(run: Run) -> list[str]:
    names = {s: run.name(s) for s in SIDES}
    bands = {x: means.mean_ci(ok_tps(run.side(x)), run.confidence)[1:] for x in SIDES}
    try:
        plots.tps_per_boot(run.samples, run.dir / plots.PER_BOOT, names=names, bands=bands)
        plots.series(run.samples, run.dir / plots.SERIES, names=names)
        rows, title = timeline.sides(run.samples)[0], "tps against wall-clock time, per side"
        plots.tps_over_time(rows, run.dir / TIME, names=names, title=title)
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


BOOTS_NOTE = "Failed boots are listed here and kept out of every statistic above."


def markdown(run: Run, *, override: bool = False) -> str:
    """The whole report; `override`: the min effect is not the run's own."""
    v, scen, s = run.verdict, run.summary["scenario"], run.summary
    rows = fingerprint.diff({x: [b.fingerprint for b in run.side(x)] for x in SIDES})
    accels = sorted(run.accels("A") | run.accels("B"))
    names = {x: run.name(x) for x in SIDES}
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
        f"# {scen['name']}: {'PARTIAL, ' if partial else ''}{revert.said(s, v)}",
        "",
        *partial,
        *reproduce(s.get("command") or "(not recorded)"),
        _sentence(run),
        "",
        *([f"Sequential (`--boots auto`): {how}.", ""] if (how := stopped(s)) else []),
        *note,
        *section("Sides", _side_table(run)),
        *_machine_table(run),
        *patches.markdown({x: side_patches(run, x) for x in SIDES}),
        *section("Warnings", [f"- {w}" for w in warnings(run)] or ["None."]),
        *section("Fingerprints", fingerprint.markdown(rows, names)),
        *section("Storage", fiodiff.markdown(storage(run), names)),
        *disturbed.markdown(disturbed.rows(run.dir)),
        *profile.markdown(run.dir, {x: run.side(x) for x in SIDES}, names),
        *section("Boots, in run order", [BOOTS_NOTE, "", *_boot_table(run.samples)]),
        *section("Plots", _plots(run)),
        "## Scenario",
        "",
        f"`{scen['name']}`, hash `{scen.get('hash')}`; ran on: {', '.join(accels)}.",
        "",
        *[f"Host under the guest: {h}.\n" for h in host_line(run.samples)],
        *([TCG_NOTE, ""] if any(a.endswith("/tcg") for a in accels) else []),
    ]
    return "\n".join(lines)


def render(
    run_dir: Path, summary: Mapping[str, Any] | None = None, min_effect: float | None = None
) -> tuple[Path, str]:
    """Write RUN/report.md and the PNGs from RUN's samples (its summary.json, checked,
    unless given); the report's path and the verdict line."""
    run = load(run_dir, load_summary(run_dir) if summary is None else summary, min_effect)
    path = run_dir / REPORT
    atomic.write_text(path, markdown(run, override=min_effect is not None))
    return path, verdict_line(run.summary, run.verdict)
