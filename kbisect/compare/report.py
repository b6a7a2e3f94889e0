"""A compare run as `kbisect report` sees it: its summary.json checked, its samples
(copies left out) and the verdict recomputed from the boots that count. markdown.py writes
its report.md and plots from it, text.py its mailing-list text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbisect.compare import machines, revert, sequential
from kbisect.core import progress
from kbisect.core.exceptions import UserError
from kbisect.measure import fiodiff, preempt, results, retake, timeline
from kbisect.measure.record import Sample
from kbisect.report import disturbed
from kbisect.stats import blocked, means, ratio
from kbisect.stats import prior as priors

SIDES = ("A", "B")
METHODS = {
    ratio.METHOD: "delta method on the log ratio, Welch df",
    blocked.METHOD: "log tps with a machine fixed effect: B/A within machines",
    priors.METHOD: "delta method on the log ratio, variances pooled with a noise prior",
}


class BadCompareRun(UserError):
    """A compare run whose report cannot be recomputed: a summary or sample that does not
    check, no samples, too few boots that count."""


@dataclass(frozen=True)
class Run:
    """A compare run as the report sees it: the summary, the samples, the recomputed verdict."""

    dir: Path
    summary: Mapping[str, Any]
    samples: list[Sample]  # in boot order
    verdict: means.Verdict
    min_effect: float
    confidence: float
    copies: tuple[str, ...] = ()  # sample files that repeat a boot, left out
    left_out: Mapping[str, int] = field(default_factory=dict)  # disturbed, per side (retake.py)

    def planned(self, side: str) -> int | None:
        """The boots the plan gave a side (None for a summary without its order)."""
        order = self.summary.get("order") or []
        return order.count(side) if order else None

    def side(self, name: str) -> list[Sample]:
        return [s for s in self.samples if s.label == name]

    def name(self, side: str) -> str:
        return str(self.summary["sides"][side].get("label") or side)

    def accels(self, side: str) -> set[str]:
        """Where a side ran: the target and its accelerator, e.g. `vng/tcg`."""
        return {_where(s.target) for s in self.side(side)}


def check(summary: Mapping[str, Any], path: Path) -> None:
    """A finished compare's summary.json (at `path`) against schema/summary.json, with
    both sides; BadCompareRun, one line, if not."""
    try:
        results.validate(summary, "summary", where=str(path))
    except results.InvalidResult as exc:
        raise results.InvalidResult(f"{exc}; {results.SUMMARY_RECOVER}") from None
    if missing := [x for x in SIDES if x not in summary["sides"]]:
        raise BadCompareRun(f"{path}: a compare without side {', '.join(missing)}")


def load_summary(run_dir: Path) -> dict[str, Any]:
    """A finished compare's summary.json, checked (as `check`)."""
    summary = results.read_summary(run_dir)
    check(summary, run_dir / results.SUMMARY)
    return summary


def _where(target: Mapping[str, Any]) -> str:
    accel = target.get("accel")
    return f"{target['name']}/{accel}" if accel else str(target["name"])


def ok_tps(samples: Sequence[Sample]) -> list[float]:
    """The tps of the boots that count: status "ok", undisturbed (retake.counts)."""
    return [s.tps or 0.0 for s in samples if retake.counts(s)]


def load(run_dir: Path, summary: Mapping[str, Any], min_effect: float | None) -> Run:
    """The samples and the verdict recomputed from them (min_effect overrides the run's)."""
    samples, copies = results.without_copies(run_dir)  # InvalidResult: exit 3
    for line in copies:
        progress.warn(line)
    left = {x: sum(retake.left_out(s) for s in samples if s.label == x) for x in SIDES}
    samples = disturbed.counted(samples)  # a disturbed sample is listed on its own
    listed = [f for side in summary["sides"].values() for f in side.get("samples") or []]
    if listed and not samples:
        raise BadCompareRun(
            f"{run_dir}: summary.json lists {len(listed)} sample files and none is here: "
            "a report is re-rendered from its samples; re-run the command at the top of "
            "its report.md to get them"
        )
    effect = float(summary.get("min_effect", 0.02)) if min_effect is None else min_effect
    confidence = float(summary.get("confidence", 0.95))
    a, b = (ok_tps([s for s in samples if s.label == x]) for x in SIDES)
    try:
        order = summary.get("order") or []
        planned = min(order.count(x) for x in SIDES) if order else None
        v = sequential.verdict(
            a,
            b,
            min_effect=effect,
            confidence=confidence,
            planned=planned,
            most=most(summary),
            interval=machines.interval(samples) or sequential.recorded_interval(summary, a, b),
            blocks=machines.blocks(samples),
        )
    except means.StatsError as exc:
        raise BadCompareRun(f"{run_dir}: {exc}") from exc
    return Run(run_dir, summary, samples, v, effect, confidence, tuple(copies), left)


