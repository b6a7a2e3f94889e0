"""A study's PNGs (kbisect/report/plots.py's figure and save, same deterministic bytes):

- study-tps.png: tps vs kernel, one line per cell with 95% intervals (Vondra's figure);
- study-ratios.png: a heat map of each kernel's ratio to the baseline, kernels x cells;
- study-clients.png: tps vs clients, one line per kernel and setting of the other axes
  (the huge-pages figure), when the study has a pgbench.clients axis.

Over a pool (Analysis.pooled), study-tps.png and study-clients.png draw each machine's
own means, a line per cell (or kernel and setting) and machine: the colour is the cell,
the marker and dash the machine, each in the legend. A mean over all machines would
mix the machines' levels; the ratio map's ratios are within machines already.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.report import plots
from kbisect.stats import means
from kbisect.stats.inference import CONFIDENCE
from kbisect.study.analysis import Analysis

TPS = "study-tps.png"
RATIOS = "study-ratios.png"
CLIENTS = "study-clients.png"
TIME = "study-time.png"
CLIENTS_AXIS = "pgbench.clients"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # a machine's, over a pool
DASHES = ("-", "--", ":", "-.")


@dataclass(frozen=True)
class Series:
    """One line of study-tps.png: a cell's mean tps per kernel (with its 95% interval
    when 2 boots or more) on `machine`, or on every machine (None) for one machine."""

    cell: int
    machine: str | None
    xs: tuple[int, ...]
    ys: tuple[float, ...]
    errs: tuple[float, ...]


def _mean(xs: Sequence[float]) -> tuple[float, float]:
    """The mean and the half width of its 95% interval (0 for one boot)."""
    if len(xs) < 2:
        return xs[0], 0.0
    ci = means.mean_ci(xs, CONFIDENCE)
    return ci[0], ci[0] - ci[1]


def kernel_series(a: Analysis) -> list[Series]:
    """study-tps.png's lines: one per cell, or over a pool one per cell and machine."""
    kernels = range(len(a.definition["kernels"]))
    out = []
    for c in range(len(a.definition["cells"])):
        if not a.pooled:
            got = [(k, ci) for k in kernels if (ci := a.points[(k, c)].ci) is not None]
            if got:
                xs = tuple(k for k, _ in got)
                ys = tuple(ci[0] for _, ci in got)
                out.append(Series(c, None, xs, ys, tuple(ci[0] - ci[1] for _, ci in got)))
            continue
        for m in a.machines:
            mine = [(k, _mean(tps)) for k in kernels if (tps := a.points[(k, c)].on(m))]
            if mine:
                xs = tuple(k for k, _ in mine)
                ys, errs = (tuple(f[i] for _, f in mine) for i in (0, 1))
                out.append(Series(c, m, xs, ys, errs))
    return out


def _machine_style(a: Analysis, m: str) -> dict[str, Any]:
    i = a.machines.index(m)
    return {"marker": MARKERS[i % len(MARKERS)], "linestyle": DASHES[i % len(DASHES)]}


def _legend(ax: Any, a: Analysis, colours: dict[str, str]) -> None:
    """Over a pool: a colour per line name and a marker and dash per machine."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=col, linewidth=1.2, label=n) for n, col in colours.items()]
    handles += [
        Line2D([], [], color=plots.OTHER_COLOUR, label=m, **_machine_style(a, m))
        for m in a.machines
    ]
    ax.legend(handles=handles, loc="best", fontsize=7)


def _colour(i: int) -> str:
    return f"C{i % 10}"


def tps_figure(a: Analysis) -> Any:
    """study-tps.png's figure (not saved)."""
    kernels = range(len(a.definition["kernels"]))
    fig = plots.figure(max(6.0, 1.5 + 1.1 * len(kernels)), 4.8, bottom=0.22)
    ax = fig.add_subplot()
    series = kernel_series(a)
    width = 0.3 / max(len(a.machines), 1)  # a pool's machines side by side at a kernel
    for s in series:
        if s.machine is None:
            ax.errorbar(
                s.xs, s.ys, yerr=s.errs, marker="o", capsize=3, linewidth=1.2, label=a.cell(s.cell)
            )
            continue
        shift = (a.machines.index(s.machine) - (len(a.machines) - 1) / 2) * width
        ax.errorbar(
            [x + shift for x in s.xs],
            s.ys,
            yerr=s.errs,
            capsize=3,
            linewidth=1.2,
            color=_colour(s.cell),
            **_machine_style(a, s.machine),
        )
    ax.set_xticks(list(kernels))
    ax.set_xticklabels([a.kernel(k) for k in kernels], rotation=25, ha="right", fontsize=8)
    if not a.pooled:
        plots.frame(ax, "tps per kernel, one line per cell", ylabel="tps (mean, 95% CI)")
        ax.legend(loc="best", fontsize=7)
        return fig
    title = "tps per kernel, one line per cell and machine"
    plots.frame(ax, title, ylabel="tps (mean on the machine, 95% CI)")
    cells = sorted({s.cell for s in series})
    _legend(ax, a, {a.cell(c): _colour(c) for c in cells})
    return fig


