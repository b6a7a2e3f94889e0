"""A bisection as a mail (`kbisect report RUN_DIR --format mbox`), in the kernel test
robot's order (kbisect/report/mbox.py writes the message): the culprit's re-check against
its parent is the change; the revisions tested follow the culprit."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.bisect import verify
from kbisect.bisect.report import table
from kbisect.bisect.report import text as bisect_text
from kbisect.report import build, mbox
from kbisect.report.text import change, command, para
from kbisect.stats import means


def _ratio(rc: Mapping[str, Any]) -> means.RatioCI | None:
    if "ratio" not in rc:
        return None
    level = float(rc.get("level") or 0.95)
    return means.RatioCI(rc["ratio"], rc["low"], rc["high"], str(rc.get("method")), level)


def subject(s: Mapping[str, Any]) -> str:
    """`<commit> <subject>: -43.3% pgbench.tps (scenario)`."""
    scen = s["options"]["scenario"]
    fb, rc = s.get("first_bad"), s.get("recheck") or {}
    figure = f"{change(rc['ratio'])}" if "ratio" in rc else "a change in"
    if fb:
        return f"{fb['commit'][:12]} {fb['subject']}: {figure} pgbench.tps ({scen})"
    n = len(s.get("candidates") or [])
    return f"one of {n} commits: {figure} pgbench.tps ({scen})"


def render(run_dir: Path, s: Mapping[str, Any]) -> mbox.Mail:
    o, rc = s["options"], s.get("recheck") or {}
    fb, r = s.get("first_bad"), _ratio(rc)
    parent, culprit = bisect_text.samples(run_dir, s)
    scen = o["scenario"]
    what = f"a {change(r.ratio)} change" if r else "a change"
    lines = ["Hello,", ""]
    lines += para(
        f"kbisect noticed {what} of pgbench.tps ({scen}) between {o['good']} (good) "
        f"and {o['bad']} (bad), and bisected it to:"
    )
    lines += [""]
    if fb:
        lines += para(f'commit: {fb["commit"]} ("{fb["subject"]}")', "", "  ")
    else:
        lines += ["one of these commits (skipped revisions hide which):"]
        for c in s.get("candidates") or []:
            lines += para(f"{c['commit']} {c['subject']}", "  ", "  ")
    for said in verify.lines(s):
        lines += ["", *para(f"{said}.")]
    describe = next((x.manifest.get("describe") for x in culprit), None)
    tree = build.facts(culprit + parent).get("tree") or build.tree_name(s.get("tree")) or "?"
    lines += [f"tree: {tree}" + (f", describe {describe}" if describe else ""), ""]
    settings: Mapping[str, Any] = next((x.settings for x in culprit + parent), {})
    digest = (s.get("scenario") or {}).get("hash") or ""
    lines += [*mbox.testcase(settings, scen, digest), ""]
    lines += [*mbox.machine(culprit + parent), ""]
    built = [x.removeprefix("  ") for x in bisect_text.build_lines(s, parent, culprit)]
    lines += [*(x for x in built if not x.startswith("tree:")), ""]  # named with the commit
    if r:
        rows = [
            ("parent", str(rc.get("parent") or "?")[:12], rc.get("parent_tps") or []),
            ("culprit", str(rc.get("culprit") or "?")[:12], rc.get("culprit_tps") or []),
        ]
        lines += ["comparison (re-check, fresh boots):", *mbox.table(rows, r, "culprit/parent")]
        lines += [""]
    lines += ["culprit:"]
    if r:
        word = "confirmed" if rc.get("confirmed") else "NOT confirmed: treat it as suspect"
        lines += para(
            f"the re-check of the culprit against its parent gives {change(r.ratio)}: {word}.",
            "  ",
            "  ",
        )
    elif rc and not verify.measured_record(s):
        lines += para(f"the re-check failed: {rc.get('error')}; not confirmed.", "  ", "  ")
    lines += ["  revisions tested:", *table.text(s.get("revisions") or []), ""]
    lines += ["reproduce:", *command(s["command"])]
    return mbox.Mail(subject(s), [*lines, *mbox.closing()], s.get("created"))