def most(summary: Mapping[str, Any]) -> int | None:
    """A sequential run's most boots a side (None for a fixed count)."""
    seq = summary.get("sequential")
    return int(seq["max_boots"]) if isinstance(seq, Mapping) else None


def stopped(summary: Mapping[str, Any]) -> str | None:
    """How a sequential run stopped, one sentence (None for a fixed count)."""
    seq = summary.get("sequential")
    return str(seq["reason"]) if isinstance(seq, Mapping) else None


def verdict_line(summary: Mapping[str, Any], v: means.Verdict) -> str:
    """The verdict in words (revert.said) with B/A, its interval's level and method:
    `a regression (B/A = 0.512x [0.471, 0.556], 95% CI, ...)`."""
    r = v.ratio
    how = f"{revert.ratio(r)}, {r.confidence * 100:g}% CI, {METHODS.get(r.method, r.method)}"
    return f"{revert.said(summary, v, ba=False)} ({how})"


# -- the Warnings section: a side that did not get the preemption model it asked for,
# failed boots, slots left disturbed, copied samples, drift over time, sides on different
# targets, storage that differs, a verdict that changed ------------------------------


def warnings(run: Run) -> list[str]:
    out = [*preempt_lines(run), *run.verdict.warnings, *run.copies]
    out += filter(None, [timeline.sides(run.samples)[1]])
    for side in SIDES:
        boots = run.side(side)
        failed = len(boots) - len(ok_tps(boots))
        if failed:
            out.append(
                f"side {side}: {failed} failed boot(s), listed below and kept out of the statistics"
            )
        if line := left_disturbed(run, side):
            out.append(line)
        recorded = int((run.summary.get("failed") or {}).get(side, failed))
        if recorded != failed:
            out.append(
                f"side {side}: summary.json counts {recorded} failed boot(s) but "
                f"{failed} have a sample file"
            )
    if run.accels("A") != run.accels("B"):
        seen = "; ".join(f"{s}: {', '.join(sorted(run.accels(s)))}" for s in SIDES)
        out.append(
            f"the sides ran on different targets or accelerators ({seen}): the ratio "
            "mixes places; rerun both sides on the same one"
        )
    out += fiodiff.warnings(storage(run), {x: x for x in SIDES})
    stored = run.summary.get("verdict") or {}
    kind = stored.get("kind") or stored.get("result")
    new = run.verdict.kind
    if (
        not run.summary.get("partial")
        and kind
        and kind not in (new, new.replace(" ", "-"))
        and (kind, new) != ("no-change", means.NO_DIFFERENCE)
    ):
        out.append(f"summary.json says '{kind}'; recomputed from the samples: '{new}'")
    return out


def preempt_lines(run: Run) -> list[str]:
    """A side whose boots ran another preemption model than they asked for, or one
    that could not be read (measure/preempt.py): one line each."""
    names = {x: f"side {x}" + (f" ({run.name(x)})" if run.name(x) != x else "") for x in SIDES}
    return preempt.first_warnings(run.samples, names.items())


def left_disturbed(run: Run, side: str) -> str | None:
    """Fewer boots count on a side than planned because disturbed samples never count:
    how many do, and how to take the rest (`again`)."""
    planned, n = run.planned(side), len(ok_tps(run.side(side)))
    missing = min(run.left_out.get(side, 0), (planned or n) - n)
    if missing <= 0:
        return None
    return (
        f"side {side}: {n} of {planned} boots count: {missing} slot(s) left without an "
        "undisturbed sample (a disturbed sample never counts; see Disturbed samples)"
        f"{again(run.verdict, run.min_effect, run.dir)}"
    )


def again(v: means.Verdict, min_effect: float, run_dir: Path) -> str:
    """`: kbisect compare --resume RUN takes them again`, for slots left disturbed; nothing
    once the interval settles the verdict (ratio.settles): more boots would not change it."""
    if ratio.settles(v.ratio, min_effect):
        return ""
    return f": `kbisect compare --resume {run_dir}` takes them again"


def storage(run: Run) -> list[fiodiff.Row]:
    """The sides' fio preflight figures (fiodiff.py), from the boots that count."""
    ok = {x: [b.fingerprint for b in run.side(x) if b.ok] for x in SIDES}
    return fiodiff.rows(ok)
