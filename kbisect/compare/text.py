"""A compare run as a mailing-list text (`kbisect report RUN_DIR --format text`), with the
72-column helpers of kbisect/report/text.py: the finding first, then the kernels, the
command that reproduces it, the fingerprint differences, the machine, the scenario and
the tps of every boot."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.compare import machines, revert
from kbisect.compare.report import METHODS, SIDES, Run, preempt_lines, stopped
from kbisect.report import build, patches, profile, servers
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
from kbisect.stats import means


def _scenario(settings: Mapping[str, Any], name: str, digest: str) -> list[str]:
    b = settings.get("pgbench") or {}
    pg = (settings.get("postgres") or {}).get("settings") or {}
    if not b:
        return para(f"{name} (sha256 {digest[:12]})", "  ")
    return para(
        f"{name} (sha256 {digest[:12]}): pgbench {b.get('builtin') or 'script'}, "
        f"-M {b.get('protocol')}, {b.get('clients')} clients, {b.get('threads')} threads, "
        f"scale {b.get('scale')}, {b.get('runs')} x {b.get('duration_s')} s after "
        f"{b.get('warmup_runs')}{_warmup(b)} warm-up; shared_buffers {pg.get('shared_buffers')}, "
        f"huge_pages {pg.get('huge_pages')}",
        "  ",
    )


def _warmup(bench: Mapping[str, Any]) -> str:
    """A warm-up's own length, when it differs from a measured run's."""
    return f" x {bench['warmup_s']} s" if bench.get("warmup_s") else ""


def _kernel(info: Mapping[str, Any]) -> str:
    k = info.get("kernel") or {}
    head = k.get("describe") or (k.get("commit") or "")[:12] or Path(str(k.get("image"))).name
    subject = f' ("{k["subject"]}")' if k.get("subject") else ""
    return f"{head}{subject}"


def head(run: Run) -> str:
    """The finding in one sentence, in a maintainer's words (revert.said)."""
    s = run.summary
    did = (
        "checked a revert"
        if revert.of(s)
        else "checked a patch"
        if revert.patches(s)
        else f"compared B ({run.name('B')}) with A ({run.name('A')})"
    )
    return (
        f"kbisect {did} in pgbench tps ({s['scenario']['name']}): "
        f"{revert.said(s, run.verdict, full=True)}."
    )


def figures(run: Run) -> list[str]:
    """B/A with its interval, each side's mean, CV and n."""
    v, r = run.verdict, run.verdict.ratio
    each = [
        f"  {x}: {s.mean:.1f} tps, CV {s.cv * 100:.1f}%, {s.n} boots "
        f"({len(run.side(x)) - s.n} failed)"
        for x, s in zip(SIDES, (v.a, v.b), strict=True)
    ]
    return [
        f"  B/A {r.ratio:.3f}x ({change(r.ratio)}), {r.confidence * 100:g}% CI "
        f"[{r.low:.3f}, {r.high:.3f}]",
        *(para(how, "  ", "  ") if (how := stopped(run.summary)) else []),
        *(per_side(run) or each),
        *para(
            f"changes under {run.min_effect * 100:g}% are not called; the interval is "
            f"{r.method} ({METHODS.get(r.method, r.method)}).",
            "  ",
        ),
        *per_machine(run),
    ]


def per_side(run: Run) -> list[str]:
    """Over a pool, each side's mean and CV per machine (none on one machine)."""
    lines = []
    for side in SIDES:
        for part in machines.parts(run.samples, side):
            s = means.summarize(part.tps) if part.tps else None
            figures = f"{s.mean:.1f} tps, CV {s.cv * 100:.1f}%, " if s else ""
            lines.append(
                f"  {side} on {part.machine}: {figures}{len(part.tps)} boots ({part.failed} failed)"
            )
    return lines


def per_machine(run: Run) -> list[str]:
    """Each machine's means and B/A, when a pool's machines took the boots."""
    found = machines.lines(run.samples)
    if not found:
        return []
    return ["  per machine (mean tps, boots that count):", *(f"    {x}" for x in found)]


def kernels(run: Run) -> list[str]:
    lines = []
    for side in SIDES:
        info = run.summary["sides"][side]
        extra = f", append {info['append']!r}" if info.get("append") else ""
        lines += para(f"{side}: {_kernel(info)}{extra}", "  ", "  ")
        if own := (info.get("kernel") or {}).get("patches"):
            lines += para(f"with patches: {patches.line(own)}", "     ")
    return lines


def scenario(run: Run) -> list[str]:
    scen = run.summary["scenario"]
    settings: Mapping[str, Any] = next((x.settings for x in run.samples), {})
    return _scenario(settings, scen["name"], scen.get("hash") or "")


def render(run: Run) -> str:
    """The whole text, at most 72 columns a line."""
    s, v = run.summary, run.verdict
    lines = [*para(head(run)), "", *figures(run), "", "kernels:", *kernels(run)]
    lines += ["", "reproduce:", *command(s.get("command") or "(not recorded)"), ""]
    fps = {x: [b.fingerprint for b in run.side(x)] for x in SIDES}
    lines += ["fingerprint differences (A, B):", *fingerprint_lines(fps, ("A", "B")), ""]
    lines += ["machine:", *machine(run.samples), ""]
    lines += ["build:", *build.lines({x: run.side(x) for x in SIDES}), ""]
    if ran := servers.text_lines({x: run.side(x) for x in SIDES}):
        lines += ["PostgreSQL:", *ran, ""]
    lines += ["scenario:", *scenario(run), ""]
    lines += ["tps per boot, in boot order (failed boots left out):"]
    for side in SIDES:
        tps = [b.tps for b in run.side(side) if b.ok and b.tps is not None]
        lines += para(f"{side}: {numbers(tps)}", "  ")
    if profiles := profile.text({x: run.side(x) for x in SIDES}, run_dir=run.dir):
        lines += ["", *profiles]
    return fit([*lines, *warning_lines([*preempt_lines(run), *v.warnings])])
