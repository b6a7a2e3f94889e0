"""PNG plots for reports: tps per boot, per-second tps series, tps along a bisect path,
tps against wall-clock time, the posterior of a bisection after each sample.

matplotlib is imported inside the functions so that `kbisect --help` stays fast. Figures
are built with `matplotlib.figure.Figure` (no pyplot, no global state, Agg rendering) and
saved without a version stamp, so the same samples give the same bytes; `figure` and
`save` are how every report's PNG is made (kbisect/study/figures.py draws with them too).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kbisect.core import atomic
from kbisect.measure.record import Sample
from kbisect.stats import drift

SIDE_COLOURS = {"A": "#2f6db5", "B": "#e07b16"}
OTHER_COLOUR = "#6b6b6b"
VERDICT_COLOURS = {"good": "#2e8b3a", "bad": "#c8302c", "skip": "#9a9a9a"}
TIME_COLOURS = ("#2e8b3a", "#c8302c", "#7b4fa0", "#1b9e9e", "#b8860b", "#d9488b", "#6b6b6b")
PER_BOOT = "tps-per-boot.png"
SERIES = "tps-series.png"


def figure(width: float = 8.0, height: float = 4.5, bottom: float = 0.11) -> Any:
    from matplotlib.figure import Figure

    # Fixed margins: a layout engine would cost half of the rendering time.
    fig = Figure(figsize=(width, height), dpi=110)
    fig.subplots_adjust(left=0.85 / width, right=1 - 0.15 / width, top=0.93, bottom=bottom)
    return fig


def save(fig: Any, path: Path) -> Path:
    """Write the PNG next to its final name, then rename: readers never see half a file."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    atomic.write_bytes(path, buf.getvalue())
    return path


def frame(ax: Any, title: str, *, ylabel: str = "tps") -> None:
    """What every tps plot's axes share: the y label, the title, y from 0, a light
    horizontal grid."""
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)


def _level(ax: Any, y: float, label: str) -> None:
    """A level to read the points against (a threshold, a confidence): a dotted grey line."""
    ax.axhline(y, color=OTHER_COLOUR, linestyle=":", linewidth=1.2, label=label)


def _colour(side: str | None) -> str:
    return SIDE_COLOURS.get(side or "", OTHER_COLOUR)


def _sides(samples: Sequence[Sample]) -> list[str]:
    return sorted({str(s.label) for s in samples})


def _name(side: str, names: Mapping[str, str] | None) -> str:
    return f"{side}: {names[side]}" if names and side in names else side


def tps_per_boot(
    samples: Sequence[Sample],
    path: Path,
    *,
    names: Mapping[str, str] | None = None,
    bands: Mapping[str, tuple[float, float]] | None = None,
) -> Path:
    """Each boot's tps at its position in the boot order, per-side mean and CI band.

    Failed boots are drawn as crosses on the x axis: they are part of the story but
    carry no tps.
    """
    fig = figure()
    ax = fig.add_subplot()
    for side in _sides(samples):
        boots = [(i, s) for i, s in enumerate(samples, 1) if str(s.label) == side]
        ok = [(i, s.tps) for i, s in boots if s.ok and s.tps]
        if not ok:
            continue
        xs, ys = zip(*ok, strict=True)
        mean = sum(ys) / len(ys)
        colour = _colour(side)
        label = f"{_name(side, names)} (n={len(ys)}, mean {mean:,.1f})"
        ax.scatter(xs, ys, s=36, color=colour, label=label, zorder=3)
        ax.axhline(mean, color=colour, linestyle="--", linewidth=1.2)
        if bands and side in bands:
            low, high = bands[side]
            ax.axhspan(low, high, color=colour, alpha=0.15, linewidth=0)
    failed = [i for i, s in enumerate(samples, 1) if not s.ok]
    if failed:
        ax.scatter(
            failed,
            [0.0] * len(failed),
            marker="x",
            s=60,
            color="#c8302c",
            label=f"failed boot ({len(failed)})",
            zorder=4,
            clip_on=False,
        )
    ax.set_xlabel("boot (run order)")
    ax.set_xticks(range(1, len(samples) + 1))
    note = "; bands: 95% CI of each side's mean" if bands else ""
    frame(ax, f"tps per boot, in boot order{note}")
    ax.legend(loc="best", fontsize=8)
    return save(fig, path)


