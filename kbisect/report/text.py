"""Plain-text reports for a mailing list (`kbisect report RUN_DIR --format text`).

At most 72 columns, no Markdown, in the order the kernel test robot and maintainers
post performance regressions on LKML: the finding first (what changed, by how much,
its interval and sample counts), then the commit, the command that reproduces it, the
fingerprint differences, the machine and the scenario, then the per-boot figures.
Compare and bisect runs are rendered here; studies in kbisect/study/text.py with the
same helpers.
"""

from __future__ import annotations

import json
import shlex
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kbisect.measure import fingerprint, results, schema
from kbisect.stats import means

WIDTH = 72
TEXT = "report.txt"


def change(ratio: float) -> str:
    """0.877 -> `-12.3%`."""
    return f"{(ratio - 1) * 100:+.1f}%"


def para(text: str, indent: str = "", hang: str = "") -> list[str]:
    """`text` wrapped at WIDTH; continuation lines indented by `indent` + `hang`."""
    lines = textwrap.wrap(
        text, WIDTH, initial_indent=indent, subsequent_indent=indent + hang, break_on_hyphens=False
    )
    return lines or [""]


def command(cmd: str, indent: str = "  ") -> list[str]:
    """A shell command wrapped at WIDTH with ` \\` continuations, split between words."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return para(cmd, indent)
    lines, current = [], indent
    for word in (shlex.quote(w) for w in words):
        if current.strip() and len(current) + len(word) + 3 > WIDTH:
            lines.append(current + " \\")
            current = indent + "    "
        current += ("" if not current.strip() else " ") + word
    return [*lines, current]


def fit(lines: Iterable[str]) -> str:
    """Every line at most WIDTH columns (long tokens such as paths are broken)."""
    out: list[str] = []
    for line in lines:
        if len(line) <= WIDTH:
            out.append(line.rstrip())
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(
            line.strip(),
            WIDTH,
            initial_indent=indent,
            subsequent_indent=indent + "  ",
            break_long_words=True,
            break_on_hyphens=False,
        )
    return "\n".join(out).rstrip() + "\n"


def numbers(xs: Sequence[float]) -> str:
    return " ".join(f"{x:.1f}" for x in xs) or "none"


def fingerprint_lines(
    sides: Mapping[str, list[Mapping[str, Any]]], names: Sequence[str]
) -> list[str]:
    """`field: A -> B` for each field that differs between two sides; `(none)`."""
    rows = fingerprint.diff(sides)
    a, b = names
    out = []
    for r in rows:
        if r.differs:
            out.append(f"  {r.field}:")
            out.append(f"    {a}: {' / '.join(r.values.get(a, ())) or '-'}")
            out.append(f"    {b}: {' / '.join(r.values.get(b, ())) or '-'}")
    vary = [f"{r.field} ({', '.join(r.varies)})" for r in rows if r.varies]
    if vary:
        out += para(f"varies across boots: {', '.join(vary)}", "  ")
    return out or ["  (none)"]


def machine(samples: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where the boots ran: target, accelerator, guest size, kernel, PostgreSQL."""
    if not samples:
        return ["  (no samples with this report)"]
    s = samples[0]
    fp: Mapping[str, Any] = next((x["fingerprint"] for x in samples if x.get("fingerprint")), {})
    t = s.get("target") or {"kind": "vng", "accel": s.get("accel")}
    accels = sorted({str((x.get("target") or {}).get("accel") or x.get("accel")) for x in samples})
    mem, arch = fp.get("mem_total_kb"), t.get("arch") or fp.get("machine")
    where = " ".join(str(x) for x in (t.get("kind"), t.get("name")) if x)
    pg = str(fp.get("pg_version") or "?")
    return [
        f"  target: {where}{f' ({arch})' if arch else ''}, accelerator {', '.join(accels)}",
        f"  guest: {fp.get('nproc', '?')} CPUs, "
        f"{round(mem / 1024) if isinstance(mem, int) else '?'} MB, clocksource "
        f"{fp.get('clocksource', '?')}, THP {fp.get('thp', '?')}",
        f"  kernel {fp.get('uname_r', '?')}, preempt {fp.get('preempt', '?')}",
        f"  {pg if pg.startswith('PostgreSQL') else 'PostgreSQL ' + pg}",
    ]


def scenario_lines(settings: Mapping[str, Any], name: str, digest: str) -> list[str]:
    b = settings.get("pgbench") or {}
    pg = (settings.get("postgres") or {}).get("settings") or {}
    if not b:
        return para(f"{name} (sha256 {digest[:12]})", "  ")
    return para(
        f"{name} (sha256 {digest[:12]}): pgbench {b.get('builtin') or 'script'}, "
        f"-M {b.get('protocol')}, {b.get('clients')} clients, {b.get('threads')} threads, "
        f"scale {b.get('scale')}, {b.get('runs')} x {b.get('duration_s')} s after "
        f"{b.get('warmup_runs')} warm-up; shared_buffers {pg.get('shared_buffers')}, "
        f"huge_pages {pg.get('huge_pages')}",
        "  ",
    )


def _kernel(info: Mapping[str, Any]) -> str:
    k = info.get("kernel") or {}
    head = k.get("describe") or (k.get("commit") or "")[:12] or Path(str(k.get("image"))).name
    subject = f' ("{k["subject"]}")' if k.get("subject") else ""
    return f"{head}{subject}"


