"""Interactions: does the effect of one axis depend on another? For two axes with two
levels each (preempt none/full x huge pages off/on), per kernel and per level of the other
axes, the ratio of ratios (x2/x1 at y2) / (x2/x1 at y1) with its interval: the four
cells' log variances add (Welch-Satterthwaite df). An interval away from 1 says yes.

Over a pool (the four cells' boots from more than one machine), the ratio of ratios is a
contrast of the cells' effects in the fit with the machine as a fixed effect
(stats/blocked.py), its interval on that fit's residual df: a machine's level never
enters it. A square whose machines cannot be told from its cells is left out."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kbisect.stats import blocked, means, ratio
from kbisect.stats.inference import CONFIDENCE

Unit = tuple[int, int]
# A square's cells x1y1, x2y1, x1y2, x2y2: the effect of x at y1, at y2, and their ratio
# (log scale), all three from one fit (stats/blocked.py log_contrasts).
CONTRASTS = ((-1.0, 1.0, 0.0, 0.0), (0.0, 0.0, -1.0, 1.0), (1.0, -1.0, -1.0, 1.0))


@dataclass(frozen=True)
class Interaction:
    kernel: int
    x: str  # axis names
    y: str
    x_levels: tuple[str, str]
    y_levels: tuple[str, str]
    fixed: tuple[tuple[str, str], ...]  # the other axes' levels
    effect_y1: float  # mean(x2) / mean(x1) at y1
    effect_y2: float
    ratio: float  # effect_y2 / effect_y1
    low: float
    high: float


def _labels(axis: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(lv["label"] for lv in axis["levels"])


def squares(d: Mapping[str, Any]) -> list[tuple[int, int, dict[int, str], list[int]]]:
    """Every 2x2 of cells: (axis x, axis y, the other axes' levels, the cells x1y1, x2y1,
    x1y2, x2y2), for each pair of two-level axes and each setting of the others."""
    axes = d["axes"]
    index = {tuple(c["values"][a["name"]] for a in axes): i for i, c in enumerate(d["cells"])}
    out = []
    for i, j in itertools.combinations(range(len(axes)), 2):
        xs, ys = _labels(axes[i]), _labels(axes[j])
        if len(xs) != 2 or len(ys) != 2:
            continue
        others = [k for k in range(len(axes)) if k not in (i, j)]
        for rest in itertools.product(*(_labels(axes[k]) for k in others)):
            fixed = dict(zip(others, rest, strict=True))
            four = []
            for y in ys:
                for x in xs:
                    values = {**fixed, i: x, j: y}
                    four.append(index[tuple(values[k] for k in range(len(axes)))])
            out.append((i, j, fixed, four))
    return out


def _interaction(
    d: Mapping[str, Any], k: int, square: Any, four: list[means.Summary]
) -> Interaction:
    s11, s21, s12, s22 = four
    e1, e2 = s21.mean / s11.mean, s22.mean / s12.mean
    var, df = means.welch([(s.cv**2 / s.n, s.n - 1) for s in four])
    r = ratio.interval(e2 / e1, math.sqrt(var), df, CONFIDENCE, ratio.METHOD)
    return _made(d, k, square, (e1, e2, e2 / e1), (r.low, r.high))


def _within(d: Mapping[str, Any], k: int, square: Any, four: list[Any]) -> Interaction | None:
    """The interaction with the machine as a fixed effect; None when the machines that
    measured the four cells cannot be told from them."""
    tps = [p.tps for p in four]
    on = [p.machines for p in four]
    try:
        (e1, _, _), (e2, _, _), both = blocked.log_contrasts(tps, on, CONTRASTS)
        r = ratio.interval(math.exp(both[0]), both[1], both[2], CONFIDENCE, blocked.METHOD)
    except means.StatsError:
        return None
    return _made(d, k, square, (math.exp(e1), math.exp(e2), r.ratio), (r.low, r.high))


def _made(
    d: Mapping[str, Any],
    k: int,
    square: Any,
    effects: tuple[float, float, float],
    bounds: tuple[float, float],
) -> Interaction:
    i, j, fixed, _ = square
    axes = d["axes"]
    named = tuple((axes[o]["name"], v) for o, v in fixed.items())
    xs, ys = _labels(axes[i]), _labels(axes[j])
    return Interaction(
        k,
        axes[i]["name"],
        axes[j]["name"],
        (xs[0], xs[1]),
        (ys[0], ys[1]),
        named,
        *effects,
        *bounds,
    )


def interactions(d: Mapping[str, Any], pts: Mapping[Unit, Any]) -> list[Interaction]:
    """Every square's interaction per kernel; `pts` are study/analysis.py's Points (their
    summary, tps and machines)."""
    out = []
    for square in squares(d):
        for k in range(len(d["kernels"])):
            points = [pts[(k, c)] for c in square[3]]
            four = [p.summary for p in points]
            good = [s for s in four if s is not None and s.n >= 2 and s.mean > 0]
            if len(good) < 4:
                continue
            if len({m for p in points for m in p.machines}) > 1:
                if (got := _within(d, k, square, points)) is not None:
                    out.append(got)
            else:
                out.append(_interaction(d, k, square, good))
    return out