def ratio_map(a: Analysis, path: Path) -> Path:
    from matplotlib.colors import TwoSlopeNorm

    kernels, cells = len(a.definition["kernels"]), len(a.definition["cells"])
    grid = [[float("nan")] * cells for _ in range(kernels)]
    for c in range(cells):
        grid[a.baseline][c] = 1.0
        for k in range(kernels):
            if (r := a.vs_baseline.get((k, c))) is not None:
                grid[k][c] = r.ratio
    values = [v for row in grid for v in row if v == v]
    spread = max([abs(v - 1) for v in values] + [0.05])
    fig = plots.figure(max(6.0, 2.5 + 1.2 * cells), max(3.0, 1.2 + 0.5 * kernels), bottom=0.3)
    ax = fig.add_subplot()
    norm = TwoSlopeNorm(vcenter=1.0, vmin=1 - spread, vmax=1 + spread)
    image = ax.imshow(grid, cmap="RdBu", norm=norm, aspect="auto")
    for k in range(kernels):
        for c in range(cells):
            if grid[k][c] == grid[k][c]:
                ax.text(c, k, f"{grid[k][c]:.3f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(cells))
    ax.set_xticklabels([a.cell(c) for c in range(cells)], rotation=25, ha="right", fontsize=7)
    ax.set_yticks(range(kernels))
    ax.set_yticklabels([a.kernel(k) for k in range(kernels)], fontsize=7)
    within = ", within machines" if a.pooled else ""
    ax.set_title(
        f"tps ratio to {a.kernel(a.baseline)}{within} (blue faster, red slower)", fontsize=10
    )
    fig.colorbar(image, ax=ax)
    return plots.save(fig, path)


def _clients_series(
    a: Analysis, machine: str | None = None
) -> dict[str, list[tuple[float, float]]]:
    """`kernel, other settings` -> [(clients, mean tps)]: over all boots, or those of
    one `machine` of a pool."""
    out: dict[str, list[tuple[float, float]]] = {}
    for c, cell in enumerate(a.definition["cells"]):
        values: dict[str, Any] = dict(cell["values"])
        clients = float(values.pop(CLIENTS_AXIS))
        rest = " ".join(f"{n.rsplit('.', 1)[-1]}={v}" for n, v in values.items())
        for k in range(len(a.definition["kernels"])):
            key = ", ".join(filter(None, [a.kernel(k), rest]))
            if machine is not None:
                if tps := a.points[(k, c)].on(machine):
                    out.setdefault(key, []).append((clients, sum(tps) / len(tps)))
            elif (ci := a.points[(k, c)].ci) is not None:
                out.setdefault(key, []).append((clients, ci[0]))
    return out


def clients_series(a: Analysis) -> dict[str | None, dict[str, list[tuple[float, float]]]]:
    """study-clients.png's lines: per machine of a pool (the key None for one machine)."""
    if not a.pooled:
        return {None: got} if (got := _clients_series(a)) else {}
    return {m: got for m in a.machines if (got := _clients_series(a, m))}


def clients_figure(a: Analysis) -> Any:
    """study-clients.png's figure (not saved)."""
    fig = plots.figure(7.5, 4.5)
    ax = fig.add_subplot()
    colours: dict[str, str] = {}
    for m, lines in clients_series(a).items():
        for name, points in lines.items():
            xs, ys = zip(*sorted(points), strict=True)
            if m is None:
                ax.plot(xs, ys, marker="o", linewidth=1.2, label=name)
                continue
            colour = colours.setdefault(name, _colour(len(colours)))
            ax.plot(xs, ys, linewidth=1.2, color=colour, **_machine_style(a, m))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("pgbench clients")
    ax.set_ylabel("tps (mean on the machine)" if a.pooled else "tps (mean)")
    what = "kernel, setting and machine" if a.pooled else "kernel and setting"
    ax.set_title(f"tps vs clients, one line per {what}", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if a.pooled:
        _legend(ax, a, colours)
    else:
        ax.legend(loc="best", fontsize=7)
    return fig


def draw(a: Analysis, run_dir: Path) -> list[str]:
    """Draw what applies; the Markdown lines that show them."""
    each = "cell and machine" if a.pooled else "cell"
    plots.save(tps_figure(a), run_dir / TPS)
    out = [f"![tps per kernel, one line per {each}]({TPS})", ""]
    if len(a.definition["kernels"]) > 1:
        out += [f"![ratio to the baseline]({ratio_map(a, run_dir / RATIOS).name})", ""]
    names = [x["name"] for x in a.definition["axes"]]
    if CLIENTS_AXIS in names and clients_series(a):
        plots.save(clients_figure(a), run_dir / CLIENTS)
        out += [f"![tps vs clients]({CLIENTS})", ""]
    if a.timed:
        title = "tps against wall-clock time, per kernel and cell"
        plots.tps_over_time(a.timed, run_dir / TIME, title=title)
        out += [f"![tps against time]({TIME})", ""]
    return out