def series(
    samples: Sequence[Sample], path: Path, *, names: Mapping[str, str] | None = None
) -> Path:
    """The per-second tps of every run: one light line per run, warm-up runs dashed."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    fig = figure()
    ax = fig.add_subplot()
    handles = []
    for side in _sides(samples):
        colour = _colour(side)
        for s in samples:
            if str(s.label) != side:
                continue
            for run in s.runs:
                ys = run.get("series") or []
                warm = bool(run.get("warmup"))
                ax.plot(
                    range(1, len(ys) + 1),
                    ys,
                    color=colour,
                    linewidth=1.0,
                    alpha=0.3 if warm else 0.55,
                    linestyle="--" if warm else "-",
                )
        handles.append(Line2D([], [], color=colour, label=_name(side, names)))
    handles.append(Line2D([], [], color=OTHER_COLOUR, linestyle="--", label="warm-up run"))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("second of run")
    frame(ax, "tps per second within each run")
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    return save(fig, path)


def tps_along_path(
    points: Sequence[tuple[str, Sequence[float], str]],
    path: Path,
    *,
    title: str = "tps along the bisect path",
    threshold: float | None = None,
) -> Path:
    """Samples and mean per tested revision (label, tps samples, verdict), in the given order.

    The verdict picks the colour: good green, bad red, skip grey, anything else blue. A
    revision without samples is a cross on the x axis; `threshold` a dotted line.
    """
    fig = figure(max(6.0, 1.0 + 0.9 * len(points)), 4.5, bottom=0.2)
    ax = fig.add_subplot()
    seen: dict[str, str] = {}
    for x, (_, tps, verdict) in enumerate(points):
        colour = VERDICT_COLOURS.get(verdict, SIDE_COLOURS["A"])
        # Deterministic spread so equal values stay visible.
        offsets = [((j % 5) - 2) * 0.06 for j in range(len(tps))]
        label = None if verdict in seen else verdict
        seen[verdict] = colour
        ax.scatter(
            [x + o for o in offsets],
            list(tps),
            s=28,
            color=colour,
            alpha=0.8,
            label=label,
            zorder=3,
        )
        if tps:
            ax.hlines(sum(tps) / len(tps), x - 0.3, x + 0.3, color=colour, linewidth=2)
        else:  # no sample (skipped, failed to build or boot): a mark on the axis
            ax.scatter([x], [0.0], marker="x", s=60, color=colour, zorder=4, clip_on=False)
    if threshold is not None:
        _level(ax, threshold, f"threshold {threshold:,.1f}")
    ax.set_xticks(range(len(points)))
    ax.set_xticklabels([p[0] for p in points], rotation=30, ha="right", fontsize=8)
    frame(ax, title)
    if seen or threshold is not None:
        ax.legend(loc="best", fontsize=8)
    return save(fig, path)


def tps_over_time(
    rows: Sequence[drift.Timed],
    path: Path,
    *,
    title: str = "tps against wall-clock time",
    names: Mapping[str, str] | None = None,
) -> Path:
    """tps against minutes since the first sample, one colour per group (a revision, a
    compare side, a study cell; `names` labels them) in the order the rows bring them,
    joined by a thin line: a host that drifts shows as a slope shared by the groups; a
    legend when there are at most 12 groups. The rows are measure/timeline.py's."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        label = names.get(r.revision, r.revision) if names else r.revision
        groups.setdefault(label, []).append((r.t / 60.0, r.tps))
    fig = figure()
    ax = fig.add_subplot()
    colours = [SIDE_COLOURS["A"], SIDE_COLOURS["B"], *TIME_COLOURS]
    for i, (name, points) in enumerate(groups.items()):
        xs, ys = zip(*sorted(points), strict=True) if points else ((), ())
        colour = colours[i % len(colours)]
        ax.plot(xs, ys, color=colour, linewidth=0.6, alpha=0.5)
        ax.scatter(xs, ys, s=24, color=colour, label=f"{name} (n={len(xs)})", zorder=3)
    ax.set_xlabel("minutes since the first sample")
    frame(ax, title)
    if 0 < len(groups) <= 12:
        ax.legend(loc="lower left", fontsize=7)
    return save(fig, path)


def posterior_trail(
    lines: Mapping[str, Sequence[float]],
    path: Path,
    *,
    marks: Sequence[str] = (),
    confidence: float | None = None,
) -> Path:
    """Each named candidate's probability after each sample (x: the sample's number);
    `marks` labels the samples (the revision sampled) under the axis when there are at
    most 40; `confidence` a dotted line."""
    n = max((len(v) for v in lines.values()), default=0)
    fig = figure(max(8.0, 2.0 + 0.22 * n), 4.5, bottom=0.22 if marks else 0.11)
    ax = fig.add_subplot()
    colours = [*TIME_COLOURS, SIDE_COLOURS["A"], SIDE_COLOURS["B"]]
    for i, (name, ps) in enumerate(lines.items()):
        ax.plot(
            range(1, len(ps) + 1),
            list(ps),
            color=colours[i % len(colours)],
            linewidth=1.4,
            marker="o",
            markersize=3,
            label=name,
        )
    if confidence is not None:
        _level(ax, confidence, f"confidence {confidence:g}")
    if marks and len(marks) <= 40:
        ax.set_xticks(range(1, len(marks) + 1))
        ax.set_xticklabels(list(marks), rotation=60, ha="right", fontsize=6)
    ax.set_xlabel("sample (in time order)")
    ax.set_ylabel("probability")
    ax.set_ylim(0, 1.02)
    ax.set_title("P(first bad commit) after each sample", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    if lines:
        ax.legend(loc="upper left", fontsize=7)
    return save(fig, path)
