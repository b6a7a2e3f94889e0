"""A study as a mailing-list text (at most 72 columns, kbisect/report/text.py's helpers):
the steps first, each with its interval, sample counts, bisect line and fingerprint
differences; then interactions, the figures per cell, the command, the machines."""

from __future__ import annotations

from kbisect.report import text as tr
from kbisect.study import analysis, store
from kbisect.study.analysis import Analysis


def _steps(a: Analysis) -> list[str]:
    out: list[str] = []
    for s in a.significant():
        out += ["", *tr.para(a.sentence(s), "  ")]
        if s.bisect:
            out += ["", "  bisect:", *tr.command(s.bisect, "    ")]
        elif s.elsewhere:
            out += ["", *tr.para(f"not bisectable here: {a.apart(s)}:", "  ")]
            out += tr.command(s.elsewhere, "    ")
        else:
            out += ["", "  not bisectable: a side is a prebuilt image, not a revision"]
        out += ["  fingerprint differences:" if s.differences else "  fingerprints: no difference"]
        out += [x for diff in s.differences for x in tr.para(f"- {diff}", "    ", "  ")]
    return out


def _interactions(a: Analysis) -> list[str]:
    out: list[str] = []
    for i in a.interactions:
        fixed = " ".join(f"{n.rsplit('.', 1)[-1]}={v}" for n, v in i.fixed)
        depends = "depends" if i.low > 1 or i.high < 1 else "does not depend"
        out += [
            "",
            *tr.para(
                f"{a.kernel(i.kernel)}{' ' + fixed if fixed else ''}: the effect of {i.x} "
                f"({i.x_levels[1]} vs {i.x_levels[0]}) is {i.effect_y1:.3f}x at {i.y}="
                f"{i.y_levels[0]} and {i.effect_y2:.3f}x at {i.y}={i.y_levels[1]}; ratio of "
                f"ratios {i.ratio:.3f} [{i.low:.3f}, {i.high:.3f}]: it {depends} on {i.y}.",
                "  ",
            ),
        ]
    return out


def _table(a: Analysis) -> list[str]:
    out: list[str] = []
    width = max(len(a.kernel(k)) for k in range(len(a.definition["kernels"])))
    width = min(width, 28)
    for c in range(len(a.definition["cells"])):
        out += ["", *tr.para(f"{a.definition['cells'][c]['id']} {a.cell(c)}:", "  ")]
        for k in range(len(a.definition["kernels"])):
            p = a.points[(k, c)]
            ci = p.ci
            mean = f"{ci[0]:9.1f} [{ci[1]:.1f}, {ci[2]:.1f}]" if ci else f"{'-':>9}"
            r = a.vs_baseline.get((k, c))
            ratio = "  base" if k == a.baseline else (f"{r.ratio:6.3f}" if r else "     -")
            out.append(f"    {a.kernel(k)[:width]:<{width}} {mean} n={p.n} {ratio}")
    return out


def _per_machine(a: Analysis) -> list[str]:
    """A pool's machines: each one's boots, and per kernel and cell its ratio to the
    baseline on that machine alone (boots of the baseline + the kernel)."""
    found = analysis.per_machine(a)
    if not found:
        return []
    boots = ", ".join(f"{m.machine} {m.boots}" for m in found)
    out = [
        "",
        *tr.para(
            "the ratios and steps are within machines (log tps with the machine as a "
            f"fixed effect); boots per machine: {boots}; each machine alone (ratio to "
            "the baseline, boots of the baseline + the kernel):",
        ),
    ]
    for k, c in sorted(a.vs_baseline, key=lambda u: (u[1], u[0])):
        each = "; ".join(f"{m.machine} {m.shown((k, c), '-')}" for m in found)
        out += tr.para(f"{a.definition['cells'][c]['id']} {a.kernel(k)}: {each}", "  ", "    ")
    return out


def _trees(a: Analysis) -> list[str]:
    """Each kernel's tree and revision, when the study's kernels are in several trees."""
    if not store.several_trees(a.definition):
        return []
    out = ["", "kernels (tree at revision, commit):"]
    for k, kernel in enumerate(a.definition["kernels"]):
        commit = (kernel.get("commit") or "")[:12]
        out += tr.para(f"{a.kernel(k)}: {a.where(k)} {commit}".rstrip(), "  ", "  ")
    return out


def _machines(a: Analysis) -> list[str]:
    return [
        line
        for m, cells in a.machines_run()
        for line in tr.para(
            f"{m.get('cpu_model')}, {m.get('cores')} cores, target {m.get('target')} "
            f"({m.get('arch')}, accelerator {m.get('accel')}): {cells}",
            "  ",
        )
    ]


def render(a: Analysis) -> str:
    d = a.definition
    n = len(a.significant())
    kernels, cells = len(d["kernels"]), len(d["cells"])
    head = (
        f"kbisect study {d['name']}: {n or 'no'} significant step{'s' if n != 1 else ''} "
        f"in pgbench tps ({d['scenario']['name']}; {kernels} kernels x {cells} cells, "
        f"{d['boots']} boots each; Holm-corrected over {a.tests} consecutive-kernel "
        f"comparisons, steps under {float(d.get('min_effect', 0.02)) * 100:g}% not "
        "called)."
    )
    lines = [*tr.para(head), *_steps(a)]
    if a.interactions:
        lines += ["", "interactions (ratio of ratios, 95% CI):", *_interactions(a)]
    lines += ["", "tps per kernel and cell (mean [95% CI], good boots, ratio to", "the baseline):"]
    lines += [*_table(a), *_per_machine(a), *_trees(a)]
    lines += ["", "reproduce:", *tr.command(d.get("command") or "kbisect study"), ""]
    lines += ["machine:", *_machines(a), ""]
    if a.servers:
        lines += ["PostgreSQL each cell ran:", *a.servers, ""]
    lines += [
        "scenario:",
        *tr.para(
            f"{d['scenario']['name']} (sha256 "
            f"{d['scenario']['hash'][:12]}), overrides per cell as listed; seed "
            f"{d.get('seed')}",
            "  ",
        ),
    ]
    return tr.fit([*lines, *tr.warning_lines(a.warnings)])