def compare_text(run: Any) -> str:
    """A compare run (kbisect.reportrun.Run) as a mailing-list text."""
    v, s = run.verdict, run.summary
    r, scen = v.ratio, s["scenario"]
    what = {"regression": "a regression", "improvement": "an improvement"}.get(v.kind)
    head = (
        f"kbisect noticed {what} of {change(r.ratio)} in pgbench tps ({scen['name']}): "
        f"B ({run.name('B')}) against A ({run.name('A')})."
        if what
        else f"kbisect found no significant change in pgbench tps ({scen['name']}) between "
        f"A ({run.name('A')}) and B ({run.name('B')})."
    )
    failed = {x: len(run.side(x)) - n for x, n in (("A", v.a.n), ("B", v.b.n))}
    lines = [
        *para(head),
        "",
        f"  B/A {r.ratio:.3f}x ({change(r.ratio)}), {r.confidence * 100:g}% CI "
        f"[{r.low:.3f}, {r.high:.3f}]",
        f"  A: {v.a.mean:.1f} tps, CV {v.a.cv * 100:.1f}%, {v.a.n} boots ({failed['A']} failed)",
        f"  B: {v.b.mean:.1f} tps, CV {v.b.cv * 100:.1f}%, {v.b.n} boots ({failed['B']} failed)",
        *para(
            f"changes under {run.min_effect * 100:g}% are not called; the interval is "
            f"{means.METHOD} (delta method on the log ratio, Welch df).",
            "  ",
        ),
        "",
        "kernels:",
    ]
    for side in ("A", "B"):
        info = s["sides"][side]
        extra = f", append {info['append']!r}" if info.get("append") else ""
        lines += para(f"{side}: {_kernel(info)}{extra}", "  ")
    lines += ["", "reproduce:", *command(s.get("command") or "(not recorded)"), ""]
    fps = {x: [b.get("fingerprint") or {} for b in run.side(x)] for x in ("A", "B")}
    lines += ["fingerprint differences (A, B):", *fingerprint_lines(fps, ("A", "B")), ""]
    lines += ["machine:", *machine(run.samples), ""]
    settings: Mapping[str, Any] = next((x["scenario"]["settings"] for x in run.samples), {})
    lines += ["scenario:", *scenario_lines(settings, scen["name"], scen.get("hash") or ""), ""]
    lines += ["tps per boot, in boot order (failed boots left out):"]
    for side in ("A", "B"):
        tps = [float(b["tps"]) for b in run.side(side) if b.get("status") == "ok"]
        lines += para(f"{side}: {numbers(tps)}", "  ")
    if v.warnings:
        lines += ["", "warnings:", *[x for w in v.warnings for x in para(f"- {w}", "  ", "  ")]]
    return fit(lines)


def _bisect_samples(run_dir: Path, commit: str | None) -> list[dict[str, Any]]:
    """A bisected revision's samples from the bisect store, when the run still has it: the
    store it recorded, else a `store/` beside it (an example copied with its samples)."""
    state = run_dir / "state.json"
    if commit is None or not state.is_file():
        return []
    store = Path(json.loads(state.read_text()).get("store") or "/nonexistent")
    if not store.is_dir():
        store = run_dir / "store"
    try:
        return results.load_samples(store / commit) if (store / commit).is_dir() else []
    except schema.InvalidResult:
        return []


def bisect_text(run_dir: Path, s: Mapping[str, Any]) -> str:
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
    elif rc:
        lines += ["", *para(f"re-check failed: {rc.get('error')}; not confirmed.", "  ")]
    lines += ["", "commit:"]
    lines += (
        [*para(f"{fb['commit']} {fb['subject']}", "  ")]
        if fb
        else [
            x
            for c in s.get("candidates") or []
            for x in para(f"{c['commit']} {c['subject']}", "  ")
        ]
    )
    lines += ["", "reproduce:", *command(s["command"]), ""]
    culprit, parent = (
        _bisect_samples(run_dir, rc.get("culprit")),
        _bisect_samples(run_dir, rc.get("parent")),
    )
    fps = {
        "parent": [x.get("fingerprint") or {} for x in parent],
        "culprit": [x.get("fingerprint") or {} for x in culprit],
    }
    lines += ["fingerprint differences (parent, culprit):"]
    lines += (
        fingerprint_lines(fps, ("parent", "culprit"))
        if culprit or parent
        else ["  (the bisect store with the samples is not with this report)"]
    )
    lines += ["", "machine:", *machine(culprit + parent), ""]
    how = (
        f"posterior method, P(first bad commit) {s['answer']['probability']:.4f} after the re-check"
        if s.get("method") == "posterior"
        else f"threshold {s['threshold']:.1f} tps ({s.get('threshold_source')})"
    )
    lines += [f"{how}; append {o['append']!r}; arch {o['arch']}", "", "revisions tested:"]
    for i, r in enumerate(s.get("revisions") or []):
        mean = f"{r['mean']:.1f}" if r.get("mean") is not None else "-"
        lines.append(f"  {i:>2} {r['commit'][:12]} {r['verdict']:<5} n={r['n']:<2} {mean:>8} tps")
    if rc.get("parent_tps"):
        lines += [
            "",
            "re-check tps per boot:",
            *para(f"parent: {numbers(rc['parent_tps'])}", "  "),
            *para(f"culprit: {numbers(rc['culprit_tps'])}", "  "),
        ]
    warned = [*rc.get("warnings", []), *((s.get("drift") or {}).get("warning") or "",)]
    if warned := [w for w in warned if w]:
        lines += ["", "warnings:", *[x for w in warned for x in para(f"- {w}", "  ", "  ")]]
    return fit(lines)
