"""`kbisect diff RUN_A RUN_B`: two stored sets of samples of one scenario, compared with
compare's own statistics (ratio.verdict on the boots that count, compare/report.ok_tps),
rendered as text, markdown or JSON (`Diff`).

A set is named `DIR` (a `kbisect run`, or any folder with samples/), `DIR:A` or `DIR:B`
(one side of a compare) or `DIR:<commit>` (one revision of a bisection's store, a
prefix of its hash is enough). The two sets must be of one scenario (its hash); with
`force`, the scenario fields that differ are listed and the diff goes on.

Where a bisection keeps its store is the bisection's to say (bisect/state.py, a stage
above this one): the command passes it in as `StoreOf`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.compare import report as compare_report
from kbisect.compare import text as compare_text
from kbisect.compare.report import METHODS, SIDES
from kbisect.core.exceptions import UserError
from kbisect.measure import results
from kbisect.measure.record import Sample
from kbisect.report import disturbed
from kbisect.report.text import fingerprint_lines, fit, para, warning_lines
from kbisect.stats import means, ratio

StoreOf = Callable[[Path], Path | None]  # a bisection's run dir -> its store; None: no bisection


class BadSet(UserError):
    """A RUN argument that names no set of samples, or two sets that do not go together."""


@dataclass(frozen=True)
class Set:
    spec: str  # as given
    dir: Path  # the folder whose samples/ these are
    samples: list[Sample]  # those that count or failed, in boot order

    def hashes(self) -> set[str]:
        return {s.scenario_hash for s in self.samples}

    def settings(self) -> Mapping[str, Any]:
        return next((s.settings for s in self.samples), {})

    def scenario(self) -> str:
        return next((s.scenario for s in self.samples), "?")


def _kind(folder: Path, store_of: StoreOf) -> str | None:
    """compare, bisect, or None (a run or a bare folder of samples)."""
    if store_of(folder) is not None:
        return "bisect"
    if (folder / results.SUMMARY).is_file():
        kind = str(results.read_summary(folder).get("kind"))
        return "bisect" if kind.startswith("bisect") else kind
    return "compare" if (folder / "plan.json").is_file() else None


def _samples(folder: Path, spec: str) -> list[Sample]:
    if not results.sample_paths(folder):
        raise BadSet(f"{spec}: no samples in {folder}")
    kept, _copies = results.without_copies(folder)  # InvalidResult: exit 3
    return disturbed.counted(kept)


def _store_dir(run: Path, commit: str, spec: str, store_of: StoreOf) -> Path:
    store = store_of(run) or run / "store"
    if not store.is_dir() or not any(store.glob(f"{commit}*")):
        store = run / "store"  # an example copied with its store
    found = sorted(p for p in store.glob(f"{commit}*") if p.is_dir()) if store.is_dir() else []
    if len(found) != 1:
        what = "no revision" if not found else f"{len(found)} revisions"
        raise BadSet(f"{spec}: {what} of the bisect store {store} starts with {commit!r}")
    return found[0]


def resolve(spec: str, store_of: StoreOf) -> Set:
    """The samples `spec` names; BadSet, one line, if it names none."""
    folder, side = Path(spec), ""
    if not folder.is_dir() and ":" in spec:
        head, _, side = spec.rpartition(":")
        folder = Path(head)
    if not folder.is_dir():
        raise BadSet(f"{spec}: no such run directory")
    kind = _kind(folder, store_of)
    if kind == "compare":
        if side not in SIDES:
            raise BadSet(f"{spec}: a compare has two sides: pick one, {folder}:A or {folder}:B")
        chosen = [s for s in _samples(folder, spec) if s.label == side]
        if not chosen:
            raise BadSet(f"{spec}: side {side} has no samples")
        return Set(spec, folder, chosen)
    if kind == "bisect":
        if not side or any(c not in "0123456789abcdef" for c in side):
            raise BadSet(f"{spec}: a bisection holds one set per revision: pick one, DIR:<commit>")
        store = _store_dir(folder, side, spec, store_of)
        return Set(spec, store, _samples(store, spec))
    if side:
        raise BadSet(f"{spec}: {folder} is neither a compare nor a bisection: name it alone")
    return Set(spec, folder, _samples(folder, spec))


def setting_differences(a: Set, b: Set) -> list[str]:
    """`pgbench.clients: 16 -> 64` for every scenario setting that differs (but the
    prose `description`)."""
    fa, fb = _flat(a.settings()), _flat(b.settings())
    for flat in (fa, fb):
        flat.pop("description", None)
    return [
        f"{k}: {fa.get(k, '-')} -> {fb.get(k, '-')}"
        for k in sorted(set(fa) | set(fb))
        if fa.get(k) != fb.get(k)
    ]


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = str(v)
    return out


def check_scenarios(a: Set, b: Set, *, force: bool) -> list[str]:
    """[] when both sets ran one scenario; else BadSet, or with `force` the settings
    that differ."""
    if a.hashes() == b.hashes() and len(a.hashes()) == 1:
        return []
    if not force:
        raise BadSet(
            f"{a.spec} and {b.spec} ran different scenarios "
            f"({', '.join(sorted(h[:12] for h in a.hashes()))} vs "
            f"{', '.join(sorted(h[:12] for h in b.hashes()))}): --force compares them anyway"
        )
    return setting_differences(a, b) or ["the hashes differ, the recorded settings do not"]


def as_run(a: Set, b: Set, min_effect: float) -> compare_report.Run:
    """The two sets as a compare run (side A, side B), its verdict by compare's statistics."""
    samples = [
        s.with_(label=side) for side, x in zip(SIDES, (a, b), strict=True) for s in x.samples
    ]
    tps = [compare_report.ok_tps([s for s in samples if s.label == x]) for x in SIDES]
    try:
        v = ratio.verdict(*tps, min_effect=min_effect, settled_asks=False)
    except means.StatsError as exc:
        raise BadSet(f"{a.spec} vs {b.spec}: {exc}") from exc
    summary = {
        "kind": "diff",
        "scenario": {"name": a.scenario(), "hash": min(a.hashes())},
        "sides": {side: {"label": x.spec} for side, x in zip(SIDES, (a, b), strict=True)},
    }
    return compare_report.Run(b.dir, summary, samples, v, min_effect, v.ratio.confidence)


