"""Plain-text reports for a mailing list (`kbisect report RUN_DIR --format text`).

At most 72 columns, no Markdown, in the order the kernel test robot and maintainers
post performance regressions on LKML: the finding first (what changed, by how much,
its interval and sample counts), then the commit, the command that reproduces it, the
fingerprint differences, the machine and the scenario, then the per-boot figures.
These are the helpers every text report shares; kbisect/compare/text.py,
kbisect/bisect/report/text.py and kbisect/study/text.py write the texts.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kbisect.measure import fingerprint

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


def warning_lines(warnings: Sequence[str]) -> list[str]:
    """A report's closing `warnings:` paragraph, a bullet each; none without warnings."""
    if not warnings:
        return []
    return ["", "warnings:", *[x for w in warnings for x in para(f"- {w}", "  ", "  ")]]
