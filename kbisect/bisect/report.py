"""The bisect report: summary.json, report.md and bisect.png in the run directory.

The Markdown opens with the command that reproduces the bisection, then the answer and
its re-check, every revision tested (in the order git tested it) with its samples and
verdict, and the `git bisect log` verbatim.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbisect.bisect import postview, samples, wallclock
from kbisect.bisect.git.log import Mark, Outcome
from kbisect.bisect.state import Run
from kbisect.core import atomic, clock, progress
from kbisect.measure import results
from kbisect.report import disturbed, plots
from kbisect.source import git
from kbisect.stats import drift

PLOT = "bisect.png"
REPORT = "report.md"


def _row(store: Path, index: int, mark: Mark) -> dict[str, Any]:
    out = samples.commit_dir(store, mark.commit)
    tps, failures = samples.stored(out)
    step_file = out / "step.json"
    step = json.loads(step_file.read_text()) if step_file.exists() else {}
    role = "endpoint" if index < 2 else "step"
    return {
        "commit": mark.commit,
        "subject": mark.subject,
        "verdict": mark.verdict,
        "role": role,
        "tps": tps,
        "failures": failures,
        "n": len(tps),
        "mean": sum(tps) / len(tps) if tps else None,
        "reason": "endpoint, measured by the driver"
        if role == "endpoint"
        else step.get("reason", ""),
    }


def summary(top: Path, run: Run, outcome: Outcome, argv: list[str]) -> dict[str, Any]:
    """Everything the report shows, as JSON that schema/summary.json accepts."""
    store = run.store
    rows = [_row(store, i, m) for i, m in enumerate(outcome.marks)]
    ids = [str(r["commit"]) for r in rows]
    candidates = [{"commit": c, "subject": git.subject(top, c)} for c in outcome.candidates]
    rc = run.recheck or {}
    answer = candidates[0] if outcome.first_bad else None
    result = f"first bad commit: one of {len(candidates)} (skipped revisions hide it)"
    if answer:
        result = f"first bad commit {answer['commit']} {answer['subject']}"
    kind = rc.get("kind", "re-check failed") if rc["confirmed"] else "not confirmed"
    timed = wallclock.store_rows(store, [run.good, run.bad, *(r["commit"] for r in rows)])
    moved = wallclock.check(timed, "git", run.options.references)
    warnings = [*rc.get("warnings", []), *([moved["warning"]] if moved["warning"] else [])]
    return {
        "version": 1,
        "kind": "bisect",
        "created": clock.utc_now(),
        "command": progress.reproduce_line(argv),
        "scenario": run.scenario,
        "sides": {},
        "stats": {"endpoints": run.endpoints},
        "verdict": {"kind": kind, "result": result, "warnings": warnings},
        "drift": moved,
        "samples": [{"commit": r.revision, "t": r.t, "tps": r.tps} for r in timed],
        "tree": str(run.tree),
        "good": run.good,
        "bad": run.bad,
        "options": run.options.as_dict(),
        "threshold": run.threshold,
        "threshold_source": run.threshold_source,
        "revisions": rows,
        "first_bad": answer,
        "candidates": candidates,
        "recheck": rc,
        "confirmed": bool(rc["confirmed"]),
        "second_pass": run.escalated,
        "bisect_log": run.bisect_log,
        "first_pass_log": run.first_pass_log,
        "disturbed": disturbed.of_store(store, [run.good, run.bad, *ids]),
        "exit": run.exit,
    }


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _answer(s: dict[str, Any]) -> list[str]:
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


def _second_pass(s: dict[str, Any]) -> list[str]:
    if not s["second_pass"]:
        return []
    most = 2 * s["options"]["runs_max"]
    return [
        f"Second pass: revisions skipped as unclear hid the answer, so they were measured "
        f"again with up to {most} samples each (the log below is the second pass's).",
        "",
    ]


def _recheck(rc: dict[str, Any]) -> list[str]:
    if "error" in rc:
        return [f"Re-check failed: {rc['error']}. **The answer is not confirmed.**", ""]
    word = "confirmed" if rc["confirmed"] else "**NOT CONFIRMED: treat the answer as suspect**"
    pm = sum(rc["parent_tps"]) / len(rc["parent_tps"])
    cm = sum(rc["culprit_tps"]) / len(rc["culprit_tps"])
    return [
        f"Re-check with fresh samples: parent `{rc['parent'][:12]}` {pm:.1f} tps "
        f"(n={len(rc['parent_tps'])}), culprit `{rc['culprit'][:12]}` {cm:.1f} tps "
        f"(n={len(rc['culprit_tps'])}): ratio {rc['ratio']:.3f}, 95% CI "
        f"[{rc['low']:.3f}, {rc['high']:.3f}] ({rc['method']}): {rc['kind']}, {word}.",
        "",
        f"- parent samples: {', '.join(f'{x:.1f}' for x in rc['parent_tps'])}",
        f"- culprit samples: {', '.join(f'{x:.1f}' for x in rc['culprit_tps'])}",
        *[f"- warning: {w}" for w in rc.get("warnings", [])],
        "",
    ]


def _table(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| # | commit | subject | verdict | n | mean tps | samples | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows):
        samples = ", ".join(f"{x:.0f}" for x in r["tps"])
        note = "; ".join([r["reason"], *r["failures"]]).strip("; ").replace("|", "/")
        out.append(
            f"| {i} | `{r['commit'][:12]}` | {r['subject'].replace('|', '/')} | "
            f"{r['verdict']} | {r['n']} | {_fmt(r['mean'])} | {samples} | {note} |"
        )
    return out


def markdown(s: dict[str, Any]) -> str:
    o = s["options"]
    better = "higher" if o["higher_is_better"] else "lower"
    lines = [
        f"# kbisect bisect: {o['scenario']}",
        "",
        "Reproduce:",
        "",
        f"    {s['command']}",
        "",
        f"- tree: `{s['tree']}`; good `{s['good']}`, bad `{s['bad']}`",
        f"- append: `{o['append']}`; configs: {', '.join(o['configs']) or '-'}; arch {o['arch']}",
        f"- threshold: {s['threshold']:.1f} tps ({s['threshold_source']}); {better} is better; "
        f"sequential sampling {o['runs_min']}..{o['runs_max']} boots per revision",
        "",
        *_answer(s),
        *_second_pass(s),
        *_recheck(s["recheck"]),
        *postview.drift_lines(s),
        *disturbed.markdown(s.get("disturbed")),
        "## Revisions tested, in bisection order",
        "",
        *_table(s["revisions"]),
        "",
        f"![tps along the bisection path]({PLOT})",
        "",
        "## git bisect log",
        "",
        "```",
        s["bisect_log"].rstrip(),
        "```",
        "",
    ]
    return "\n".join(lines)


def plot(s: dict[str, Any], path: Path) -> Path | None:
    points = [
        (f"{i} {r['commit'][:8]}", r["tps"], r["verdict"]) for i, r in enumerate(s["revisions"])
    ]
    timed = [drift.Timed(r["commit"], r["t"], r["tps"]) for r in s.get("samples", [])]
    try:
        wallclock.plot(timed, path.with_name(wallclock.PLOT), {s["good"]: "good", s["bad"]: "bad"})
        return plots.tps_along_path(
            points, path, title=f"tps along the bisection; threshold {s['threshold']:.1f} tps"
        )
    except ImportError as exc:
        progress.warn(f"no plot ({exc}): install matplotlib (scripts/setup)")
        return None


def write(run_dir: Path, s: dict[str, Any]) -> Path:
    """Write summary.json (validated), bisect.png and report.md; return the report's path."""
    results.write_summary(run_dir, s)
    if s.get("method") == "posterior":
        return postview.render(run_dir, s)
    plot(s, run_dir / PLOT)
    report = run_dir / REPORT
    atomic.write_text(report, markdown(s))
    return report


def render(run_dir: Path) -> Path:
    """Re-render report.md and bisect.png from the run's summary.json (`kbisect report`)."""
    s = results.load_summary(run_dir)
    if s.get("method") == "posterior":
        return postview.render(run_dir, s)
    plot(s, run_dir / PLOT)
    atomic.write_text(run_dir / REPORT, markdown(s))
    return run_dir / REPORT
