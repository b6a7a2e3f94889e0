"""The posterior method's summary.json (`--method posterior`), from the state the search
left: the answer with its probabilities, stated after the re-check, never before; the
re-checks; where it first stopped; every sample with the most likely commit after it;
and the log `git bisect replay` accepts. answer.py shows it (report.md, plots, stdout)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.bisect import recheck
from kbisect.bisect.posterior import graph as graph_mod
from kbisect.bisect.posterior import replay, story
from kbisect.bisect.posterior.posterior import Answer, Posterior
from kbisect.bisect.report import summary, table
from kbisect.bisect.state import Recheck, Run
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


NOT_NEEDED = "not run: the revert check measured the answer"  # the re-check is its fallback


def _final_recheck(answer: Answer, post: Posterior, run: Run) -> dict[str, Any]:
    if answer.kind == "undecided":
        return {"confirmed": False, "error": "no answer held the confidence: nothing re-checked"}
    culprit = recheck.pair(post, answer)[1]
    rc = run.rechecks.get(culprit)
    if rc is None:
        v = run.verification
        if v is not None and v.culprit == culprit and v.measured:
            return {"confirmed": False, "error": NOT_NEEDED}
        return {"confirmed": False, "error": "the budget ended before the re-check"}
    how = "delta method on the log, Welch df"
    return {**rc.as_dict(), "culprit": culprit, "method": how, "warnings": []}


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
    pairs = [
        (recheck.folder(run_dir, culprit, c), f"{c[:12]} (re-check)")
        for culprit, rc in run.rechecks.items()
        for c in (rc.parent, culprit)
    ]
    return disturbed.of_folders([*disturbed.store_folders(run.store, run.visited), *pairs])


def _kind(answer: Answer, told: Mapping[str, Any] | None, confirmed: bool) -> str:
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
    confirmed = run.confirmed(conf) if told else bool(rc.get("confirmed"))
    extra = {"story": told, "probes": list(run.probes or [])} if told else {}
    return {
        **out,
        "method": "posterior",
        "stats": {"endpoints": run.endpoints, "levels": post.summary(conf)["levels"]},
        "verdict": {
            "kind": _kind(answer, told, confirmed),
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
        "rechecks": run.rechecks_dict(),
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
            f"({chance(step['p'])}), re-check: {step['recheck'] or 'not re-checked'}"
        )
    return "\n".join(lines) + "\n"


def _story(top: Path, run: Run) -> dict[str, Any] | None:
    """The story as the report shows it: each change with its subjects and re-check."""
    if run.story is None:
        return None
    steps = []
    for change in run.story.changes:
        rc = run.recheck_of(change)
        steps.append(
            {
                **change.as_dict(),
                "subject": git.subject(top, change.commit),
                "recheck": None if rc is None else _recheck_word(rc),
            }
        )
    return {**run.story.as_dict(), "steps": steps, "alone": story.ALONE}


def _recheck_word(rc: Recheck) -> str:
    if rc.error is not None:
        return f"failed: {rc.error}"
    if rc.kind == "running":
        return "not finished"
    word = "confirmed" if rc.confirmed else rc.kind
    if rc.partial:
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


def chance(p: float) -> str:
    """ "P = 0.9939", or "P > 0.9999"."""
    return "P > 0.9999" if p > 0.9999 else f"P = {p:.4f}"
