"""The report of a posterior bisection (`--method posterior`): summary.json, report.md,
the git-bisect-compatible log and the plots, from the state the search left.

The Markdown opens with the command that reproduces the bisection, then the answer with
its probabilities (stated after the re-check, never before), the re-check, drift, every
revision tested with its samples and P(bad), every sample in time order with the most
likely commit after it, and the log `git bisect replay` accepts. Plots: the posterior
after each sample (posterior.png), tps along the tested revisions (bisect.png), tps
against wall-clock time (tps-time.png).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from kbisect.bisect import recheck, wallclock
from kbisect.bisect.posterior import graph as graph_mod
from kbisect.bisect.posterior import replay
from kbisect.bisect.posterior.posterior import Answer, Posterior
from kbisect.bisect.state import Run
from kbisect.core import clock, progress
from kbisect.report import disturbed
from kbisect.source import git
from kbisect.stats import drift


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
    conf = run.options.confidence
    rows = []
    for commit in dict.fromkeys([*run.visited, *run.failed]):
        own = [r for r in run.samples if r["commit"] == commit]
        tps = [float(r["tps"]) for r in own if r["tps"] is not None]
        p_bad = post.p_bad(commit) if commit in post.graph.index else 0.0
        rows.append(
            {
                "commit": commit,
                "subject": git.subject(top, commit),
                "verdict": _verdict(post, commit, conf),
                "p_bad": p_bad,
                "tps": tps,
                "failures": [str(r["error"]) for r in own if r["tps"] is None],
                "n": len(tps),
                "mean": sum(tps) / len(tps) if tps else None,
                "reason": run.failed.get(commit, ""),
                "role": "endpoint" if commit in (run.good, run.bad) else "step",
            }
        )
    return rows


def _final_recheck(answer: Answer, post: Posterior, run: Run) -> dict[str, Any]:
    if answer.kind == "undecided":
        return {"confirmed": False, "error": "no answer held the confidence: nothing re-checked"}
    culprit = recheck.pair(post, answer)[1]
    rc = run.rechecks.get(culprit)
    if rc is None:
        return {"confirmed": False, "error": "the budget ended before the re-check"}
    return {**rc, "culprit": culprit, "method": "delta method on the log, Welch df", "warnings": []}


def _loaded(post: Posterior, rows: list[dict[str, Any]]) -> str | None:
    """One line when samples taken under load count: how many, how loaded, and what the
    posterior made of it (likelihood.py: the load as a regressor)."""
    fit = post.levels()
    if fit is None or "load" not in fit.regressors:
        return None
    beta = fit.coef[2 + fit.regressors.index("load")]
    under = [float(r["load"]) for r in rows if r["tps"] and float(r.get("load") or 0) >= 0.1]
    if not under:
        return None
    mean = math.fsum(under) / len(under)
    return (
        f"load: {len(under)} samples ran while other work took {mean:.0%} of the CPUs "
        f"on average (flagged under Disturbed samples); the posterior fitted their "
        f"slowdown from the measured load (tps x{math.exp(beta * mean):.2f} at that "
        f"load) and kept them as evidence"
    )


def summary(top: Path, run_dir: Path, run: Run, argv: list[str]) -> dict[str, Any]:
    """Everything the report shows, as JSON that schema/summary.json accepts."""
    g = graph_mod.read(top, [run.good], run.bad)
    post = Posterior.from_dict(g, run.posterior)
    conf = run.options.confidence
    answer = post.answer(conf)
    candidates = [
        {"commit": c, "subject": git.subject(top, c), "p": p} for c, p in answer.candidates
    ]
    rc = _final_recheck(answer, post, run)
    confirmed = bool(rc.get("confirmed"))
    opts = run.options.as_dict()
    rows = list(run.samples)
    timed = [drift.Timed(r["commit"], r["t"], float(r["tps"])) for r in rows if r["tps"]]
    moved = wallclock.check(timed, "posterior", opts["references"])
    names = [c for c, _ in answer.candidates[:3]]
    return {
        "version": 1,
        "kind": "bisect",
        "method": "posterior",
        "created": clock.utc_now(),
        "command": progress.reproduce_line(argv),
        "scenario": run.scenario,
        "sides": {},
        "stats": {"endpoints": run.endpoints, "levels": post.summary(conf)["levels"]},
        "verdict": {
            "kind": _kind(answer, rc),
            "result": _result(answer, candidates),
            "warnings": [w for w in [moved["warning"], _loaded(post, rows)] if w],
        },
        "tree": str(run.tree),
        "good": run.good,
        "bad": run.bad,
        "options": opts,
        "threshold": run.threshold,
        "threshold_source": run.threshold_source,
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
        "drift": moved,
        "boots": sum(1 for r in rows if r["role"] != "endpoint"),
        "bisect_log": run.git_bisect_log or "",
        "disturbed": _disturbed(run_dir, run),
        "exit": run.exit,
    }


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


def _kind(answer: Answer, rc: dict[str, Any]) -> str:
    if answer.kind == "undecided":
        return "undecided"
    return "regression" if rc.get("confirmed") else "not confirmed"


def _result(answer: Answer, candidates: list[dict[str, Any]]) -> str:
    if answer.kind == "culprit":
        c = candidates[0]
        return f"first bad commit {c['commit']} {c['subject']} (P = {c['p']:.3f})"
    what = "one of" if answer.kind == "range" else "undecided, most likely among"
    return f"first bad commit: {what} {len(candidates)} (P = {answer.probability:.3f})"


def print_answer(s: dict[str, Any], written: Path) -> None:
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
    for w in s["verdict"]["warnings"]:
        progress.warn(w)
    if not s["confirmed"]:
        progress.warn("the answer is NOT confirmed: treat it as suspect")
    print(f"report: {written}")
