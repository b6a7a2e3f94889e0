"""report.md and the plots of a posterior bisection, from its summary.json alone (so that
`kbisect report RUN_DIR` re-renders them): the answer with probabilities, the re-check,
drift, every revision tested, every sample with the posterior after it, the replayable
`git bisect` log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbisect.bisect import wallclock
from kbisect.core import atomic, progress
from kbisect.report import disturbed, plots
from kbisect.stats import drift

REPORT = "report.md"
PLOT = "bisect.png"
TRAIL = "posterior.png"
LOG = "git-bisect.log"


def _p(p: float) -> str:
    """ "P = 0.9939", or "P > 0.9999"."""
    return "P > 0.9999" if p > 0.9999 else f"P = {p:.4f}"


def _answer(s: dict[str, Any]) -> list[str]:
    a, conf = s["answer"], s["options"]["confidence"]
    if a["kind"] == "culprit":
        c = s["candidates"][0]
        head = [f"**First bad commit: `{c['commit']}` {c['subject']}** ({_p(c['p'])})"]
    elif a["kind"] == "range":
        head = [
            f"**First bad commit: one of these {len(s['candidates'])}, which no test can "
            f"tell apart (untestable neighbours hide the boundary), {_p(a['probability'])} "
            "together:**",
            "",
        ]
    else:
        head = [
            f"**No answer: no commit reached P = {conf:g} within --max-boots "
            f"{s['options']['max_boots']}. The most likely commits, {_p(a['probability'])} "
            "together:**",
            "",
        ]
    if a["kind"] != "culprit":
        head += [f"- `{c['commit']}` {c['subject']}: {_p(c['p'])}" for c in s["candidates"]]
    first = s.get("first_stop")
    note = []
    if first:
        note = [
            f"The search first stopped at `{first['commit'][:12]}` with P = "
            f"{first['p']:.4f} before its re-check; the probabilities above include the "
            "re-check's fresh samples (quote those, not the first stop's).",
            "",
        ]
    return [*head, "", *note]


def _recheck(rc: dict[str, Any]) -> list[str]:
    if "culprit" not in rc or "error" in rc:
        return [f"Re-check: {rc.get('error')}. **The answer is not confirmed.**", ""]
    word = (
        "confirmed"
        if rc["confirmed"]
        else (f"{rc['kind']}, **NOT CONFIRMED: treat the answer as suspect**")
    )
    pm = sum(rc["parent_tps"]) / len(rc["parent_tps"])
    cm = sum(rc["culprit_tps"]) / len(rc["culprit_tps"])
    return [
        f"Re-check, fresh pairs of the culprit and its parent until the ratio is clear: "
        f"{pm:.1f} -> {cm:.1f} tps ({rc['n']} pairs), ratio {rc['ratio']:.3f}, "
        f"{rc['level']:.1%} CI [{rc['low']:.3f}, {rc['high']:.3f}], minimum effect "
        f"{rc['min_effect']:.0%}: {word}.",
        "",
        f"- parent `{rc['parent'][:12]}`: {', '.join(f'{x:.1f}' for x in rc['parent_tps'])}",
        f"- culprit `{rc['culprit'][:12]}`: {', '.join(f'{x:.1f}' for x in rc['culprit_tps'])}",
        "",
    ]


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def drift_lines(s: dict[str, Any]) -> list[str]:
    """The drift paragraph of a bisect report (either method)."""
    if "drift" not in s:  # a run from before drift was checked
        return []
    d = s["drift"]
    tr = d.get("trend")
    if d.get("warning"):
        return [f"**{d['warning']}**", "", f"![tps against time]({wallclock.PLOT})", ""]
    loaded = [w for w in (s.get("verdict") or {}).get("warnings", []) if w.startswith("load:")]
    if loaded and tr is not None:  # a step with the load: the time trend does not fit it
        return [
            f"**Drift: the host's speed moved with the load other work put on it "
            f"({tr['moved']:+.1%} over the run within revisions sampled more than once; "
            f"a step, which the time trend alone fits badly: p = {tr['p']:.2g}).** "
            f"{_sentence(loaded[0].removeprefix('load: '))}.",
            "",
            f"![tps against time]({wallclock.PLOT})",
            "",
        ]
    if tr is None:
        return ["Drift: too few reference samples over time to test.", ""]
    return [
        f"Drift: none detected ({tr['moved']:+.1%} over the run within revisions sampled "
        f"more than once, "
        f"p = {tr['p']:.2g}, {tr['n']} samples; the test warns at p < {drift.ALPHA} and "
        f"a move of {drift.NOTICEABLE:.0%}).",
        "",
        f"![tps against time]({wallclock.PLOT})",
        "",
    ]


def _revisions(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| # | commit | subject | verdict | P(bad) | n | mean tps | samples | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows):
        tps = ", ".join(f"{x:.0f}" for x in r["tps"])
        note = "; ".join([r["reason"], *r["failures"]]).replace("|", "/")
        mean = "-" if r["mean"] is None else f"{r['mean']:.1f}"
        out.append(
            f"| {i} | `{r['commit'][:12]}` | {r['subject'].replace('|', '/')} | "
            f"{r['verdict']} | {r['p_bad']:.4f} | {r['n']} | {mean} | {tps} | {note} |"
        )
    return out


def _samples(s: dict[str, Any]) -> list[str]:
    out = [
        "| # | minute | revision | role | tps | most likely after it | P |",
        "|---|---|---|---|---|---|---|",
    ]
    trail = iter(s["trail"])
    for i, r in enumerate(s["samples"], 1):
        tps = "failed" if r["tps"] is None else f"{r['tps']:.1f}"
        after = next(trail) if r["tps"] is not None else None
        top = f"`{after['top'][:12]}` | {after['p']:.3f}" if after else "- | -"
        out.append(
            f"| {i} | {r['t'] / 60:.1f} | `{r['commit'][:12]}` | {r['role']} | {tps} | {top} |"
        )
    return out


def markdown(s: dict[str, Any]) -> str:
    o = s["options"]
    better = "higher" if o["higher_is_better"] else "lower"
    refs = (
        f"a reference boot after every {o['references']} test boots"
        if o["references"]
        else "no reference boots"
    )
    return "\n".join(
        [
            f"# kbisect bisect: {s['scenario']['name']}",
            "",
            "Reproduce:",
            "",
            f"    {s['command']}",
            "",
            f"- tree: `{s['tree']}`; good `{s['good']}`, bad `{s['bad']}`",
            f"- append: `{o['append']}`; configs: {', '.join(o['configs']) or '-'}; "
            f"arch {o['arch']}",
            f"- method: posterior over the first bad commit, stop at P ≥ {o['confidence']:g}, "
            f"at most {o['max_boots']} boots after the endpoints; {refs}; {better} is better",
            f"- boots after the endpoints: {s['boots']}",
            "",
            *_answer(s),
            *_recheck(s["recheck"]),
            *drift_lines(s),
            "## The posterior after each sample",
            "",
            f"![posterior]({TRAIL})",
            "",
            "## Revisions tested, in the order first tested",
            "",
            *_revisions(s["revisions"]),
            "",
            f"![tps per revision]({PLOT})",
            "",
            *disturbed.markdown(s.get("disturbed")),
            "## Every sample, in time order",
            "",
            *_samples(s),
            "",
            "## git bisect log",
            "",
            f"`git bisect replay {LOG}` in a clone with these commits names the same answer "
            "(for an undecided one, it leaves git bisecting what is left).",
            "",
            "```",
            s["bisect_log"].rstrip(),
            "```",
            "",
        ]
    )


def _plots(s: dict[str, Any], run_dir: Path) -> None:
    names = s.get("trail_names") or []
    lines = {f"{c[:10]}": [t["p_names"][i] for t in s["trail"]] for i, c in enumerate(names)}
    points = [
        (f"{i} {r['commit'][:8]}", r["tps"], r["verdict"]) for i, r in enumerate(s["revisions"])
    ]
    ends = {s["good"]: "good (endpoint)", s["bad"]: "bad (endpoint)"}
    timed = [drift.Timed(r["commit"], r["t"], r["tps"]) for r in s["samples"] if r["tps"]]
    try:
        plots.posterior_trail(
            lines,
            run_dir / TRAIL,
            confidence=s["options"]["confidence"],
            marks=[t["commit"][:7] for t in s["trail"]],
        )
        plots.tps_along_path(
            points, run_dir / PLOT, title="tps per tested revision", threshold=s.get("threshold")
        )
        wallclock.plot(timed, run_dir / wallclock.PLOT, ends)
    except ImportError as exc:
        progress.warn(f"no plot ({exc}): install matplotlib (scripts/setup)")


def render(run_dir: Path, s: dict[str, Any]) -> Path:
    """report.md, the plots and git-bisect.log from a summary; the report's path."""
    _plots(s, run_dir)
    atomic.write_text(run_dir / LOG, s["bisect_log"])
    atomic.write_text(run_dir / REPORT, markdown(s))
    return run_dir / REPORT
