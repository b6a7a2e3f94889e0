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
from kbisect.measure.record import Sample
from kbisect.report import phases

WIDTH = 72
TEXT = "report.txt"


def change(ratio: float) -> str:
    """0.877 -> `-12.3%`."""
    return f"{(ratio - 1) * 100:+.1f}%"


def para(text: str, indent: str = "", hang: str = "") -> list[str]:
    """`text` wrapped at WIDTH; continuation lines indented by `indent` + `hang`."""
    lines = textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + hang,
        break_on_hyphens=False,
        break_long_words=False,  # a word longer than a line is fit()'s to break
    )
    return lines or [""]


def command(cmd: str, indent: str = "  ") -> list[str]:
    """A shell command wrapped at WIDTH with ` \\` continuations, split between words; a
    word too long for a line of its own is split with a `\\` at the end of the line and
    goes on at column 0 (the shell joins the two halves back into one word; a quoted one
    is left to fit())."""
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
        while len(current) > WIDTH and "'" not in word:  # a word longer than a line
            cut = _cut(current)
            lines.append(current[:cut] + "\\")
            current = current[cut:]
    return [*lines, current]


def _cut(line: str) -> int:
    """Where to split a line over WIDTH inside its last word: after its last `/`, `,`, `=`
    or `-` that leaves room for the `\\`, else at WIDTH - 1."""
    limit = WIDTH - 1
    start = len(line) - len(line.lstrip())
    best = max(line.rfind(c, start + 1, limit) for c in "/,=-")
    return best + 1 if best > start else limit


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


def target_line(samples: Sequence[Sample]) -> str:
    """`vng (x86_64), accelerator tcg`, `ssh emu (x86_64)`: the target's kind, its name
    when that is not the kind again, the arch, the accelerator only when one is known."""
    s = samples[0]
    fp = first_fingerprint(samples)
    t = s.target
    arch = t.get("arch") or fp.get("machine")
    names = [str(t.get("kind") or ""), str(t.get("name") or "")]
    where = " ".join(dict.fromkeys(x for x in names if x)) or "?"
    accels = sorted({str(a) for x in samples if (a := x.target.get("accel"))})
    accel = f", accelerator {', '.join(accels)}" if accels else ""
    return f"{where}{f' ({arch})' if arch else ''}{accel}"


def host_line(samples: Sequence[Sample]) -> list[str]:
    """The real machine under a vng guest (`target.vm_host`, targets/vng/host.py), one line
    per distinct host; none for samples that do not record it."""
    hosts = [h for x in samples if (h := x.target.get("vm_host"))]
    lines = []
    for h in hosts:
        mem = f"{h['memory_mb'] // 1024} GiB" if isinstance(h.get("memory_mb"), int) else None
        parts = [h.get("cpu_model"), h.get("cpus") and f"{h['cpus']} CPUs", mem]
        parts += [h.get("kernel") and f"Linux {h['kernel']}", h.get("qemu")]
        lines.append(", ".join(str(p) for p in parts if p))
    return list(dict.fromkeys(lines))


def first_fingerprint(samples: Sequence[Sample]) -> Mapping[str, Any]:
    return next((x.fingerprint for x in samples if x.fingerprint), {})


def cpu_line(fp: Mapping[str, Any]) -> str:
    """`QEMU TCG CPU version 2.5+, 2 cores, 2 threads`: what the guest's kernel saw."""
    parts = [str(fp.get("cpu_model") or "CPU model unknown")]
    parts.append(f"{fp.get('cpu_cores') or '?'} cores, {fp.get('cpu_threads') or '?'} threads")
    if fp.get("nproc") and fp.get("nproc") != fp.get("cpu_threads"):
        parts.append(f"{fp['nproc']} online")
    return ", ".join(parts)


def memory_line(fp: Mapping[str, Any]) -> str:
    """`1996 MB, NUMA nodes 1` (`unknown` when the guest did not say)."""
    mem = fp.get("mem_total_kb")
    size = f"{round(mem / 1024)} MB" if isinstance(mem, int) else "size unknown"
    return f"{size}, NUMA nodes {fp.get('numa_nodes') or 'unknown'}"


def machine(samples: Sequence[Sample]) -> list[str]:
    """Where the boots ran: target, accelerator, CPU, memory and NUMA, kernel, PostgreSQL."""
    if not samples:
        return ["  (no samples with this report)"]
    fp = first_fingerprint(samples)
    pg = str(fp.get("pg_version") or "?")
    return [
        *para(f"target: {target_line(samples)}", "  ", "  "),
        *[x for h in host_line(samples) for x in para(f"host: {h}", "  ", "  ")],
        *para(f"cpu: {cpu_line(fp)}", "  ", "  "),
        f"  memory: {memory_line(fp)}",
        f"  clocksource {fp.get('clocksource', '?')}, THP {fp.get('thp', '?')}",
        f"  kernel {fp.get('uname_r', '?')}, preempt {fp.get('preempt', '?')}",
        *para(pg if pg.startswith("PostgreSQL") else "PostgreSQL " + pg, "  ", "  "),
        *(para(f"time per boot: {spent}", "  ", "  ") if (spent := phases.line(samples)) else []),
    ]


def warning_lines(warnings: Sequence[str]) -> list[str]:
    """A report's closing `warnings:` paragraph, a bullet each; none without warnings."""
    if not warnings:
        return []
    return ["", "warnings:", *[x for w in warnings for x in para(f"- {w}", "  ", "  ")]]