@dataclass(frozen=True)
class Diff:
    """Two sets compared, as its formats render it."""

    run: compare_report.Run
    sets: tuple[Set, Set]
    differs: list[str]  # the scenario settings that differ (with force)


def text(d: Diff) -> str:
    """72 columns, as the compare text report's head."""
    run = d.run
    lines = [*para(f"kbisect diff: {compare_text.head(run).removeprefix('kbisect ')}"), ""]
    lines += [*compare_text.figures(run), ""]
    if d.differs:
        lines += ["scenario settings that differ (A -> B), compared anyway (--force):"]
        lines += [line for x in d.differs for line in para(x, "  ", "  ")] + [""]
    fps = {x: [s.fingerprint for s in run.side(x)] for x in SIDES}
    lines += ["fingerprint differences (A, B):", *fingerprint_lines(fps, ("A", "B"))]
    return fit([*lines, *warning_lines(run.verdict.warnings)])


def markdown(d: Diff) -> str:
    run, v, r = d.run, d.run.verdict, d.run.verdict.ratio
    out = [
        f"# kbisect diff: {run.name('A')} vs {run.name('B')}",
        "",
        f"**{v.kind}**: B/A = {r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}] "
        f"({r.confidence * 100:g}% CI, {METHODS.get(r.method, r.method)}), "
        f"scenario `{run.summary['scenario']['name']}`",
        "",
        "| side | run | n | mean tps | CV |",
        "|---|---|---:|---:|---:|",
    ]
    for side, s in zip(SIDES, (v.a, v.b), strict=True):
        out.append(f"| {side} | `{run.name(side)}` | {s.n} | {s.mean:.1f} | {s.cv * 100:.1f}% |")
    if d.differs:
        out += ["", "Scenario settings that differ (compared anyway, `--force`):", ""]
        out += [f"- `{x}`" for x in d.differs]
    if v.warnings:
        out += ["", "Warnings:", "", *(f"- {w}" for w in v.warnings)]
    return "\n".join(out) + "\n"


def as_json(d: Diff) -> str:
    a, b = ({"spec": x.spec, "dir": str(x.dir), "samples": len(x.samples)} for x in d.sets)
    out = {"kind": "diff", "a": a, "b": b, "scenario": d.run.summary["scenario"]}
    out |= {"scenario_differences": d.differs, "verdict": d.run.verdict.as_dict()}
    return json.dumps({**out, "min_effect": d.run.min_effect}, indent=2, sort_keys=True) + "\n"
