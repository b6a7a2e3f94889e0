"""A bisection's PNGs, from its summary.json (kbisect/report/plots.py draws them): tps
along the revisions tested (bisect.png), tps against wall-clock time per revision
(tps-time.png) and, searching by the posterior, the posterior after each sample
(posterior.png)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kbisect.report import plots
from kbisect.stats import drift

PATH = "bisect.png"
TIME = "tps-time.png"
TRAIL = "posterior.png"


def along_path(s: Mapping[str, Any], path: Path, title: str, threshold: float | None) -> Path:
    """tps of every revision tested, in the table's order, coloured by verdict."""
    points = [
        (f"{i} {r['commit'][:8]}", r["tps"], r["verdict"]) for i, r in enumerate(s["revisions"])
    ]
    return plots.tps_along_path(points, path, title=title, threshold=threshold)


def over_time(s: Mapping[str, Any], path: Path, names: Mapping[str, str]) -> Path | None:
    """tps against time, one colour per revision (the endpoints, named, first); None
    without samples (a run from before they were kept)."""
    rows: Sequence[drift.Timed] = [
        drift.Timed(r["commit"], r["t"], r["tps"]) for r in s.get("samples", []) if r["tps"]
    ]
    if not rows:
        return None
    order = sorted(rows, key=lambda r: (r.revision not in names, r.t))
    return plots.tps_over_time(
        order,
        path,
        title="tps against wall-clock time, per revision",
        names={r.revision: names.get(r.revision, r.revision[:12]) for r in rows},
    )


def trail(s: Mapping[str, Any], path: Path) -> Path:
    """P(first bad) of the final answer's top candidates after each sample."""
    names = s.get("trail_names") or []
    lines = {f"{c[:10]}": [t["p_names"][i] for t in s["trail"]] for i, c in enumerate(names)}
    marks = [t["commit"][:7] for t in s["trail"]]
    return plots.posterior_trail(lines, path, confidence=s["options"]["confidence"], marks=marks)
