"""Where `kbisect history` gets its samples: one record per sample (`Obs`), with the fields
the sample index has. Without run dirs, `collect` asks the results database
(kbisect/db/, `results/kbisect.sqlite`) for the scenario's samples wherever their runs
were written, and reads each sample file it names; run dirs given are read directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbisect.core import paths, progress
from kbisect.core.exceptions import UserError
from kbisect.db import index, query
from kbisect.measure import results
from kbisect.measure.record import Sample
from kbisect.source import rc


class NoSamples(UserError):
    """No run dir, or no samples, where the user pointed."""


@dataclass(frozen=True)
class Obs:
    """One sample as the history sees it."""

    path: str
    tps: float | None
    status: str
    disturbed: bool
    kernel_tag: str  # the build's `describe` (v7.0-rc3), else the commit's first 12 digits
    kernel_commit: str
    scenario_name: str
    scenario_hash: str
    machine: str  # the target's name
    started: str  # the sample's `created`, UTC ISO 8601
    run_id: str  # the run dir's name
    label: str
    append: str = ""
    settings: dict[str, Any] = field(default_factory=dict, compare=False)


def machine_name(target: Mapping[str, Any]) -> str:
    """The target's name, and for a vng guest the host under it when the sample records
    it (`vng@AMD EPYC/2`): two hosts are two machines (targets/vng/host.py)."""
    name = str(target.get("name") or "")
    host = target.get("vm_host") or {}
    if isinstance(host, dict) and host.get("cpu_model"):
        return f"{name}@{host['cpu_model']}/{host.get('cpus') or '?'}"
    return name


def from_sample(sample: Sample, path: str = "", run_id: str = "") -> Obs:
    commit = sample.commit or ""
    return Obs(
        path=path,
        tps=sample.tps,
        status=sample.status,
        disturbed=sample.disturbed,
        kernel_tag=str(sample.manifest.get("describe") or commit[:12]),
        kernel_commit=commit,
        scenario_name=sample.scenario,
        scenario_hash=sample.scenario_hash,
        machine=machine_name(sample.target),
        started=sample.created,
        run_id=run_id,
        label=sample.label or "",
        append=sample.append,
        settings=dict(sample.settings),
    )


def run_dirs(given: Iterable[Path]) -> list[Path]:
    """The run dirs among `given` (a dir with samples/) and directly inside each."""
    found: list[Path] = []
    for d in given:
        if not d.is_dir():
            raise NoSamples(f"{d}: no such directory")
        if (d / results.SAMPLES).is_dir():
            found.append(d)
        else:
            found += sorted(p for p in d.iterdir() if (p / results.SAMPLES).is_dir())
    return found


def indexed(db: Path, scenario: str | None = None) -> Iterator[Obs]:
    """The samples the results database indexes (of `scenario` when given); a sample file
    that is gone since it was indexed is left out and counted in one warning line."""
    gone, damaged = 0, []
    for row in query.rows(db, scenario=scenario):
        path = Path(row.path)
        if not path.is_file():
            gone += 1
            continue
        try:
            sample = results.load_sample(path)
        except results.InvalidResult as exc:
            damaged.append(str(exc))
            continue
        yield from_sample(sample, row.path, Path(row.run_id).name)
    if gone:
        progress.warn(
            f"{gone} indexed samples are gone from disk and left out; "
            "`kbisect db rebuild` forgets them"
        )
    if damaged:
        progress.warn(f"{len(damaged)} indexed samples cannot be read, left out: {damaged[0]}")


def collect(dirs: Iterable[Path] = (), scenario: str | None = None) -> Iterator[Obs]:
    """Every sample of the run dirs in `dirs`; without dirs, those the results database
    indexes (of `scenario` when given), else every run dir in the results dir."""
    given = list(dirs)
    if not given and (db := index.db_path()).is_file():
        yield from indexed(db, scenario)
        return
    for run in run_dirs(given or [paths.results_dir()]):
        for p, sample in zip(results.sample_paths(run), results.load_samples(run), strict=True):
            yield from_sample(sample, str(p), run.name)


def measured(result: Path, commit: str) -> tuple[str, list[float]]:
    """(scenario hash, tps of each ok sample) of `commit` in every samples folder under
    `result` (`kbisect rc record`), each sample read through its schema: a damaged one
    (a tps that is text, NaN) is InvalidResult, exit 3, naming it, before anything is
    written; a file not named as a sample is left out with a line (results.sample_paths)."""
    tps: list[float] = []
    hashes: set[str] = set()
    owners = sorted({d.parent for d in result.rglob(results.SAMPLES) if d.is_dir()})
    for owner in owners:
        for path in results.sample_paths(owner):
            s = results.load_sample(path)
            if s.ok and s.commit == commit and s.tps is not None:
                tps.append(s.tps)
                hashes.add(s.scenario_hash)
    if not tps or len(hashes) != 1:
        raise rc.RcError(
            f"{result}: no ok samples of {commit[:12]} with one scenario hash; "
            "pass --scenario-hash and --tps"
        )
    return hashes.pop(), tps


def from_rc_history(directory: Path) -> Iterator[Obs]:
    """The samples of every tag in the rc history dir (`kbisect rc record`): those of the
    tag's commit in its result dir while that dir exists, else the tps values the entry
    kept (`tps`), else its mean alone (entries written before the values were kept)."""
    entries = rc.load_history(directory)
    if not entries:
        raise NoSamples(f"--rc-history {directory}: no {rc.HISTORY_FILE} with measured tags")
    for e in entries:
        tag, commit = str(e["tag"]), str(e.get("commit") or "")
        found: list[Obs] = []
        result = Path(str(e.get("result_dir") or ""))
        if e.get("result_dir") and result.is_dir():
            try:
                found = [
                    Obs(**{**vars(o), "kernel_tag": tag})
                    for o in collect([result])
                    if commit and o.kernel_commit == commit
                ]
            except results.InvalidResult as exc:  # the values the entry kept stand in
                progress.warn(f"{tag}: its result dir is not read ({exc})")
        if not found:
            values = e.get("tps") or ([e["tps_mean"]] if e.get("tps_mean") else [])
            found = [
                Obs(
                    path=str(rc.history_file(directory)),
                    tps=float(v),
                    status="ok",
                    disturbed=False,
                    kernel_tag=tag,
                    kernel_commit=commit,
                    scenario_name="",
                    scenario_hash=str(e.get("scenario_hash") or ""),
                    machine="",
                    started=str(e.get("recorded") or ""),
                    run_id="",
                    label=tag,
                )
                for v in values
            ]
        yield from found
