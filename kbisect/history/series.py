"""Samples -> an ordered series of points -> its analysis (means with 95% intervals, the
ratio of each point to the baseline, change points, drift).

A point is the samples of one kernel tag (`by="tag"`: -rc and release tags in version
order, kbisect/source/rc.py; other tags after them by time), of one run's label
(`by="time"`), or of one level of a study axis (`by="axis:KEY"`: a scenario key such as
pgbench.clients, or `append`). Failed and disturbed samples are left out and counted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kbisect.core import digest
from kbisect.core.exceptions import UserError
from kbisect.history.source import Obs
from kbisect.source import rc
from kbisect.stats import changepoint, means, ratio


class SeriesError(UserError):
    """The samples do not make one series: mixed scenarios or machines, a bad --by, an
    unknown --baseline, nothing left."""


@dataclass
class Point:
    key: str
    tps: list[float]
    started: str = ""
    commit: str = ""
    left_out: int = 0  # failed or disturbed samples of this point
    mean: float = 0.0
    low: float | None = None
    high: float | None = None
    ratio: means.RatioCI | None = None  # to the baseline

    @property
    def n(self) -> int:
        return len(self.tps)

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "n": self.n,
            "tps": self.tps,
            "mean": self.mean,
            "low": self.low,
            "high": self.high,
            "ratio": self.ratio.as_dict() if self.ratio else None,
            "started": self.started,
            "commit": self.commit,
            "left_out": self.left_out,
        }


@dataclass
class History:
    points: list[Point]
    by: str
    scenario: str = ""
    scenario_hash: str = ""
    machine: str = ""
    baseline: int = 0  # the baseline's index
    failed: int = 0
    disturbed: int = 0
    chosen: list[str] = field(default_factory=list)  # what was chosen among several
    steps: list[changepoint.Step] = field(default_factory=list)
    drift: changepoint.Drift | None = None
    noise: changepoint.Noise | None = None
    levels: list[changepoint.Level] = field(default_factory=list)

    @property
    def alarms(self) -> list[str]:
        """Why the newest results regressed (empty: they did not): the newest change point
        is a regression after the baseline, or drift toward lower tps since it."""
        out = []
        if self.steps and self.steps[-1].kind == "regression":
            step = self.steps[-1]
            if step.index > self.baseline:
                out.append(f"regression {describe(self, step)}")
        if self.drift and self.drift.flagged and self.drift.kind == "regression":
            out.append(
                f"drift since {self.points[self.baseline].key}: " + "; ".join(self.drift.reasons)
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": "history",
            "by": self.by,
            "scenario": self.scenario,
            "scenario_hash": self.scenario_hash,
            "machine": self.machine,
            "baseline": self.points[self.baseline].key,
            "left_out": {"failed": self.failed, "disturbed": self.disturbed},
            "points": [p.as_dict() for p in self.points],
            "change_points": [{**s.as_dict(), "at": self.points[s.index].key} for s in self.steps],
            "drift": self.drift.as_dict() if self.drift else None,
            "levels": [lv.as_dict() for lv in self.levels],
            "chosen": self.chosen,
            "noise": self.noise.as_dict() if self.noise else None,
            "alarms": self.alarms,
        }


def describe(h: History, s: changepoint.Step) -> str:
    """A change point in words: where, how much, against what."""
    at, sized = h.points[s.index].key, f"{s.ratio:.3f}x [{s.low:.3f}, {s.high:.3f}]"
    if s.newest:
        return f"step at the newest point {at}: {sized} to {h.points[s.index - 1].key}"
    return f"change point at {at}: {sized}"


def check_by(by: str) -> str:
    if by in ("tag", "time") or (by.startswith("axis:") and len(by) > 5):
        return by
    raise SeriesError(f"--by {by!r}: expected tag, time or axis:NAME (axis:pgbench.clients)")


def _axis_value(o: Obs, key: str) -> str:
    if key == "append":
        return o.append
    value: Any = o.settings
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _settings_hash(o: Obs, key: str) -> str:
    """The scenario's identity without the axis key (an axis level changes the hash)."""
    if key == "append":
        return o.scenario_hash
    settings = json.loads(json.dumps(o.settings))
    *parents, last = key.split(".")
    d = settings
    for part in parents:
        d = d.get(part) if isinstance(d, dict) else None
    if isinstance(d, dict):
        d.pop(last, None)
    return digest.key(settings)


class Choice(NamedTuple):
    value: str
    kept: list[Obs]
    said: str  # the line that says what was chosen ('' when there was no choice)


def _choose(kept: list[Obs], value: Callable[[Obs], str], what: str, option: str) -> Choice:
    """The one value of a field (`what`: "machine") the samples share ('' unknown, as in
    an rc history entry without its samples, goes with any); when they have several, the
    one with a clear majority (at least twice as many samples as all others together),
    said in one line; SeriesError listing them with their counts when none has one."""
    counts = Counter(v for o in kept if (v := value(o)))
    if len(counts) <= 1:
        return Choice(next(iter(counts), ""), kept, "")
    (top, n), total = counts.most_common(1)[0], sum(counts.values())
    width = 12 if what == "scenario hash" else None
    if 3 * n < 2 * total:
        shown = ", ".join(f"{v[:width]} ({c})" for v, c in counts.most_common())
        raise SeriesError(
            f"the samples have {len(counts)} values of {what}, none on two thirds of them: "
            f"{shown}; pass {option}"
        )
    said = f"chose {what} {top[:width]} ({n} of {total} samples); {option} to pick another"
    return Choice(top, [o for o in kept if value(o) in (top, "")], said)


