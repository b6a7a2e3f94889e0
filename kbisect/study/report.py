"""The study report: summary.json, report.md, report.txt and the figures, recomputed
from the stored samples every time (`kbisect report RUN_DIR` re-renders them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbisect.core import atomic, clock, progress
from kbisect.measure import results
from kbisect.report import disturbed, patches
from kbisect.report.formats import reproduce, section
from kbisect.report.text import TEXT
from kbisect.stats import means
from kbisect.study import analysis, figures, store, text
from kbisect.study.analysis import Analysis

REPORT = "report.md"
POOLED = (
    " Over this pool's machines each test, interval and ratio of ratios is Student's t "
    "on a least-squares fit of log tps with the machine as a fixed effect (residual df) "
    "instead: see Per machine."
)
WITHIN = (
    "The ratios and steps above are within machines: each is fitted on log tps with the "
    "machine as a fixed effect (stats/blocked.py), so a machine faster than the others "
    "moves its own level, never a kernel's effect."
)


def _mean(a: Analysis, k: int, c: int) -> str:
    p = a.points[(k, c)]
    if (ci := p.ci) is None:
        return f"{p.tps[0]:,.1f} (n=1)" if p.n else "—"
    return f"{ci[0]:,.1f} [{ci[1]:,.1f}, {ci[2]:,.1f}] n={p.n}"


def _ratio(a: Analysis, k: int, c: int) -> str:
    if k == a.baseline:
        return "1 (baseline)"
    r = a.vs_baseline.get((k, c))
    return "—" if r is None else f"{r.ratio:.3f} [{r.low:.3f}, {r.high:.3f}]"


def _grid(a: Analysis, cell_fn: Any) -> list[str]:
    cells = range(len(a.definition["cells"]))
    out = [
        "| kernel | " + " | ".join(a.cell(c) for c in cells) + " |",
        "|---|" + "---:|" * len(cells),
    ]
    for k in range(len(a.definition["kernels"])):
        out.append(f"| {a.kernel(k)} | " + " | ".join(cell_fn(a, k, c) for c in cells) + " |")
    return out


def _findings(a: Analysis) -> list[str]:
    found = a.significant()
    if not found:
        return [
            f"No significant step between consecutive kernels in any cell "
            f"({a.tests} comparisons, Holm-corrected).",
            "",
        ]
    out = []
    for s in found:
        out += [f"- **{a.sentence(s)}**"]
        out += [f"  - fingerprint differences: {'; '.join(s.differences) or 'none'}"]
        if s.bisect:
            out += [f"  - bisect it: `{s.bisect}`"]
        elif s.elsewhere:
            out += [f"  - not bisectable here: {a.apart(s)} `{s.elsewhere}`"]
        else:
            out += ["  - not bisectable: a side is a prebuilt image, not a revision"]
    return [*out, ""]


def _interactions(a: Analysis) -> list[str]:
    if not a.interactions:
        return ["None: no two axes with two levels each.", ""]
    out = [
        "| kernel | effect of | at | ratio at first | ratio at second | ratio of ratios "
        "[95% CI] | depends? |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for i in a.interactions:
        fixed = " ".join(f"{n.rsplit('.', 1)[-1]}={v}" for n, v in i.fixed)
        depends = "**yes**" if i.low > 1 or i.high < 1 else "no"
        out.append(
            f"| {a.kernel(i.kernel)} | {i.x}: {i.x_levels[1]} vs {i.x_levels[0]} | "
            f"{i.y}: {i.y_levels[0]}, {i.y_levels[1]} {fixed} | {i.effect_y1:.3f} | "
            f"{i.effect_y2:.3f} | {i.ratio:.3f} [{i.low:.3f}, {i.high:.3f}] | {depends} |"
        )
    return [*out, ""]


def _steps_table(a: Analysis) -> list[str]:
    out = [
        "| cell | from | to | ratio | 95% CI | p | Holm p | verdict |",
        "|---|---|---|---:|---|---:|---:|---|",
    ]
    for s in a.steps:
        r = s.ratio
        out.append(
            f"| {a.cell(s.cell)} | {a.kernel(s.a)} | {a.kernel(s.b)} | {r.ratio:.3f} | "
            f"[{r.low:.3f}, {r.high:.3f}] | {s.p:.3g} | {s.p_holm:.3g} | {s.kind} |"
        )
    return out


def _per_machine(a: Analysis) -> list[str]:
    """A pool's machines: each one's ratio to the baseline per kernel and cell on that
    machine alone (boots of the baseline + the kernel), and its boots (none for one)."""
    found = analysis.per_machine(a)
    if not found:
        return []
    out = [
        "## Per machine",
        "",
        f"{WITHIN} Each machine alone (ratio to the baseline, boots of the baseline + the kernel):",
        "",
        "| cell | kernel | " + " | ".join(m.machine for m in found) + " | within machines |",
        "|---|---|" + "---:|" * (len(found) + 1),
    ]
    for (k, c), r in sorted(a.vs_baseline.items(), key=lambda kr: (kr[0][1], kr[0][0])):
        ratios = " | ".join(m.shown((k, c), "—") for m in found)
        out.append(f"| {a.cell(c)} | {a.kernel(k)} | {ratios} | {r.ratio:.3f} |")
    out.append("| boots | | " + " | ".join(str(m.boots) for m in found) + " | |")
    return [*out, ""]


def _kernels(a: Analysis) -> list[str]:
    """The kernels table; with a tree column when the revisions are in several trees."""
    d = dict(a.definition)
    several = store.several_trees(d)
    out = [
        f"| # | kernel | {'tree | ' * several}commit | subject / image |",
        f"|---:|---|{'---|' * several}---|---|",
    ]
    for i, k in enumerate(d["kernels"]):
        base = " (baseline)" if i == a.baseline else ""
        out.append(
            f"| {i} | `{k['label']}`{base} | {f'{a.where(i)} | ' if several else ''}"
            f"{(k.get('commit') or '—')[:12]} | "
            f"{(k.get('subject') or k.get('image') or '').replace('|', '/')} |"
        )
    return [*out, *_patches(a)]


def _patches(a: Analysis) -> list[str]:
    """The patches of the kernels that carry some, one line each under the table."""
    lines = [
        f"- `{k['label']}`: {patches.line(k['patches'])}"
        for k in a.definition["kernels"]
        if k.get("patches")
    ]
    return ["", "Patches, applied in order on the revision:", "", *lines] if lines else []


def _cells(a: Analysis) -> list[str]:
    out = ["| cell | label | scenario overrides | kernel command line |", "|---|---|---|---|"]
    for c in a.definition["cells"]:
        sets = " ".join([*a.definition["sets"], *c["set"]]) or "—"
        append = " ".join(filter(None, [a.definition["append"], c["append"]])) or "—"
        out.append(f"| {c['id']} | {c['label']} | `{sets}` | `{append}` |")
    return out


def _machines(a: Analysis) -> list[str]:
    return [
        f"- {m.get('hostname', '?')}: {m.get('cpu_model')}, {m.get('cores')} cores, "
        f"target {m.get('target')} ({m.get('arch')}, {m.get('accel')}): {cells}"
        for m, cells in a.machines_run()
    ]


def markdown(a: Analysis, pictures: list[str]) -> str:
    d = a.definition
    n = len(a.significant())
    lines = [
        f"# Study {d['name']}: {n or 'no'} significant step{'s' if n != 1 else ''}",
        "",
        *reproduce(d.get("command") or ""),
        d.get("description") or "",
        "",
        "## Steps between consecutive kernels",
        "",
        *_findings(a),
        f"Method: each consecutive pair of kernels in each cell is a Welch t test on the log "
        f"ratio of means; the family is all {a.tests} such comparisons, corrected with "
        f"Holm's step-down method at {analysis.ALPHA:g}; a step is called when its Holm "
        f"p is below {analysis.ALPHA:g} and it changes tps by at least "
        f"{float(d.get('min_effect', 0.02)) * 100:g}%. Intervals are per-comparison 95%."
        + (POOLED if a.pooled else ""),
        "",
        "## Interactions",
        "",
        *_interactions(a),
        *section("tps per kernel and cell (mean, 95% CI, good boots)", _grid(a, _mean)),
        *section(f"Ratio to the baseline ({a.kernel(a.baseline)})", _grid(a, _ratio)),
        *_per_machine(a),
        *section("Figures", pictures),
        *section("Every step", _steps_table(a)),
        *disturbed.markdown(a.disturbed),
        *section("Warnings", [f"- {w}" for w in a.warnings] or ["None."]),
        *section("Kernels", _kernels(a)),
        *section("Cells", _cells(a)),
        *section("Machines", _machines(a)),
        *(["## PostgreSQL each cell ran", "", *a.servers, ""] if a.servers else []),
        f"Scenario `{d['scenario']['name']}` (hash `{d['scenario']['hash']}`), {d['boots']} "
        f"boots per kernel and cell in randomized complete blocks (seed {d.get('seed')}).",
        "",
    ]
    return "\n".join(lines)


def summary(a: Analysis) -> dict[str, Any]:
    d = a.definition
    n = len(a.significant())
    pts = [
        {"kernel": k, "cell": c, "n": p.n, "failed": p.failed, "tps": list(p.tps)}
        for (k, c), p in sorted(a.points.items())
    ]
    steps = [
        {
            "cell": s.cell,
            "a": s.a,
            "b": s.b,
            "ratio": s.ratio.as_dict(),
            "p": s.p,
            "p_holm": s.p_holm,
            "kind": s.kind,
            "bisect": s.bisect,
            **({"elsewhere": s.elsewhere} if s.elsewhere else {}),
        }
        for s in a.steps
    ]
    on = [
        {
            "machine": m.machine,
            "boots": m.boots,
            "ratios": [
                {"kernel": k, "cell": c, "ratio": r, "boots_baseline": nb, "boots": n}
                for (k, c), (r, nb, n) in sorted(m.ratios.items())
            ],
        }
        for m in analysis.per_machine(a)
    ]
    return {
        "version": 1,
        "kind": "study",
        "created": clock.utc_now(),
        "command": d.get("command") or "kbisect study",
        "name": d["name"],
        "scenario": {"name": d["scenario"]["name"], "hash": d["scenario"]["hash"]},
        "sides": {},
        "stats": {
            "points": pts,
            "steps": steps,
            "tests": a.tests,
            **({"machines": on} if on else {}),
        },
        "verdict": {
            "kind": "steps" if n else means.NO_DIFFERENCE,
            "result": f"{n} significant step(s) in {a.tests} comparisons (Holm)",
            "warnings": a.warnings,
        },
    }


def load(run_dir: Path) -> Analysis:
    return analysis.analyze(store.load_definition(run_dir), store.samples(run_dir))


def write(run_dir: Path) -> Path:
    """summary.json, report.md, report.txt and the PNGs; the report's path."""
    a = load(run_dir)
    try:
        pictures = figures.draw(a, run_dir)
    except ImportError as exc:
        progress.warn(f"no figures ({exc}): install matplotlib (scripts/setup)")
        pictures = [f"No figures: {exc}."]
    results.write_summary(run_dir, summary(a))
    atomic.write_text(run_dir / TEXT, text.render(a))
    atomic.write_text(run_dir / REPORT, markdown(a, pictures))
    return run_dir / REPORT


def print_findings(a: Analysis) -> None:
    for s in a.significant():
        print(a.sentence(s))
        if s.bisect:
            print(f"  {s.bisect}")
        elif s.elsewhere:
            print(f"  not bisectable here: {a.apart(s)}:\n  {s.elsewhere}")
    if not a.significant():
        print(f"no significant step ({a.tests} comparisons, Holm-corrected)")
