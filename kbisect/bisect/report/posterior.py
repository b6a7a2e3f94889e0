"""The posterior method's part of a bisect report (`--method posterior`): its summary.json
from the state the search left (the answer with its probabilities, stated after the
re-check, never before; the re-checks; where it first stopped; every sample with the most
likely commit after it), the log `git bisect replay` accepts, its sections of report.md,
its plots and the answer printed."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.bisect import recheck
from kbisect.bisect.posterior import graph as graph_mod
from kbisect.bisect.posterior import replay, story
from kbisect.bisect.posterior.posterior import Answer, Posterior
from kbisect.bisect.report import figures, markdown, summary, table
from kbisect.bisect.state import Run
from kbisect.core import progress
from kbisect.report import disturbed
from kbisect.source import git
from kbisect.stats import drift

LOG = "git-bisect.log"


def replay_log(top: Path, post: Posterior, answer: Answer, run: Run) -> str:
    """The log `git bisect replay` turns into the same answer (replay.py)."""
    order = [*run.visited, *run.failed]
    return replay.log(
        post,
        answer,
        run.options.confidence,
        lambda c: git.subject(top, c),
        lambda c: git.git(top, "rev-parse", f"{c}^@").split(),
        list(dict.fromkeys(order)),
    )


def _trail(post: Posterior, rows: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """After each ok sample (time order): the most likely commit, its P, and the P of each
    of `names` (the final answer's top candidates)."""
    replayed = Posterior(post.graph, post.model)
    index = post.graph.index
    out = []
    for r in rows:
        if r["tps"] is None:
            continue
        replayed.update(r["commit"], float(r["tps"]), float(r["t"]), float(r.get("load") or 0.0))
        probs = replayed.probabilities()
        best = max(range(post.graph.n), key=lambda i: probs[i])
        out.append(
            {
                "commit": r["commit"],
                "role": r["role"],
                "top": post.graph.commits[best],
                "p": probs[best],
                "p_names": [probs[index[c]] for c in names],
            }
        )
    return out


def _verdict(post: Posterior, commit: str, confidence: float) -> str:
    if commit in post.untestable:
        return "skip"
    p = post.p_bad(commit) if commit in post.graph.index else 0.0
    return "bad" if p >= confidence else "good" if p <= 1 - confidence else "unclear"


def _revisions(top: Path, post: Posterior, run: Run) -> list[dict[str, Any]]:
    rows = []
    for commit in dict.fromkeys([*run.visited, *run.failed]):
        own = [r for r in run.samples if r["commit"] == commit]
        tps = [float(r["tps"]) for r in own if r["tps"] is not None]
        failures = [str(r["error"]) for r in own if r["tps"] is None]
        role = "endpoint" if commit in (run.good, run.bad) else "step"
        row = table.row(
            commit,
            git.subject(top, commit),
            _verdict(post, commit, run.options.confidence),
            role,
            (tps, failures),
            run.failed.get(commit, ""),
        )
        p_bad = post.p_bad(commit) if commit in post.graph.index else 0.0
        rows.append({**row, "p_bad": p_bad})
    return rows


def _final_recheck(answer: Answer, post: Posterior, run: Run) -> dict[str, Any]:
    if answer.kind == "undecided":
        return {"confirmed": False, "error": "no answer held the confidence: nothing re-checked"}
    culprit = recheck.pair(post, answer)[1]
    rc = run.rechecks.get(culprit)
    if rc is None:
        return {"confirmed": False, "error": "the budget ended before the re-check"}
    return {**rc, "culprit": culprit, "method": "delta method on the log, Welch df", "warnings": []}


def _loaded(post: Posterior, rows: list[dict[str, Any]], listed: bool) -> str | None:
    """One line when samples taken under load count: how many, how loaded, and what the
    posterior made of it (likelihood.py: the load as a regressor). listed: the report's
    Disturbed samples section lists samples; a load under --disturbed-share is not there."""
    fit = post.levels()
    if fit is None or "load" not in fit.regressors:
        return None
    beta = fit.coef[2 + fit.regressors.index("load")]
    under = [float(r["load"]) for r in rows if r["tps"] and float(r.get("load") or 0) >= 0.1]
    if not under:
        return None
    mean = math.fsum(under) / len(under)
    where = (
        "flagged under Disturbed samples"
        if listed
        else "under the share that marks a sample disturbed, so none is listed as such"
    )
    return (
        f"load: {len(under)} samples ran while other work took {mean:.0%} of the CPUs "
        f"on average ({where}); the posterior fitted their "
        f"slowdown from the measured load (tps x{math.exp(beta * mean):.2f} at that "
        f"load) and kept them as evidence"
    )


def _disturbed(run_dir: Path, run: Run) -> list[dict[str, Any]] | None:
    """The disturbed samples of the visited revisions and of the re-checks' pairs."""
    found = disturbed.of_store(run.store, run.visited)
    pairs = [
        (recheck.folder(run_dir, culprit, c), f"{c[:12]} (re-check)")
        for culprit, rc in run.rechecks.items()
        for c in (rc["parent"], culprit)
    ]
    more = disturbed.of_folders(pairs)
    return found if more is None else [*(found or []), *more]


def _kind(
    answer: Answer, rc: Mapping[str, Any], told: Mapping[str, Any] | None, confirmed: bool
) -> str:
    if told is not None and told["kind"] in ("several", "contradicted"):
        return f"{told['kind']} changes" if confirmed else f"{told['kind']}, not confirmed"
    if answer.kind == "undecided":
        return "undecided"
    return "regression" if confirmed else "not confirmed"


def _result(answer: Answer, candidates: list[dict[str, Any]]) -> str:
    if answer.kind == "culprit":
        c = candidates[0]
        return f"first bad commit {c['commit']} {c['subject']} (P = {c['p']:.3f})"
    what = "one of" if answer.kind == "range" else "undecided, most likely among"
    return f"first bad commit: {what} {len(candidates)} (P = {answer.probability:.3f})"


def build(top: Path, run_dir: Path, run: Run) -> dict[str, Any]:
    """Everything the report shows, as JSON that schema/summary.json accepts."""
    g = graph_mod.read(top, [run.good], run.bad)
    post = Posterior.from_dict(g, run.posterior)
    conf = run.options.confidence
    answer = post.answer(conf)
    candidates = [
        {"commit": c, "subject": git.subject(top, c), "p": p} for c, p in answer.candidates
    ]
    rc = _final_recheck(answer, post, run)
    rows = list(run.samples)
    timed = [drift.Timed(r["commit"], r["t"], float(r["tps"])) for r in rows if r["tps"]]
    out = summary.common(run, timed)
    names = [c for c, _ in answer.candidates[:3]]
    told = _story(top, run)
    shaken = _disturbed(run_dir, run)
    confirmed = (
        story.confirmed(run.story, run.rechecks, conf) if told else bool(rc.get("confirmed"))
    )
    extra = {"story": told, "probes": list(run.probes or [])} if told else {}
    return {
        **out,
        "method": "posterior",
        "stats": {"endpoints": run.endpoints, "levels": post.summary(conf)["levels"]},
        "verdict": {
            "kind": _kind(answer, rc, told, confirmed),
            "result": _result(answer, candidates),
            "warnings": [
                w for w in [out["drift"]["warning"], _loaded(post, rows, bool(shaken))] if w
            ],
        },
        "answer": {**answer.as_dict(), "candidates": candidates},
        "first_bad": candidates[0] if answer.kind == "culprit" else None,
        "candidates": candidates,
        "first_stop": run.first_stop,
        "recheck": rc,
        "rechecks": run.rechecks,
        "confirmed": confirmed,
        "revisions": _revisions(top, post, run),
        "samples": rows,
        "trail": _trail(post, rows, names),
        "trail_names": names,
        "boots": sum(1 for r in rows if r["role"] != "endpoint"),
        "bisect_log": run.git_bisect_log or "",
        "disturbed": shaken,
        **extra,
    }


def replay_file(s: Mapping[str, Any]) -> str:
    """git-bisect.log as written beside the report: the replay log, closed by the caveat
    when the story has more than one change (rendered from the summary, so that `kbisect
    report` gives a run stored before the caveat existed its caveat too)."""
    return str(s["bisect_log"]) + _log_caveat(s.get("story"))


def _log_caveat(told: Mapping[str, Any] | None) -> str:
    """Comment lines closing the replay log when the range is not one step: git's single
    first bad commit with its caveat, and every change the story names (git bisect
    replay reads only the `git bisect` lines)."""
    if not told or told["kind"] not in ("several", "contradicted"):
        return ""
    lines = [
        f"# caveat: the samples do not support one step (P(one change) = "
        f"{told['p_single']:.3f}); git's single first bad commit is not the whole story.",
        "# the whole range (report.md):" if told["steps"] else "# no change is located yet",
    ]
    for step in told["steps"]:
        what = "regression" if step["ratio"] < 1 else "improvement"
        lines.append(
            f"#   {what} [{step['commit']}] {step['subject']}: tps x{step['ratio']:.3f} "
            f"({_p(step['p'])}), re-check: {step['recheck'] or 'not re-checked'}"
        )
    return "\n".join(lines) + "\n"


def _story(top: Path, run: Run) -> dict[str, Any] | None:
    """The story as the report shows it: each change with its subjects and re-check."""
    if not run.story:
        return None
    steps = []
    for step in run.story["steps"]:
        rc = story.recheck_of(step, run.rechecks)
        steps.append(
            {
                **step,
                "subject": git.subject(top, step["commit"]),
                "recheck": None if rc is None else _recheck_word(rc),
            }
        )
    return {**run.story, "steps": steps, "alone": story.ALONE}


def _recheck_word(rc: Mapping[str, Any]) -> str:
    if "error" in rc:
        return f"failed: {rc['error']}"
    if rc.get("kind") == "running":
        return "not finished"
    word = "confirmed" if rc.get("confirmed") else str(rc.get("kind"))
    if rc.get("partial"):
        word += ", partial: the rest of good -> bad is elsewhere"
    return word


def mismatch(s: Mapping[str, Any]) -> str | None:
    """What a posterior summary's schema cannot say: a trail entry for each sample with
    a tps, each with the P of every trail name; None when it holds (or for the git
    method's)."""
    if s.get("method") != "posterior":
        return None
    measured = sum(1 for r in s["samples"] if r["tps"] is not None)
    if len(s["trail"]) < measured:
        return f"$.trail: {len(s['trail'])} entries for {measured} samples with a tps"
    names = len(s.get("trail_names") or [])
    for i, t in enumerate(s["trail"]):
        if len(t["p_names"]) < names:
            return f"$.trail[{i}].p_names: {len(t['p_names'])} entries for {names} trail_names"
    return None


def _p(p: float) -> str:
    """ "P = 0.9939", or "P > 0.9999"."""
    return "P > 0.9999" if p > 0.9999 else f"P = {p:.4f}"


def _answer(s: Mapping[str, Any]) -> list[str]:
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
    if first:
        note = [
            f"The search first stopped at `{first['commit'][:12]}` with P = "
            f"{first['p']:.4f} before its re-check; the probabilities above include the "
            "re-check's fresh samples (quote those, not the first stop's).",
            "",
        ]
    return [*head, "", *note]


def _recheck(rc: Mapping[str, Any], s: Mapping[str, Any]) -> list[str]:
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
            f"| {what}: {where} | {_p(step['p'])} | {_ratio(step)} | "
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
            "## Every sample, in time order",
            "",
            *_samples(s),
            "",
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
    rc = s["recheck"]
    print(recheck.line(rc.get("culprit", "?"), rc) if "culprit" in rc else rc["error"])
    if told := s.get("story"):
        print(f"the whole range: {told['kind']} (P(one change) = {told['p_single']:.3f})")
        for step in told["steps"]:
            print(
                f"  {step['commit'][:12]} {step['subject']}: tps x{_ratio(step)} "
                f"({_p(step['p'])}), re-check: {step['recheck'] or 'none'}"
            )
        for note in told["notes"]:
            progress.warn(note)
    for w in s["verdict"]["warnings"]:
        progress.warn(w)
    if not s["confirmed"]:
        progress.warn("the answer is NOT confirmed: treat it as suspect")
    print(f"report: {written}")
