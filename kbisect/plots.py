"""PNG plots for reports: tps per boot, per-second tps series, tps along a bisect path.

matplotlib is imported inside the functions so that `kbisect --help` stays fast. Figures
are built with `matplotlib.figure.Figure` (no pyplot, no global state, Agg rendering) and
saved without a version stamp, so the same samples give the same bytes.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SIDE_COLOURS = {"A": "#2f6db5", "B": "#e07b16"}
OTHER_COLOUR = "#6b6b6b"
VERDICT_COLOURS = {"good": "#2e8b3a", "bad": "#c8302c", "skip": "#9a9a9a"}
PER_BOOT = "tps-per-boot.png"
SERIES = "tps-series.png"


def _figure(width: float = 8.0, height: float = 4.5) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    return fig


def _save(fig: Any, path: Path) -> Path:
    """Write the PNG next to its final name, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", metadata={"Software": None})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _colour(side: str | None) -> str:
    return SIDE_COLOURS.get(side or "", OTHER_COLOUR)


def _sides(samples: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({str(s.get("label")) for s in samples})


def _name(side: str, names: Mapping[str, str] | None) -> str:
    return f"{side}: {names[side]}" if names and side in names else side


def tps_per_boot(
    samples: Sequence[Mapping[str, Any]],
    path: Path,
    *,
    names: Mapping[str, str] | None = None,
    bands: Mapping[str, tuple[float, float]] | None = None,
    title: str = "tps per boot, in boot order",
) -> Path:
    """Each boot's tps at its position in the boot order, per-side mean and CI band.

    Failed boots are drawn as crosses on the x axis: they are part of the story but
    carry no tps.
    """
    fig = _figure()
    ax = fig.add_subplot()
    for side in _sides(samples):
        boots = [(i, s) for i, s in enumerate(samples, 1) if str(s.get("label")) == side]
        ok = [(i, float(s["tps"])) for i, s in boots if s.get("status") == "ok" and s.get("tps")]
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
    failed = [i for i, s in enumerate(samples, 1) if s.get("status") != "ok"]
    if failed:
        ax.scatter(failed, [0.0] * len(failed), marker="x", s=60, color="#c8302c",
                   label=f"failed boot ({len(failed)})", zorder=4, clip_on=False)
    ax.set_xlabel("boot (run order)")
    ax.set_ylabel("tps")
    ax.set_title(title + ("; bands: 95% CI of each side's mean" if bands else ""), fontsize=10)
    ax.set_xticks(range(1, len(samples) + 1))
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


def series(
    samples: Sequence[Mapping[str, Any]],
    path: Path,
    *,
    names: Mapping[str, str] | None = None,
    title: str = "tps per second within each run",
) -> Path:
    """The per-second tps of every run: one light line per run, warm-up runs dashed."""
    from matplotlib.lines import Line2D

    fig = _figure()
    ax = fig.add_subplot()
    handles = []
    for side in _sides(samples):
        colour = _colour(side)
        for s in samples:
            if str(s.get("label")) != side:
                continue
            for run in s.get("runs") or []:
                ys = run.get("series") or []
                warm = bool(run.get("warmup"))
                ax.plot(range(1, len(ys) + 1), ys, color=colour, linewidth=1.0,
                        alpha=0.3 if warm else 0.55, linestyle="--" if warm else "-")
        handles.append(Line2D([], [], color=colour, label=_name(side, names)))
    handles.append(Line2D([], [], color=OTHER_COLOUR, linestyle="--", label="warm-up run"))
    ax.set_xlabel("second of run")
    ax.set_ylabel("tps")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    return _save(fig, path)


def tps_along_path(
    points: Sequence[tuple[str, Sequence[float], str]],
    path: Path,
    *,
    title: str = "tps along the bisect path",
) -> Path:
    """Samples and mean per tested revision (label, tps samples, verdict), in the given order.

    The verdict picks the colour: good green, bad red, skip grey, anything else blue.
    """
    fig = _figure(max(6.0, 1.0 + 0.9 * len(points)), 4.5)
    ax = fig.add_subplot()
    seen: dict[str, str] = {}
    for x, (_, tps, verdict) in enumerate(points):
        colour = VERDICT_COLOURS.get(verdict, SIDE_COLOURS["A"])
        # Deterministic spread so equal values stay visible.
        offsets = [((j % 5) - 2) * 0.06 for j in range(len(tps))]
        label = None if verdict in seen else verdict
        seen[verdict] = colour
        ax.scatter([x + o for o in offsets], list(tps), s=28, color=colour, alpha=0.8,
                   label=label, zorder=3)
        if tps:
            ax.hlines(sum(tps) / len(tps), x - 0.3, x + 0.3, color=colour, linewidth=2)
    ax.set_xticks(range(len(points)))
    ax.set_xticklabels([p[0] for p in points], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("tps")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    if seen:
        ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)
