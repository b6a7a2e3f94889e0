"""The git method's part of a bisect report (`--method git`): its summary.json from the
state and the `git bisect log` (every revision in the order git tested it, with the
reason its step gave; the second pass; the re-check against the parent), its sections of
report.md and its plots."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.bisect import samples, wallclock
from kbisect.bisect.git import log
from kbisect.bisect.report import figures, markdown, summary, table
from kbisect.bisect.state import Run
from kbisect.report import disturbed
from kbisect.source import git

ENDPOINT = "endpoint, measured by the driver"
NOT_RUN = "not run: the revert check measured the answer"


def _row(store: Path, index: int, mark: log.Mark) -> dict[str, Any]:
    out = samples.commit_dir(store, mark.commit)
    step_file = out / "step.json"
    step = log.step_record(step_file)
    role = "endpoint" if index < 2 else "step"
    reason = ENDPOINT if role == "endpoint" else step.get("reason", "")
    return table.row(mark.commit, mark.subject, mark.verdict, role, samples.stored(out), reason)


def build(top: Path, run: Run) -> dict[str, Any]:
    """Everything the report shows, as JSON that schema/summary.json accepts."""
    outcome = log.parse(run.bisect_log)
    store = run.store
    rows = [_row(store, i, m) for i, m in enumerate(outcome.marks)]
    ids = [str(r["commit"]) for r in rows]
    candidates = [{"commit": c, "subject": git.subject(top, c)} for c in outcome.candidates]
    rc = run.recheck or {"confirmed": False, "error": NOT_RUN}
    answer = candidates[0] if outcome.first_bad else None
    result = f"first bad commit: one of {len(candidates)} (skipped revisions hide it)"
    if answer:
        result = f"first bad commit {answer['commit']} {answer['subject']}"
    kind = rc.get("kind", "re-check failed") if rc["confirmed"] else "not confirmed"
    timed = wallclock.store_rows(store, [run.good, run.bad, *ids])
    out = summary.common(run, timed)
    moved = out["drift"]["warning"]
    warnings = [*rc.get("warnings", []), *([moved] if moved else [])]
    return {
        **out,
        "stats": {"endpoints": run.endpoints},
        "verdict": {"kind": kind, "result": result, "warnings": warnings},
        "samples": [{"commit": r.revision, "t": r.t, "tps": r.tps} for r in timed],
        "revisions": rows,
        "first_bad": answer,
        "candidates": candidates,
        "recheck": rc,
        "confirmed": bool(rc["confirmed"]),
        "second_pass": run.escalated,
        "first_pass_log": run.first_pass_log,
        "disturbed": disturbed.of_store(store, [run.good, run.bad, *ids]),
    }


def _answer(s: Mapping[str, Any]) -> list[str]:
    if s["first_bad"]:
        c = s["first_bad"]
        return [f"**First bad commit: `{c['commit']}` {c['subject']}**", ""]
    lines = [
        "**First bad commit: one of these; skipped revisions (build or boot failures, "
        "or no clear verdict) hide which:**",
        "",
    ]
    lines += [f"- `{c['commit']}` {c['subject']}" for c in s["candidates"]]
    return [*lines, ""]


def _second_pass(s: Mapping[str, Any]) -> list[str]:
    if not s["second_pass"]:
        return []
    most = 2 * s["options"]["runs_max"]
    return [
        f"Second pass: revisions skipped as unclear hid the answer, so they were measured "
        f"again with up to {most} samples each (the log below is the second pass's).",
        "",
    ]


def _recheck(rc: Mapping[str, Any]) -> list[str]:
    if rc.get("error") == NOT_RUN:
        return []
    if "error" in rc:
        return [f"Re-check failed: {rc['error']}. **The answer is not confirmed.**", ""]
    word = "confirmed" if rc["confirmed"] else markdown.SUSPECT

    def finding(pm: float, cm: float) -> str:
        return (
            f"Re-check with fresh samples: parent `{rc['parent'][:12]}` {pm:.1f} tps "
            f"(n={len(rc['parent_tps'])}), culprit `{rc['culprit'][:12]}` {cm:.1f} tps "
            f"(n={len(rc['culprit_tps'])}): ratio {rc['ratio']:.3f}, 95% CI "
            f"[{rc['low']:.3f}, {rc['high']:.3f}] ({rc['method']}): {rc['kind']}, {word}."
        )

    warnings = [f"- warning: {w}" for w in rc.get("warnings", [])]
    return markdown.recheck(rc, finding, ("parent samples", "culprit samples"), warnings)


def sections(s: Mapping[str, Any]) -> markdown.Sections:
    """The git method's sections of report.md: the threshold and sequential sampling, the
    answer (or the candidates skips hide), the second pass, the re-check."""
    o = s["options"]
    better = "higher" if o["higher_is_better"] else "lower"
    return markdown.Sections(
        title=o["scenario"],
        settings=[
            f"- threshold: {s['threshold']:.1f} tps ({s['threshold_source']}); {better} is "
            f"better; sequential sampling {o['runs_min']}..{o['runs_max']} boots per revision"
        ],
        answer=[*_answer(s), *_second_pass(s), *_recheck(s["recheck"])],
        before=disturbed.markdown(s.get("disturbed")),
        order="bisection order",
        p_bad=False,
        plot="tps along the bisection path",
        after=[],
        log_note=[],
    )


def plots(s: Mapping[str, Any], run_dir: Path) -> None:
    """tps-time.png and bisect.png."""
    figures.over_time(s, run_dir / figures.TIME, {s["good"]: "good", s["bad"]: "bad"})
    title = f"tps along the bisection; threshold {s['threshold']:.1f} tps"
    figures.along_path(s, run_dir / figures.PATH, title, None)
