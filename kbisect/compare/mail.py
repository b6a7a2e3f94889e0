"""A compare run as a mail (`kbisect report RUN_DIR --format mbox`), in the kernel test
robot's order (kbisect/report/mbox.py writes the message), opening with the finding in a
maintainer's words (text.head: what reverting a commit restores and what it costs, what
a patch changes, else B/A)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kbisect.compare import revert, text
from kbisect.compare.report import SIDES, Run, ok_tps
from kbisect.report import build, mbox
from kbisect.report.text import change, command, para, warning_lines


def _commit(info: Mapping[str, Any]) -> str:
    k = info.get("kernel") or {}
    return str(k.get("describe") or (k.get("commit") or "")[:12] or "prebuilt")


def _short(info: Mapping[str, Any]) -> str:
    return str((info.get("kernel") or {}).get("commit") or "")[:12] or _commit(info)


def subject(run: Run) -> str:
    """`<commit> <subject>: -49.0% pgbench.tps (scenario)`, or a revert check's phrase."""
    v, s = run.verdict, run.summary
    scen = s["scenario"]["name"]
    if rev := revert.of(s):
        verb = revert.VERBS.get(v.kind)
        what = f"{verb[0]} {change(v.ratio.ratio)}" if verb else "changes nothing significant in"
        return f"reverting {rev.named()} {what} pgbench.tps ({scen})"
    figure = change(v.ratio.ratio) if v.kind in ("regression", "improvement") else "no change in"
    a, b = (s["sides"][x] for x in SIDES)
    k = b.get("kernel") or {}
    if (k.get("commit"), k.get("patches")) != ((a.get("kernel") or {}).get("commit"), None):
        what = f"{_commit(b)} {k.get('subject') or ''}".strip()
    else:
        what = f"{run.name('B')} vs {run.name('A')}"
    return f"{what}: {figure} pgbench.tps ({scen})"


def render(run: Run) -> mbox.Mail:
    s, v = run.summary, run.verdict
    a, b = (s["sides"][x] for x in SIDES)
    trees = build.facts(run.samples).get("tree") or "?"
    lines = ["Hello,", "", *para(text.head(run)), ""]
    for side, info in (("A", a), ("B", b)):
        k = info.get("kernel") or {}
        subj = f' ("{k["subject"]}")' if k.get("subject") else ""
        lines += para(f"{side}: {k.get('commit') or _commit(info)}{subj}", "", "   ")
        if info.get("append"):
            lines += para(f"appended to its command line: {info['append']}", "   ")
    lines += [f"tree: {trees}", ""]
    settings: Mapping[str, Any] = next((x.settings for x in run.samples), {})
    scen = s["scenario"]
    lines += [*mbox.testcase(settings, scen["name"], scen.get("hash") or ""), ""]
    lines += [*mbox.machine(run.samples), ""]
    lines += [*mbox.build_lines({x: run.side(x) for x in SIDES}), ""]
    rows = [(x, _short(s["sides"][x]), ok_tps(run.side(x))) for x in SIDES]
    lines += ["comparison:", *mbox.table(rows, v.ratio, "B/A"), ""]
    lines += ["reproduce:", *command(s.get("command") or "(not recorded)")]
    lines += warning_lines(v.warnings)
    return mbox.Mail(subject(run), [*lines, *mbox.closing()], s.get("created"))
