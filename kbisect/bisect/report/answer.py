"""The posterior method's answer as shown (`--method posterior`), from its summary.json
(posterior.py): its sections of report.md (the answer with its probabilities, the
re-check, the whole range, every sample), its plots and the answer printed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.bisect import recheck, verify
from kbisect.bisect.report import figures, markdown
from kbisect.bisect.report.posterior import LOG, NOT_NEEDED, chance
from kbisect.core import progress
from kbisect.report import disturbed
from kbisect.report.formats import section


def _answer(s: Mapping[str, Any]) -> list[str]:
    a, conf = s["answer"], s["options"]["confidence"]
    if a["kind"] == "culprit":
        c = s["candidates"][0]
        head = [f"**First bad commit: `{c['commit']}` {c['subject']}** ({chance(c['p'])})"]
    elif a["kind"] == "range":
        head = [
            f"**First bad commit: one of these {len(s['candidates'])}, which no test can "
            f"tell apart (untestable neighbours hide the boundary), {chance(a['probability'])} "
            "together:**",
            "",
        ]
    else:
        head = [
            f"**No answer: no commit reached P = {conf:g} within --max-boots "
            f"{s['options']['max_boots']}. The most likely commits, {chance(a['probability'])} "
            "together:**",
            "",
        ]
    if a["kind"] != "culprit":
        head += [f"- `{c['commit']}` {c['subject']}: {chance(c['p'])}" for c in s["candidates"]]
    told = s.get("story")
    if told and told["kind"] in ("several", "contradicted"):
        head = [
            "**More than one change: the first bad commit below is git's single answer, "
            "not the whole story. Read The whole range.**",
            "",
            *head,
        ]
    elif told and told["kind"] == "single" and (told.get("against") or told.get("unclear")):
        head = [
            "**One step does not fit every sample (a tested revision is at the other level, "
            "or between the levels): the answer is not confirmed. Read The whole range.**",
            "",
            *head,
        ]
    first = s.get("first_stop")
    note = []
    if first and s.get("rechecks"):  # the re-check's fresh samples moved the posterior
        note = [
            f"The search first stopped at `{first['commit'][:12]}` with P = "
            f"{first['p']:.4f} before its re-check; the probabilities above include the "
            "re-check's fresh samples (quote those, not the first stop's).",
            "",
        ]
    return [*head, "", *note]


def _recheck(rc: Mapping[str, Any], s: Mapping[str, Any]) -> list[str]:
    if rc.get("error") == NOT_NEEDED:
        return []  # the revert check, above, decided
    if "culprit" not in rc or "error" in rc:
        told = s.get("story") or {}
        if told.get("kind") == "several" and s.get("confirmed"):
            return [
                f"Re-check of git's single first bad commit: {rc.get('error')}. The whole "
                "range below has more than one change, and each is re-checked on its own: "
                "all confirmed.",
                "",
            ]
        return [f"Re-check: {rc.get('error')}. **The answer is not confirmed.**", ""]
    word = "confirmed" if rc["confirmed"] else f"{rc['kind']}, {markdown.SUSPECT}"

    def finding(pm: float, cm: float) -> str:
        return (
            f"Re-check, fresh pairs of the culprit and its parent until the ratio is clear: "
            f"{pm:.1f} -> {cm:.1f} tps ({rc['n']} pairs), ratio {rc['ratio']:.3f}, "
            f"{rc['level']:.1%} CI [{rc['low']:.3f}, {rc['high']:.3f}], minimum effect "
            f"{rc['min_effect']:.0%}: {word}."
        )

    labels = (f"parent `{rc['parent'][:12]}`", f"culprit `{rc['culprit'][:12]}`")
    return markdown.recheck(rc, finding, labels)


def _ratio(step: Mapping[str, Any]) -> str:
    return f"{step['ratio']:.3f} [{step['low']:.3f}, {step['high']:.3f}]"


def story_lines(s: Mapping[str, Any]) -> list[str]:
    """The whole range: every change the samples support, with its size and re-check,
    P(one change), what contradicts one step, and git's single answer's caveat."""
    told = s.get("story")
    if not told:
        return []
    kinds = {
        "single": "one step explains good -> bad",
        "several": "more than one change: the whole story is below",
        "contradicted": "the samples contradict one step, and the other changes are not "
        "located yet",
        "undecided": "no change holds P = 0.5",
    }
    out = [
        "## The whole range",
        "",
        f"{kinds[told['kind']]} (P(one change) = {told['p_single']:.3f}; a single step "
        f"is confirmed from P = {told['alone']:g}).",
        "",
        "| change | P | tps after / before (95% CI) | noise after / before | re-check |",
        "|---|---|---|---|---|",
    ]
    for step in told["steps"]:
        what = "regression" if step["ratio"] < 1 else "improvement (a fix?)"
        members = len(step["members"])
        where = f"`{step['commit'][:12]}` {step['subject']}"
        if members > 1:
            where += f" (or one of {members - 1} commits no test can tell from it)"
        out.append(
            f"| {what}: {where} | {chance(step['p'])} | {_ratio(step)} | "
            f"{step['noise']:.2f} | {step['recheck'] or 'not re-checked'} |"
        )
    out.append("")
    out += [f"- {note}" for note in told["notes"]]
    if told["notes"]:
        out.append("")
    if s.get("probes"):
        probes = ", ".join(f"`{c[:12]}`" for c in s["probes"])
        out += [
            f"Probes of stretches no test had split, where a fix and a second step could "
            f"hide: {probes}.",
            "",
        ]
    if told["kind"] != "single":
        out += [
            f"`{LOG}` names git's single first bad commit; with more than one change it is "
            "not the whole story: read the table above.",
            "",
        ]
    return out


def _samples(s: Mapping[str, Any]) -> list[str]:
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


def sections(s: Mapping[str, Any]) -> markdown.Sections:
    """The posterior's sections of report.md: its settings, the answer with its
    probabilities and the re-check, the posterior after each sample, the disturbed
    samples, every sample in time order, what the replayable log is for."""
    o = s["options"]
    better = "higher" if o["higher_is_better"] else "lower"
    refs = (
        f"a reference boot after every {o['references']} test boots"
        if o["references"]
        else "no reference boots"
    )
    return markdown.Sections(
        title=s["scenario"]["name"],
        settings=[
            f"- method: posterior over the first bad commit, stop at P ≥ {o['confidence']:g}, "
            f"at most {o['max_boots']} boots after the endpoints; {refs}; {better} is better",
            f"- boots after the endpoints: {s['boots']}",
        ],
        answer=[*_answer(s), *_recheck(s["recheck"], s), *story_lines(s)],
        before=["## The posterior after each sample", "", f"![posterior]({figures.TRAIL})", ""],
        order="the order first tested",
        p_bad=True,
        plot="tps per revision",
        after=[
            *disturbed.markdown(s.get("disturbed")),
            *section("Every sample, in time order", _samples(s)),
        ],
        log_note=[
            f"`git bisect replay {LOG}` in a clone with these commits names the same answer "
            "(for an undecided one, it leaves git bisecting what is left).",
            "",
        ],
    )


def plots(s: Mapping[str, Any], run_dir: Path) -> None:
    """posterior.png, bisect.png and tps-time.png."""
    figures.trail(s, run_dir / figures.TRAIL)
    title = "tps per tested revision"
    figures.along_path(s, run_dir / figures.PATH, title, s.get("threshold"))
    ends = {s["good"]: "good (endpoint)", s["bad"]: "bad (endpoint)"}
    figures.over_time(s, run_dir / figures.TIME, ends)


def print_answer(s: Mapping[str, Any], written: Path) -> None:
    """The answer on stdout: the commit (or the candidates), the re-check, the report."""
    a = s["answer"]
    if a["kind"] == "culprit":
        c = s["candidates"][0]
        print(f"first bad commit: {c['commit']} {c['subject']} (P = {c['p']:.3f})")
    else:
        head = (
            "one of"
            if a["kind"] == "range"
            else f"no commit holds {s['options']['confidence']:g}; most likely"
        )
        print(f"first bad commit: {head} {len(s['candidates'])} (P = {a['probability']:.3f}):")
        for c in s["candidates"]:
            print(f"  {c['commit']} {c['subject']} (P = {c['p']:.3f})")
    for said in verify.lines(s):
        print(said)
    rc = s["recheck"]
    if rc.get("error") != NOT_NEEDED:
        print(recheck.line(rc.get("culprit", "?"), rc) if "culprit" in rc else rc["error"])
    if told := s.get("story"):
        print(f"the whole range: {told['kind']} (P(one change) = {told['p_single']:.3f})")
        for step in told["steps"]:
            print(
                f"  {step['commit'][:12]} {step['subject']}: tps x{_ratio(step)} "
                f"({chance(step['p'])}), re-check: {step['recheck'] or 'none'}"
            )
        for note in told["notes"]:
            progress.warn(note)
    for w in s["verdict"]["warnings"]:
        progress.warn(w)
    if not s["confirmed"]:
        progress.warn("the answer is NOT confirmed: treat it as suspect")
    print(f"report: {written}")
