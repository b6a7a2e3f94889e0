"""The reports' "Disturbed samples" section: which samples were taken while other work
used more than a set share of the host's CPUs (targets/monitor.py), how much it used, and
what became of it (retake.py): a disturbed sample never counts (kept on disk, left out
of every statistic) unless the run was asked to count it (`--count-disturbed`).
Compare, bisect and study reports all call `markdown`.

Inside every kernel the harness records its CPUs during the measured runs
(fingerprint `cpu_during_runs`); steal time above the share disturbs a sample wherever
it ran. On a machine target only that decides: the host columns are of the host that
drives it over ssh, recorded but not judged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kbisect.measure import results, retake
from kbisect.measure.record import Sample

Rows = list[dict[str, Any]] | None

HEAD = [
    "| sample | of | tps | others' peak | others' mean | load avg | what happened |",
    "|---|---|---:|---:|---:|---:|---|",
]


def counted(samples: Sequence[Sample]) -> list[Sample]:
    """The samples that count (or failed): every one but the disturbed ones that do not."""
    return [
        s
        for s in samples
        if s.status != retake.DISTURBED and not (s.ok and s.disturbed and not retake.counts(s))
    ]


def outcome(s: Sample) -> str:
    status = s.status
    inside = s.disturbance.get("inside") or {}
    why = f"{_pct(inside.get('steal_share'))} stolen inside; " if inside.get("disturbed") else ""
    if status == retake.DISTURBED and retake.left_out(s):
        return f"{why}not counted, no retakes left (kept on disk)"
    if status == retake.DISTURBED:
        return f"{why}retaken (kept on disk, not counted)"
    if status == "ok" and retake.counts(s):
        return f"{why}kept and counted, flagged (--count-disturbed)"
    if status == "ok":
        return f"{why}kept, not counted (a disturbed sample never counts)"
    return f"{why}{status} (not counted)"


def row(name: str, who: str, s: Sample) -> dict[str, Any] | None:
    """The report row of one sample, or None when it was not disturbed."""
    d = s.disturbance
    if not d.get("disturbed"):
        return None
    return {
        "sample": name,
        "of": who,
        "tps": s.tps,
        "others_peak": d.get("others_peak"),
        "others_share": d.get("others_share"),
        "threshold": d.get("threshold"),
        "loadavg": (d.get("loadavg") or [None])[0],
        "outcome": outcome(s),
    }


def _named(run_dir: Path, who: str | None) -> list[tuple[str, str, Sample]]:
    if not (run_dir / results.SAMPLES).is_dir():
        return []
    found = zip(results.sample_paths(run_dir), results.load_samples(run_dir), strict=True)
    return [(p.name, who or s.label or "-", s) for p, s in found]


def _rows(named: Iterable[tuple[str, str, Sample]]) -> Rows:
    """The rows of the disturbed ones; None when no sample was watched (an older run)."""
    named = list(named)
    if not any("disturbance" in s.data for _, _, s in named):
        return None
    return [r for r in (row(*n) for n in named) if r]


def rows(run_dir: Path) -> Rows:
    """The disturbed samples of a run, named by their sample file."""
    return _rows(_named(run_dir, None))


def of_samples(samples: Sequence[Sample]) -> Rows:
    """The disturbed samples among samples in boot order, named by their number."""
    return _rows((f"#{i}", s.label or "-", s) for i, s in enumerate(samples, 1))


def of_folders(folders: Iterable[tuple[Path, str]]) -> Rows:
    """The disturbed samples of sample folders, each named by its `who`."""
    return _rows(n for folder, who in folders for n in _named(folder, who))


def store_folders(store: Path, commits: Iterable[str]) -> list[tuple[Path, str]]:
    """A bisection's revisions' sample folders in its store, each named by its commit."""
    return [(store / c, c[:12]) for c in dict.fromkeys(commits)]


def of_store(store: Path, commits: Iterable[str]) -> Rows:
    """The disturbed samples of a bisection's revisions, each named by its commit."""
    return of_folders(store_folders(store, commits))


def _pct(x: object) -> str:
    return f"{float(x) * 100:.0f}%" if isinstance(x, int | float) else "—"


def markdown(found: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The section, header included, ending with a blank line; none for an older run."""
    if found is None:
        return []
    out = ["## Disturbed samples", ""]
    if not found:
        quiet = (
            "None: no sample was taken while other work used more than the set share of the "
            "host's CPUs (`--disturbed-share`)."
        )
        return [*out, quiet, ""]
    limit = _pct(found[0].get("threshold"))
    out += [
        f"Taken while other work used more than {limit} of the host's CPUs in some "
        "window. A disturbed sample is kept on disk and never counts: the run waits for "
        "a quiet host and retakes it; a slot whose retakes ran out is left out of the "
        "statistics (`--resume` takes it again). Only `--count-disturbed` counts one, "
        "flagged here.",
        "",
        *HEAD,
    ]
    for r in found:
        tps = f"{r['tps']:,.1f}" if isinstance(r.get("tps"), int | float) else "—"
        load = f"{r['loadavg']:.2f}" if isinstance(r.get("loadavg"), int | float) else "—"
        out.append(
            f"| {r['sample']} | {r['of']} | {tps} | {_pct(r.get('others_peak'))} "
            f"| {_pct(r.get('others_share'))} | {load} | {r['outcome']} |"
        )
    return [*out, ""]
