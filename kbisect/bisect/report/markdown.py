"""report.md of a bisection, either method, from its summary.json: one page in one order,
into which a method (git.py; the posterior's answer.py) puts its own sections.

The page: the title and the command that reproduces the bisection; the tree, endpoints,
append, configs and arch, then the method's settings; the method's answer and re-check;
drift; what the method shows before the revisions; the revisions tested (table.py) and
their plot; what it shows after them; the `git bisect` log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbisect.bisect import verify
from kbisect.bisect.report import figures, table
from kbisect.report import patches
from kbisect.report.formats import section
from kbisect.stats import drift


@dataclass(frozen=True)
class Sections:
    """What a method puts into the page."""

    title: str  # the scenario, as the method names it
    settings: list[str]  # bullet lines after the tree, append, configs and arch
    answer: list[str]  # the answer and its re-check
    before: list[str]  # after drift, before the revisions
    order: str  # the order of the revisions, as their heading says it
    p_bad: bool  # the revisions with their P(bad)
    plot: str  # the revisions' plot's alt text
    after: list[str]  # after the revisions' plot
    log_note: list[str]  # before the log: what it is for


SUSPECT = "**NOT CONFIRMED: treat the answer as suspect**"


def recheck(
    rc: Mapping[str, Any],
    finding: Callable[[float, float], str],
    labels: tuple[str, str],
    notes: Sequence[str] = (),
) -> list[str]:
    """The re-check's paragraph (either method): what it found, from the parent's and
    the culprit's mean tps, then the samples of each under its label, then notes."""
    pm = sum(rc["parent_tps"]) / len(rc["parent_tps"])
    cm = sum(rc["culprit_tps"]) / len(rc["culprit_tps"])
    return [
        finding(pm, cm),
        "",
        f"- {labels[0]}: {', '.join(f'{x:.1f}' for x in rc['parent_tps'])}",
        f"- {labels[1]}: {', '.join(f'{x:.1f}' for x in rc['culprit_tps'])}",
        *notes,
        "",
    ]


def verify_lines(s: Mapping[str, Any]) -> list[str]:
    """The revert check's paragraph (either method), first in the answer: the share of the
    good-to-bad gap the revert restores, its samples; none in a run from before it."""
    rec = s.get("verification")
    out = [x for said in verify.lines(s) for x in (f"**Revert check: {said}.**", "")]
    if rec and rec.get("reverted_tps"):
        tps = {k: ", ".join(f"{x:.1f}" for x in rec[k]) for k in ("reverted_tps", "bad_tps")}
        out += [
            f"- bad with `{rec['culprit'][:12]}` reverted: {tps['reverted_tps']}",
            f"- bad `{rec['bad'][:12]}`, its stored samples and the check's: {tps['bad_tps']}",
            *([f"- {rec['stop']}"] if rec.get("stop") else []),
            "",
        ]
    return out


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def drift_lines(s: Mapping[str, Any]) -> list[str]:
    """The drift paragraph (either method); none for a run from before drift was checked."""
    if "drift" not in s:
        return []
    d = s["drift"]
    tr = d.get("trend")
    plot = [f"![tps against time]({figures.TIME})", ""]
    if d.get("warning"):
        return [f"**{d['warning']}**", "", *plot]
    loaded = [w for w in (s.get("verdict") or {}).get("warnings", []) if w.startswith("load:")]
    if loaded and tr is not None:  # a step with the load: the time trend does not fit it
        return [
            f"**Drift: the host's speed moved with the load other work put on it "
            f"({tr['moved']:+.1%} over the run within revisions sampled more than once; "
            f"a step, which the time trend alone fits badly: p = {tr['p']:.2g}).** "
            f"{_sentence(loaded[0].removeprefix('load: '))}.",
            "",
            *plot,
        ]
    if tr is None:
        return ["Drift: too few reference samples over time to test.", ""]
    return [
        f"Drift: none detected ({tr['moved']:+.1%} over the run within revisions sampled "
        f"more than once, "
        f"p = {tr['p']:.2g}, {tr['n']} samples; the test warns at p < {drift.ALPHA} and "
        f"a move of {drift.NOTICEABLE:.0%}).",
        "",
        *plot,
    ]


def preempt_lines(s: Mapping[str, Any]) -> list[str]:
    """Revisions that did not get the preemption model they asked for (none in a run
    from before this was checked)."""
    warned = s.get("preempt") or []
    return [*(f"**Warning: {w}.**" for w in warned), *([""] if warned else [])]


def page(s: Mapping[str, Any], m: Sections) -> str:
    """report.md."""
    o = s["options"]
    return "\n".join(
        [
            f"# kbisect bisect: {m.title}",
            "",
            "Reproduce:",
            "",
            f"    {s['command']}",
            "",
            f"- tree: `{s['tree']}`; good `{s['good']}`, bad `{s['bad']}`",
            f"- append: `{o['append']}`; configs: {', '.join(o['configs']) or '-'}; "
            f"arch {o['arch']}",
            *(
                [f"- patches on every revision: {patches.line(s['patches'])}"]
                if s.get("patches")
                else []
            ),
            *m.settings,
            "",
            *verify_lines(s),
            *m.answer,
            *preempt_lines(s),
            *drift_lines(s),
            *m.before,
            *section(
                f"Revisions tested, in {m.order}", table.markdown(s["revisions"], p_bad=m.p_bad)
            ),
            f"![{m.plot}]({figures.PATH})",
            "",
            *m.after,
            "## git bisect log",
            "",
            *m.log_note,
            "```",
            s["bisect_log"].rstrip(),
            "```",
            "",
        ]
    )