def select(
    obs: Iterable[Obs],
    by: str,
    *,
    scenario: str | None = None,
    scenario_hash: str | None = None,
    machine: str | None = None,
    kernel: str | None = None,
) -> History:
    """The points of one scenario on one machine, ordered by `by`."""
    check_by(by)
    kept = [
        o
        for o in obs
        if (scenario is None or o.scenario_name in (scenario, ""))
        and (machine is None or o.machine in (machine, ""))
        and (scenario_hash is None or o.scenario_hash.startswith(scenario_hash))
        and (kernel is None or kernel in (o.kernel_tag, o.kernel_commit[: len(kernel)]))
    ]
    if not kept:
        wanted = [f"{k} {v}" for k, v in (("scenario", scenario), ("machine", machine)) if v]
        raise SeriesError("no samples" + (f" of {', '.join(wanted)}" if wanted else ""))
    axis = by[5:] if by.startswith("axis:") else ""
    fields: list[tuple[Callable[[Obs], str], str, str]] = [
        (lambda o: o.scenario_name, "scenario", "--scenario NAME"),
        (lambda o: o.machine, "machine", "--machine NAME"),
    ]
    if axis:
        fields += [
            (lambda o: _settings_hash(o, axis), "scenario hash", "--scenario-hash"),
            (lambda o: o.kernel_tag, "kernel", "--kernel TAG"),
        ]
    else:
        fields.append((lambda o: o.scenario_hash, "scenario hash", "--scenario-hash"))
    chosen: list[Choice] = []
    for value, what, option in fields:
        chosen.append(_choose(kept, value, what, option))
        kept = chosen[-1].kept
    if axis and all(_axis_value(o, axis) == "" for o in kept):
        raise SeriesError(f"--by {by}: no sample sets {axis}")
    name, host = chosen[0].value, chosen[1].value
    hashes = {o.scenario_hash for o in kept} if axis else {chosen[2].value}
    groups: dict[str, list[Obs]] = {}
    for o in kept:
        groups.setdefault(_key(o, by, axis), []).append(o)
    points, failed, disturbed = [], 0, 0
    for key, group in groups.items():
        ok = [o.tps for o in group if o.status == "ok" and not o.disturbed and o.tps]
        bad = [o for o in group if not (o.status == "ok" and not o.disturbed and o.tps)]
        disturbed += sum(1 for o in bad if o.disturbed or o.status == "disturbed")
        failed += sum(1 for o in bad if not (o.disturbed or o.status == "disturbed"))
        if ok:
            first = min(group, key=lambda o: o.started)
            points.append(Point(key, ok, first.started, first.kernel_commit, len(bad)))
    if not points:
        raise SeriesError(f"no ok samples left ({failed} failed, {disturbed} disturbed)")
    points.sort(key=lambda p: _order(p, by))
    return History(
        points,
        by,
        name,
        ",".join(sorted(hashes - {""})),
        host,
        failed=failed,
        disturbed=disturbed,
        chosen=[c.said for c in chosen if c.said],
    )


def _key(o: Obs, by: str, axis: str) -> str:
    if by == "time":
        return f"{o.run_id} {o.label}".strip()
    if axis:
        return _axis_value(o, axis)
    return f"{o.kernel_tag} {o.append}".strip()


def _order(p: Point, by: str) -> tuple[Any, ...]:
    if by == "tag":
        tag, _, append = p.key.partition(" ")
        if rc.parse_tag(tag):
            return (0, rc.sort_key(tag), append)
        return (1, p.started, p.key)
    if by.startswith("axis:"):
        try:
            return (0, float(p.key), "")
        except ValueError:
            return (1, 0.0, p.key)
    return (p.started, p.key)


def default_baseline(keys: Sequence[str]) -> int:
    """The last final release vX.Y before the newest point, else the first point."""
    for i in range(len(keys) - 2, -1, -1):
        v = rc.parse_tag(keys[i].partition(" ")[0])
        if v is not None and v.is_final:
            return i
    return 0


def analyse(history: History, baseline: str | None = None) -> History:
    """Fill in the means, intervals, ratios, change points and drift (in place)."""
    pts = history.points
    keys = [p.key for p in pts]
    if baseline is None:
        history.baseline = default_baseline(keys)
    elif baseline in keys:
        history.baseline = keys.index(baseline)
    else:
        shown = ", ".join(keys[:8]) + (", ..." if len(keys) > 8 else "")
        raise SeriesError(f"--baseline {baseline}: not a point of the series ({shown})")
    base = pts[history.baseline]
    for p in pts:
        p.mean = sum(p.tps) / p.n
        if p.n >= 2:
            _, p.low, p.high = means.mean_ci(p.tps)
        if p.n >= 2 and base.n >= 2:
            p.ratio = ratio.ratio_ci(base.tps, p.tps)
        else:
            r = p.mean / (sum(base.tps) / base.n)
            p.ratio = means.RatioCI(r, r, r, "means only (one sample or one mean)")
    found = changepoint.analyse([p.tps for p in pts], history.baseline)
    history.noise, history.steps, history.drift = found.noise, found.steps, found.drift
    history.levels = found.levels
    return history
