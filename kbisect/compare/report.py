"""A compare run as `kbisect report` sees it: its summary.json (checked), its samples
(copies left out) and the verdict recomputed from the boots that count."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.compare import schedule
from kbisect.compare import summary as compare_summary
from kbisect.core import progress
from kbisect.core.exceptions import UserError
from kbisect.measure import results, schema
from kbisect.report import disturbed
from kbisect.stats import means
from kbisect.study import report as study_report

SIDES = ("A", "B")
METHODS = {means.METHOD: "delta method on the log ratio, Welch df"}


class NotAReport(UserError):
    """The directory holds no run kbisect can report on."""


@dataclass(frozen=True)
class Run:
    """A compare run as the report sees it: the summary, the samples, the recomputed verdict."""

    dir: Path
    summary: Mapping[str, Any]
    samples: list[dict[str, Any]]  # in boot order
    verdict: means.Verdict
    min_effect: float
    confidence: float
    copies: tuple[str, ...] = ()  # sample files that repeat a boot, left out

    def side(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.samples if s.get("label") == name]

    def name(self, side: str) -> str:
        return str(self.summary["sides"][side].get("label") or side)

    def accels(self, side: str) -> set[str]:
        """Where a side ran: the target and its accelerator, e.g. `vng/tcg`."""
        return {_where(s["target"]) for s in self.side(side)}


def load(run_dir: Path) -> dict[str, Any]:
    """The run's summary.json, or NotAReport with one line saying why not.

    A compare summary is validated against schema/summary.json here; other kinds are
    checked by the module that renders them.
    """
    path = run_dir / results.SUMMARY
    if not run_dir.is_dir():
        raise NotAReport(f"{run_dir}: no such directory")
    if not path.is_file() and (run_dir / schedule.PLAN).is_file():
        return compare_summary.partial(run_dir)  # an interrupted compare: marked partial
    if not path.is_file() and (run_dir / study_report.DEFINITION).is_file():
        return {"kind": "study"}  # a study in progress: rendered from what it has
    if not path.is_file():
        raise NotAReport(f"{run_dir}: no summary.json (not a finished compare or bisect run)")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotAReport(f"{path}: unreadable: {exc}") from exc
    if not isinstance(summary, dict) or not isinstance(summary.get("kind"), str):
        raise NotAReport(f"{path}: no 'kind' field: not a kbisect summary")
    if summary["kind"] == "compare":
        try:
            schema.validate(summary, "summary", where=str(path))
        except schema.InvalidResult as exc:
            raise NotAReport(str(exc)) from exc
        if missing := [x for x in SIDES if x not in summary["sides"]]:
            raise NotAReport(f"{path}: a compare without side {', '.join(missing)}")
    return summary


def _where(target: Mapping[str, Any]) -> str:
    accel = target.get("accel")
    return f"{target['name']}/{accel}" if accel else str(target["name"])


def ok_tps(samples: Sequence[Mapping[str, Any]]) -> list[float]:
    """The tps of the boots that count: status "ok" only."""
    return [float(s["tps"]) for s in samples if s.get("status") == "ok" and s.get("tps")]


def load_run(run_dir: Path, summary: Mapping[str, Any], min_effect: float | None) -> Run:
    """The samples and the verdict recomputed from them (min_effect overrides the run's)."""
    try:
        samples, copies = results.without_copies(run_dir)
    except schema.InvalidResult as exc:
        raise NotAReport(str(exc)) from exc
    for line in copies:
        progress.warn(line)
    samples = disturbed.counted(samples)  # a retaken sample is listed on its own
    listed = [f for side in summary["sides"].values() for f in side.get("samples") or []]
    if listed and not samples:
        raise NotAReport(
            f"{run_dir}: summary.json lists {len(listed)} sample files and none is here: "
            "a report is re-rendered from its samples; re-run the command at the top of "
            "its report.md to get them"
        )
    effect = float(summary.get("min_effect", 0.02)) if min_effect is None else min_effect
    confidence = float(summary.get("confidence", 0.95))
    a, b = (ok_tps([s for s in samples if s.get("label") == x]) for x in SIDES)
    try:
        v = means.verdict(a, b, min_effect=effect, confidence=confidence)
    except means.StatsError as exc:
        raise NotAReport(f"{run_dir}: {exc}") from exc
    return Run(run_dir, summary, samples, v, effect, confidence, tuple(copies))


def verdict_line(v: means.Verdict) -> str:
    """`B/A = 0.512x [0.471, 0.556] (95% CI, ...): regression`."""
    r = v.ratio
    method = METHODS.get(r.method, r.method)
    return (
        f"B/A = {r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}] "
        f"({r.confidence * 100:g}% CI, {method}): {v.kind}"
    )
