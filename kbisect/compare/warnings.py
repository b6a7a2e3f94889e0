"""The Warnings section of a compare report: a side that did not get the preemption model
it asked for, failed boots, slots left disturbed, copied samples, drift over time, sides
on different targets, storage that differs, a verdict that changed."""

from __future__ import annotations

from kbisect.compare.report import SIDES, Run, ok_tps
from kbisect.measure import fiodiff, preempt, timeline
from kbisect.stats import means


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
    how many do, and how to take the rest."""
    planned, n = run.planned(side), len(ok_tps(run.side(side)))
    missing = min(run.left_out.get(side, 0), (planned or n) - n)
    if missing <= 0:
        return None
    return (
        f"side {side}: {n} of {planned} boots count: {missing} slot(s) left without an "
        "undisturbed sample (a disturbed sample never counts; see Disturbed samples): "
        f"`kbisect compare --resume {run.dir}` takes them again"
    )


def storage(run: Run) -> list[fiodiff.Row]:
    """The sides' fio preflight figures (fiodiff.py), from the boots that count."""
    ok = {x: [b.get("fingerprint") for b in run.side(x) if b.get("status") == "ok"] for x in SIDES}
    return fiodiff.rows(ok)
