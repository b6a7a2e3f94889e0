"""A study's numbers, recomputed from the stored samples every time.

- Per cell and kernel: the mean tps with its t interval (kbisect.stats), failed boots.
- Per cell: each kernel's ratio to the baseline kernel (delta method on the log, Welch).
- Steps: every pair of consecutive kernels in every cell is one test of "no change" (a
  Welch t test on the log ratio). The family is all those pairs x cells; Holm's step-down
  correction keeps its familywise error at ALPHA. A step is called when its Holm-adjusted
  p is below ALPHA and the change is at least the study's min effect. Intervals shown are
  per-comparison 95% intervals. Each step comes with the `kbisect bisect` line that
  looks for its commit (bisectline.py).
- Interactions: for two axes with two levels each (preempt none/full x huge pages
  off/on), per kernel and per level of the other axes, the ratio of ratios
  (x2/x1 at y2) / (x2/x1 at y1) with its interval (the four cells' log variances add;
  Welch-Satterthwaite df): an interval away from 1 says the effect of one axis depends
  on the other.
- Over a pool (samples from more than one machine: target.machine, targets/pool/): every
  ratio between two kernels of a cell, and every ratio of ratios, is fitted on log tps
  with the machine as a fixed effect (stats/blocked.py), so a machine a few percent
  faster than the others, however many of one kernel's boots it took, moves its own
  level and never a kernel's effect; p and the interval come from that fit's t (residual
  df). A comparison whose machines cannot be told from its kernels (no machine measured
  both) is left out with a warning. `per_machine` gives each machine's own ratios for
  the reports. Samples from one machine: the Welch figures above, unchanged.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbisect.measure import fingerprint, preempt, retake, timeline
from kbisect.measure.record import Sample
from kbisect.report import disturbed, servers
from kbisect.stats import drift, means, ratio
from kbisect.stats.inference import CONFIDENCE, holm
from kbisect.stats.interactions import Interaction, interactions
from kbisect.study import bisectline, store

ALPHA = 0.05
Unit = tuple[int, int]  # (kernel, cell)


@dataclass(frozen=True)
class Point:
    kernel: int
    cell: int
    tps: tuple[float, ...]
    failed: int
    fingerprints: tuple[Mapping[str, Any], ...]
    machines: tuple[str, ...] = ()  # the machine of each of tps (Sample.machine)

    @property
    def n(self) -> int:
        return len(self.tps)

    @property
    def summary(self) -> means.Summary | None:
        return means.summarize(self.tps) if self.tps else None

    @property
    def ci(self) -> tuple[float, float, float] | None:
        return means.mean_ci(self.tps, CONFIDENCE) if self.n >= 2 else None

    def on(self, m: str) -> tuple[float, ...]:
        """The tps of the boots machine `m` took."""
        return tuple(x for x, at in zip(self.tps, self.machines, strict=True) if at == m)


@dataclass(frozen=True)
class Step:
    cell: int
    a: int  # kernel indices, a before b
    b: int
    ratio: means.RatioCI
    p: float
    p_holm: float
    kind: str  # "regression", "improvement" or stats.NO_DIFFERENCE
    bisect: str | None  # the command that looks for the commit, if both are revisions
    differences: tuple[str, ...]  # fingerprint fields that differ between a and b
    elsewhere: str | None = None  # kernels in two trees: the bisect line for a git tree


@dataclass(frozen=True)
class Analysis:
    definition: Mapping[str, Any]
    points: dict[Unit, Point]
    vs_baseline: dict[Unit, means.RatioCI]
    steps: list[Step]
    tests: int  # the family Holm corrected over
    interactions: list[Interaction]
    warnings: list[str]
    timed: tuple[drift.Timed, ...] = ()  # ok samples against time, grouped by cell@machine
    disturbed: list[dict[str, Any]] | None = None  # report/disturbed.py's rows
    servers: tuple[str, ...] = ()  # report/servers.py's rows, per cell
    machines: tuple[str, ...] = ()  # a pool's machines that took boots, first seen first

    @property
    def pooled(self) -> bool:
        """Over more than one machine: the ratios are within machines."""
        return len(self.machines) > 1

    @property
    def baseline(self) -> int:
        return int(self.definition.get("baseline") or 0)

    def kernel(self, k: int) -> str:
        kernel = self.definition["kernels"][k]
        return str(kernel.get("name") or kernel["label"])

    def cell(self, c: int) -> str:
        return str(self.definition["cells"][c]["label"])

    def sentence(self, s: Step) -> str:
        """`clients=16: v1 -> v2: 0.620x (-38.0%), 95% CI [...], 3 + 3 boots, Holm p ...`."""
        r = s.ratio
        return (
            f"{self.cell(s.cell)}: {self.kernel(s.a)} -> {self.kernel(s.b)}: "
            f"{r.ratio:.3f}x ({(r.ratio - 1) * 100:+.1f}%), 95% CI [{r.low:.3f}, "
            f"{r.high:.3f}], {self.points[(s.a, s.cell)].n} + "
            f"{self.points[(s.b, s.cell)].n} boots, Holm p {s.p_holm:.2g}: {s.kind}"
        )

    def where(self, k: int) -> str:
        """`debian:7.2 at debian/7.2.13-1`: kernel k's tree and revision; an image's path."""
        kernel = self.definition["kernels"][k]
        if not kernel.get("rev"):
            return f"image {kernel.get('image') or kernel['label']}"
        return f"{store.kernel_tree(self.definition, k) or 'default'} at {kernel['rev']}"

    def apart(self, s: Step) -> str:
        """Why a step between two trees' kernels has no bisect line, ending where the line
        to run in a git tree follows."""
        a, b = (f"{self.kernel(k)} ({store.kernel_tree(self.definition, k)})" for k in (s.a, s.b))
        return (
            f"{a} and {b} are in different trees, and kbisect does not bisect across trees "
            "(releases imported from tarballs have no history between them); in a git tree "
            "that has both releases (a clone of linux.git) run"
        )

    def significant(self) -> list[Step]:
        return [s for s in self.steps if s.kind != means.NO_DIFFERENCE]

    def machines_run(self) -> list[tuple[Mapping[str, Any], str]]:
        """Each machine that ran the study, with the cells it ran ("all cells" for one)."""
        d = self.definition
        shares = d.get("shares") or [{"machine": d.get("machine"), "share": d.get("share")}]
        return [
            (
                s.get("machine") or {},
                " ".join((s.get("share") or {}).get("cells") or []) or "all cells",
            )
            for s in shares
        ]


def points(definition: Mapping[str, Any], samples: Sequence[Sample]) -> dict[Unit, Point]:
    found: dict[Unit, list[Sample]] = {}
    for s in samples:
        unit = store.unit_of(s.label)
        if unit is not None:
            found.setdefault(unit, []).append(s)
    out = {}
    for k, c in itertools.product(
        range(len(definition["kernels"])), range(len(definition["cells"]))
    ):
        got = found.get((k, c), [])
        ok = [s for s in got if retake.counts(s)]
        out[(k, c)] = Point(
            k,
            c,
            tuple(s.tps or 0.0 for s in ok),
            sum(s.status not in ("ok", retake.DISTURBED) for s in got),
            tuple(s.fingerprint for s in ok),
            tuple(s.machine for s in ok),
        )
    return out


def _differences(pa: Point, pb: Point) -> tuple[str, ...]:
    rows = fingerprint.diff({"a": list(pa.fingerprints), "b": list(pb.fingerprints)})
    return tuple(
        f"{r.field}: {' / '.join(r.values['a'])} -> {' / '.join(r.values['b'])}"
        for r in rows
        if r.differs
    )


def _ratio(pa: Point, pb: Point) -> tuple[means.RatioCI, float] | None:
    """B/A with its interval and the p of "no change"; None without 2 samples a side.
    Over more than one machine, within machines: means.StatsError when no machine
    measured both kernels."""
    sa, sb = pa.summary, pb.summary
    if sa is None or sb is None or sa.n < 2 or sb.n < 2:
        return None
    on = (pa.machines, pb.machines) if len({*pa.machines, *pb.machines}) > 1 else None
    r = ratio.ratio_ci(pa.tps, pb.tps, CONFIDENCE, machines=on)
    return r, ratio.p_value(pa.tps, pb.tps, machines=on)


def _tried(
    d: Mapping[str, Any], pa: Point, pb: Point, notes: list[str]
) -> tuple[means.RatioCI, float] | None:
    """`_ratio`, or None with a warning in `notes` when the machines cannot be told
    from the kernels."""
    try:
        return _ratio(pa, pb)
    except means.StatsError as exc:
        kernels = d["kernels"]
        note = (
            f"{kernels[pa.kernel]['label']} vs {kernels[pb.kernel]['label']} in "
            f"{d['cells'][pa.cell]['label']}: {exc}; left out"
        )
        notes += [] if note in notes else [note]
        return None


def steps(
    d: Mapping[str, Any], pts: Mapping[Unit, Point], notes: list[str]
) -> tuple[list[Step], int]:
    raw = []
    for c in range(len(d["cells"])):
        for a in range(len(d["kernels"]) - 1):
            if (got := _tried(d, pts[(a, c)], pts[(a + 1, c)], notes)) is not None:
                raw.append((c, a, *got))
    adjusted = holm([p for *_, p in raw])
    effect = float(d.get("min_effect", 0.02))
    out = []
    for (c, a, r, p), p_adj in zip(raw, adjusted, strict=True):
        kind = means.NO_DIFFERENCE
        if p_adj < ALPHA and abs(r.ratio - 1) >= effect:
            kind = "regression" if r.ratio < 1 else "improvement"
        better = kind == "improvement"
        out.append(
            Step(
                c,
                a,
                a + 1,
                r,
                p,
                p_adj,
                kind,
                bisectline.here(d, c, a, a + 1, better),
                _differences(pts[(a, c)], pts[(a + 1, c)]),
                bisectline.elsewhere(d, c, a, a + 1, better),
            )
        )
    return out, len(raw)


def _warnings(d: Mapping[str, Any], pts: Mapping[Unit, Point]) -> list[str]:
    out = []
    kernels, cells = d["kernels"], d["cells"]
    for (k, c), p in sorted(pts.items()):
        where = f"{kernels[k]['label']} in {cells[c]['label']}"
        if p.n < 2:
            out.append(f"{where}: {p.n} good sample(s): no interval, left out of the steps")
        if p.failed:
            out.append(f"{where}: {p.failed} failed boot(s), kept out of the statistics")
        if (s := p.summary) is not None and s.n >= 2 and s.cv > means.HIGH_CV:
            out.append(f"{where}: CV {s.cv * 100:.1f}% is high: add boots")
    return out


def _preempt(
    d: Mapping[str, Any], pts: Mapping[Unit, Point], samples: Sequence[Sample]
) -> list[str]:
    """A kernel × cell whose boots ran another preemption model than they asked for."""
    kernels, cells = d["kernels"], d["cells"]
    names = {
        store.label(k, c): f"{kernels[k]['label']} in {cells[c]['label']}" for k, c in sorted(pts)
    }
    return preempt.first_warnings(samples, names.items())


def analyze(definition: Mapping[str, Any], samples: Sequence[Sample]) -> Analysis:
    d = definition
    pts = points(d, samples)
    base = int(d.get("baseline") or 0)
    vs: dict[Unit, means.RatioCI] = {}
    notes: list[str] = []
    for (k, c), p in pts.items():
        if k != base and (got := _tried(d, pts[(base, c)], p, notes)) is not None:
            vs[(k, c)] = got[0]
    found, tests = steps(d, pts, notes)
    took = [m for (_, _), p in sorted(pts.items()) for m in p.machines]
    timed, moved = drifted(samples)
    placed = sorted(
        ((u, s) for s in samples if (u := store.unit_of(s.label))), key=lambda us: us[0]
    )
    ran = servers.rows([(f"c{c} {d['cells'][c]['label']}", s) for (_, c), s in placed])
    return Analysis(
        servers=tuple(ran),
        definition=d,
        points=pts,
        vs_baseline=vs,
        steps=found,
        tests=tests,
        interactions=interactions(d, pts),
        warnings=[*_preempt(d, pts, samples), *_warnings(d, pts), *notes, *moved],
        timed=tuple(timed),
        disturbed=disturbed.of_samples(samples),
        machines=_machines(samples, took),
    )


def _machines(samples: Sequence[Sample], took: Sequence[str]) -> tuple[str, ...]:
    """The machines that took boots that count, in the order they first took one; none
    when one machine took them all."""
    kept = set(took)
    names = [s.machine for s in samples if retake.counts(s)]
    found = tuple(m for m in dict.fromkeys(names) if m in kept)
    return found if len(found) > 1 else ()


@dataclass(frozen=True)
class OnMachine:
    """One machine's own figures: its boots that count, and per kernel and cell (not the
    baseline) its ratio to the baseline on this machine alone with the boots of each."""

    machine: str
    boots: int
    ratios: dict[Unit, tuple[float | None, int, int]]

    def shown(self, unit: Unit, dash: str) -> str:
        """`0.951 (3+3)`: the ratio on this machine and the boots; `dash` without one."""
        r, n_base, n = self.ratios.get(unit) or (None, 0, 0)
        return dash if r is None else f"{r:.3f} ({n_base}+{n})"


def per_machine(a: Analysis) -> list[OnMachine]:
    """Each machine's figures, for a study over a pool (none for one machine)."""
    out = []
    for m in a.machines:
        mine = {u: p.on(m) for u, p in a.points.items()}
        ratios: dict[Unit, tuple[float | None, int, int]] = {}
        for (k, c), xs in sorted(mine.items()):
            if k != a.baseline:
                base = mine[(a.baseline, c)]
                r = (sum(xs) / len(xs)) / (sum(base) / len(base)) if xs and base else None
                ratios[(k, c)] = (r, len(base), len(xs))
        out.append(OnMachine(m, sum(map(len, mine.values())), ratios))
    return out


def drifted(samples: Sequence[Sample]) -> tuple[list[drift.Timed], list[str]]:
    """The samples against time, grouped by kernel × cell and machine, and the warning
    if they moved together over the study (the trend within each group)."""
    rows = timeline.timed(samples, lambda s: f"{s.label}@{s.target.get('name')}")
    action = (
        "not corrected: the randomized blocks spread it over every cell, widening the intervals"
    )
    line = timeline.check(rows, "the samples of each kernel and cell", action)[1]
    return rows, [line] if line else []
