"""A bisection's summary.json as a mailing-list text (`kbisect report RUN_DIR --format
text`), either method, with the 72-column helpers of kbisect/report/text.py and the
revisions as table.py lists them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.bisect import state, verify
from kbisect.bisect.report import table
from kbisect.measure import results
from kbisect.measure.record import Sample
from kbisect.report import build, patches
from kbisect.report.text import (
    change,
    command,
    fingerprint_lines,
    fit,
    machine,
    numbers,
    para,
    warning_lines,
)


def _bisect_samples(run_dir: Path, commit: str | None) -> list[Sample]:
    """A bisected revision's samples from the bisect store, when the run still has it
    (state.samples_store: a `store/` beside it when copied with its samples)."""
    if commit is None or not (run_dir / state.STATE_FILE).is_file():
        return []
    store = state.samples_store(run_dir)
    try:
        return results.load_samples(store / commit) if (store / commit).is_dir() else []
    except results.InvalidResult:
        return []


def samples(run_dir: Path, s: Mapping[str, Any]) -> tuple[list[Sample], ...]:
    """The re-checked parent's and culprit's samples, when the bisect store is here."""
    rc = s.get("recheck") or {}
    return _bisect_samples(run_dir, rc.get("parent")), _bisect_samples(run_dir, rc.get("culprit"))


def build_lines(s: Mapping[str, Any], parent: list[Sample], culprit: list[Sample]) -> list[str]:
    """The build of the parent and the culprit (from their samples), else the tree and the
    base config the summary recorded."""
    if parent or culprit:
        return build.lines({"parent": parent, "culprit": culprit})
    base = s["options"].get("base_config")
    return [
        *para(f"tree: {build.tree_name(s.get('tree')) or '?'}", "  "),
        *(para(f"kconfig: from {base}", "  ") if base else []),
        *para("(compiler, kconfig hash, fragments: the bisect store is not here)", "  "),
    ]


def render(run_dir: Path, s: Mapping[str, Any]) -> str:
    """A bisect run's summary.json as a mailing-list text."""
    o, rc = s["options"], s.get("recheck") or {}
    fb = s.get("first_bad")
    found = (
        f'commit {fb["commit"][:12]} ("{fb["subject"]}")'
        if fb
        else f"one of {len(s.get('candidates') or [])} commits (skipped revisions hide which)"
    )
    lines = para(
        f"kbisect bisected a change in pgbench tps ({o['scenario']}) between "
        f"{o['good']} (good) and {o['bad']} (bad) to {found}."
    )
    for said in verify.lines(s):
        lines += ["", *para(f"{said}.", "  ")]
    if "ratio" in rc:
        word = "confirmed" if rc.get("confirmed") else "NOT confirmed: treat it as suspect"
        # the git method's kind is the compare verdict; the posterior's says it already
        kind = "" if rc["kind"] in ("confirmed", "refuted", "unclear") else f"{rc['kind']}, "
        level = float(rc.get("level") or 0.95)  # the posterior's re-check sets its own
        lines += [
            "",
            *para(
                f"re-check, culprit vs its parent with fresh boots: {rc['ratio']:.3f}x "
                f"({change(rc['ratio'])}), {level * 100:.3g}% CI "
                f"[{rc['low']:.3f}, {rc['high']:.3f}], "
                f"{len(rc['culprit_tps'])} + {len(rc['parent_tps'])} boots: {kind}{word}.",
                "  ",
            ),
        ]
    elif rc and not verify.measured_record(s):
        lines += ["", *para(f"re-check failed: {rc.get('error')}; not confirmed.", "  ")]
    lines += ["", "commit:"]
    shown = [fb] if fb else s.get("candidates") or []
    lines += [x for c in shown for x in para(f"{c['commit']} {c['subject']}", "  ")]
    lines += ["", "reproduce:", *command(s["command"]), ""]
    parent, culprit = samples(run_dir, s)
    fps = {
        "parent": [x.fingerprint for x in parent],
        "culprit": [x.fingerprint for x in culprit],
    }
    lines += ["fingerprint differences (parent, culprit):"]
    lines += (
        fingerprint_lines(fps, ("parent", "culprit"))
        if culprit or parent
        else ["  (the bisect store with the samples is not with this report)"]
    )
    lines += ["", "machine:", *machine(culprit + parent), ""]
    lines += ["build:", *build_lines(s, parent, culprit), ""]
    how = (
        f"posterior method, P(first bad commit) {s['answer']['probability']:.4f} after the re-check"
        if s.get("method") == "posterior"
        else f"threshold {s['threshold']:.1f} tps ({s.get('threshold_source')})"
    )
    lines += [f"{how}; append {o['append']!r}; arch {o['arch']}"]
    if s.get("patches"):
        lines += para(f"patches on every revision: {patches.line(s['patches'])}")
    lines += ["", "revisions tested:"]
    lines += table.text(s.get("revisions") or [])
    if rc.get("parent_tps"):
        lines += [
            "",
            "re-check tps per boot:",
            *para(f"parent: {numbers(rc['parent_tps'])}", "  "),
            *para(f"culprit: {numbers(rc['culprit_tps'])}", "  "),
        ]
    warned = [*s.get("preempt", []), *rc.get("warnings", []), (s.get("drift") or {}).get("warning")]
    return fit([*lines, *warning_lines([w for w in warned if w])])
