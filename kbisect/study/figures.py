"""A study's PNGs (kbisect/report/plots.py's figure and save, same deterministic bytes):

- study-tps.png: tps vs kernel, one line per cell with 95% intervals (Vondra's figure);
- study-ratios.png: a heat map of each kernel's ratio to the baseline, kernels x cells;
- study-clients.png: tps vs clients, one line per kernel and setting of the other axes
  (the huge-pages figure), when the study has a pgbench.clients axis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbisect.report import plots
from kbisect.study.analysis import Analysis

TPS = "study-tps.png"
RATIOS = "study-ratios.png"
CLIENTS = "study-clients.png"
TIME = "study-time.png"
CLIENTS_AXIS = "pgbench.clients"


def tps_vs_kernel(a: Analysis, path: Path) -> Path:
    kernels = range(len(a.definition["kernels"]))
    fig = plots.figure(max(6.0, 1.5 + 1.1 * len(kernels)), 4.8, bottom=0.22)
    ax = fig.add_subplot()
    for c in range(len(a.definition["cells"])):
        xs, ys, errs = [], [], []
        for k in kernels:
            if (ci := a.points[(k, c)].ci) is not None:
                xs.append(k)
                ys.append(ci[0])
                errs.append(ci[0] - ci[1])
        if xs:
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, linewidth=1.2, label=a.cell(c))
    ax.set_xticks(list(kernels))
    ax.set_xticklabels([a.kernel(k) for k in kernels], rotation=25, ha="right", fontsize=8)
    plots.frame(ax, "tps per kernel, one line per cell", ylabel="tps (mean, 95% CI)")
    ax.legend(loc="best", fontsize=7)
    return plots.save(fig, path)


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
    ax.set_title(f"tps ratio to {a.kernel(a.baseline)} (blue faster, red slower)", fontsize=10)
    fig.colorbar(image, ax=ax)
    return plots.save(fig, path)


def _clients_series(a: Analysis) -> dict[str, list[tuple[float, float]]]:
    """`kernel, other settings` -> [(clients, mean tps)]."""
    out: dict[str, list[tuple[float, float]]] = {}
    for c, cell in enumerate(a.definition["cells"]):
        values: dict[str, Any] = dict(cell["values"])
        clients = float(values.pop(CLIENTS_AXIS))
        rest = " ".join(f"{n.rsplit('.', 1)[-1]}={v}" for n, v in values.items())
        for k in range(len(a.definition["kernels"])):
            if (ci := a.points[(k, c)].ci) is not None:
                key = ", ".join(filter(None, [a.kernel(k), rest]))
                out.setdefault(key, []).append((clients, ci[0]))
    return out


def tps_vs_clients(a: Analysis, path: Path) -> Path:
    fig = plots.figure(7.5, 4.5)
    ax = fig.add_subplot()
    for name, points in _clients_series(a).items():
        xs, ys = zip(*sorted(points), strict=True)
        ax.plot(xs, ys, marker="o", linewidth=1.2, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("pgbench clients")
    ax.set_ylabel("tps (mean)")
    ax.set_title("tps vs clients, one line per kernel and setting", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=7)
    return plots.save(fig, path)


def draw(a: Analysis, run_dir: Path) -> list[str]:
    """Draw what applies; the Markdown lines that show them."""
    out = [f"![tps per kernel, one line per cell]({tps_vs_kernel(a, run_dir / TPS).name})", ""]
    if len(a.definition["kernels"]) > 1:
        out += [f"![ratio to the baseline]({ratio_map(a, run_dir / RATIOS).name})", ""]
    names = [x["name"] for x in a.definition["axes"]]
    if CLIENTS_AXIS in names and _clients_series(a):
        out += [f"![tps vs clients]({tps_vs_clients(a, run_dir / CLIENTS).name})", ""]
    if a.timed:
        title = "tps against wall-clock time, per kernel and cell"
        plots.tps_over_time(a.timed, run_dir / TIME, title=title)
        out += [f"![tps against time]({TIME})", ""]
    return out
