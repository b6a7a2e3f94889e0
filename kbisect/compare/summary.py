"""A compare's summary.json, the table printed at its end (over a pool, a row per side
and machine), and the summary of a run that has not finished (for `kbisect report` of a
partial run)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kbisect.compare import machines, schedule
from kbisect.compare.report import verdict_line
from kbisect.compare.sides import NAMES, Side
from kbisect.core import clock, progress
from kbisect.measure import results
from kbisect.measure.record import Sample
from kbisect.stats import means


def sample_files(out: Path) -> dict[str, list[str]]:
    """This run's sample files per side, relative to the run dir."""
    files: dict[str, list[str]] = {}
    for path in results.sample_paths(out):
        label = results.load_sample(path).label or "?"
        files.setdefault(label, []).append(str(path.relative_to(out)))
    return files


def summary(
    sides: dict[str, Side],
    plan: schedule.Plan,
    verdict: means.Verdict,
    duration: float,
    out: Path,
    stopped: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary of a finished run; `stopped`, how a sequential one stopped
    (stopping.as_dict): its "sequential" field, and its verdict's level for "confidence"."""
    files = sample_files(out)
    a = sides["A"]
    return {
        "version": 1,
        "kind": "compare",
        "command": plan.command,
        "created": clock.utc_now(),
        "scenario": {"name": a.scen.name, "hash": a.scen.hash},
        "sides": {x: {**sides[x].describe(), "samples": files.get(x, [])} for x in NAMES},
        "order": plan.order,
        "failed": {x: sides[x].failed for x in NAMES},
        "stats": {"A": verdict.a.as_dict(), "B": verdict.b.as_dict()},
        "verdict": verdict.as_dict(),
        "min_effect": plan.min_effect,
        "confidence": verdict.ratio.confidence,
        "duration_s": round(duration, 1),
        "target": plan.target_described,
        "resumed": plan.resumed,
        **({"sequential": stopped} if stopped is not None else {}),
    }


def partial(out: Path) -> dict[str, Any]:
    """What `kbisect report` shows of a compare that has not finished: its plan's sides,
    every stored sample, marked partial (the verdict is recomputed from the samples)."""
    plan = schedule.load(out)
    rule = plan.rule
    files = sample_files(out)
    sides = {
        x: {
            **{k: v for k, v in plan.sides[x].items() if k not in ("sets", "image", "manifest")},
            "samples": files.get(x, []),
        }
        for x in NAMES
    }
    return {
        "version": 1,
        "kind": "compare",
        "partial": True,
        "command": plan.command,
        "created": plan.created,
        "scenario": plan.scenario_id,
        "sides": sides,
        "order": plan.order,
        "stats": {},
        "min_effect": plan.min_effect,
        "confidence": rule.level if rule else 0.95,
        "target": plan.target_described,
        "verdict": {
            "kind": "partial",
            "result": "interrupted: not every boot was taken",
            "warnings": [],
        },
    }


def print_table(
    summary: Mapping[str, Any], verdict: means.Verdict, samples: Sequence[Sample] = ()
) -> None:
    """The table printed at a compare's end: each side's figures, the verdict in words
    with its interval (report.verdict_line) and the warnings. Over a pool (`samples` from
    more than one machine), a row per side and machine: a side's CV, min and max over all
    machines would show their spread, not the noise."""
    split = {x: machines.parts(samples, x) for x in NAMES}
    pooled = any(split.values())
    width = 29 if pooled else 44  # over a pool the label shares its width with the machine
    machine = f" {'machine':<14}" if pooled else ""
    print(
        f"{'side':<4} {'label':<{width}}{machine} {'n':>3} {'mean':>9} {'median':>9} "
        f"{'CV':>6} {'min':>9} {'max':>9}"
    )
    for name, s in zip(NAMES, (verdict.a, verdict.b), strict=True):
        label = str(summary["sides"][name].get("label") or name)
        head = f"{name:<4} {label[:width]:<{width}}"
        if not pooled:
            print(f"{head} {s.n:>3} {_figures(s)}")
        for part in split[name]:
            figures = _figures(means.summarize(part.tps) if part.tps else None)
            print(f"{head} {part.machine[:14]:<14} {len(part.tps):>3} {figures}")
    print(verdict_line(summary, verdict))
    for w in verdict.warnings:
        progress.warn(w)


def _figures(s: means.Summary | None) -> str:
    """A side's mean, median, CV, min and max in the table's columns; dashes for none."""
    if s is None:
        return f"{'-':>9} {'-':>9} {'-':>6} {'-':>9} {'-':>9}"
    return f"{s.mean:>9.1f} {s.median:>9.1f} {s.cv * 100:>5.1f}% {s.min:>9.1f} {s.max:>9.1f}"
