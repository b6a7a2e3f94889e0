"""The fio preflight: what the PGDATA filesystem does for PostgreSQL, measured each boot.

Three jobs, one after the other (`stonewall`), psync, queue depth 1, 8 KiB blocks, each
`time_based` for the scenario's `fio.seconds`, on one file of `fio.size_mb` in a scratch
directory of the PGDATA filesystem (removed after):
  wal        sequential writes with fdatasync after each (a commit's WAL flush)
  randread   random reads with O_DIRECT (a buffer miss that reaches the device)
  randwrite  random writes with O_DIRECT, fsync every 32 (checkpoint writes)
fio's JSON is kept as `fio-<n>.json` in the out dir; `figures()` reads the numbers the
fingerprint carries. fio 3.33 reports `sync.total_ios: 0` with fdatasync=1, so syncs are
counted from `sync.lat_ns.N`.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from harness import proc
from harness.proc import HarnessError, echo

TOOL_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
BLOCK = "8k"
# One file, written in full by the first job before it measures (overwrite=1): reads of
# never-written (unwritten extent) blocks return zeros without touching the device, and
# PostgreSQL zero-fills a WAL segment before using it, so a commit's flush is an
# overwrite too. One layout for the three jobs keeps the preflight short.
FILE = "kbisect-fio.dat"
JOBS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("wal", ("--overwrite=1", "--rw=write", "--fdatasync=1")),
    ("randread", ("--rw=randread", "--direct=1")),
    ("randwrite", ("--rw=randwrite", "--direct=1", "--fsync=32")),
)


def command(fio: str, directory: Path, seconds: int, size_mb: int, output: Path) -> list[str]:
    """fio with the three jobs, JSON into `output` (global options first, then each job)."""
    cmd = [fio, "--output-format=json", f"--output={output}", f"--directory={directory}",
           f"--filename={FILE}", f"--size={size_mb}m", f"--bs={BLOCK}", "--ioengine=psync",
           "--iodepth=1", "--time_based", f"--runtime={seconds}", "--randrepeat=1"]  # fmt: skip
    for index, (name, options) in enumerate(JOBS):
        cmd += [f"--name={name}", *(["--stonewall"] if index else []), *options]
    return cmd


def _us(ns: Any) -> float | None:
    return round(float(ns) / 1000.0, 1) if isinstance(ns, int | float) else None


def _pct(lat: dict[str, Any], pct: str) -> float | None:
    """A percentile of a fio latency block (ns), in µs; None when fio gave none."""
    return _us((lat.get("percentile") or {}).get(pct))


def _job(doc: dict[str, Any], name: str) -> dict[str, Any]:
    for job in doc.get("jobs", []):
        if job.get("jobname") == name:
            return dict(job)
    raise HarnessError(f"fio output has no job {name!r}")


def _io(job: dict[str, Any], side: str) -> dict[str, Any]:
    io = job.get(side) or {}
    clat = io.get("clat_ns") or {}
    return {
        "iops": round(float(io.get("iops", 0.0)), 1),
        "clat_p50_us": _pct(clat, "50.000000"),
        "clat_p99_us": _pct(clat, "99.000000"),
    }


def figures(doc: dict[str, Any]) -> dict[str, Any]:
    """fio's JSON -> {version, wal: {syncs, syncs_per_s, sync_p50_us, sync_p99_us, ...},
    randread: {iops, clat_p50_us, clat_p99_us}, randwrite: {...}}."""
    wal = _job(doc, "wal")
    sync = (wal.get("sync") or {}).get("lat_ns") or {}
    runtime_s = float((wal.get("write") or {}).get("runtime", 0)) / 1000.0  # fio: ms
    syncs = int(sync.get("N", 0))
    return {
        "version": doc.get("fio version"),
        "wal": {
            "syncs": syncs,
            "syncs_per_s": round(syncs / runtime_s, 1) if runtime_s > 0 else None,
            "sync_p50_us": _pct(sync, "50.000000"),
            "sync_p99_us": _pct(sync, "99.000000"),
            "write_iops": _io(wal, "write")["iops"],
        },
        "randread": _io(_job(doc, "randread"), "read"),
        "randwrite": _io(_job(doc, "randwrite"), "write"),
    }


def binary() -> str:
    found = shutil.which("fio", path=TOOL_PATH)
    if found is None:
        raise HarnessError(
            "fio is not installed in the guest (install fio, or set fio.enabled = false)"
        )
    return found


def load(path: Path) -> dict[str, Any]:
    """fio's JSON file; fio may print warnings before the JSON object."""
    text = path.read_text(errors="replace")
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise HarnessError(f"fio wrote no JSON to {path.name}")
    return doc


def preflight(directory: Path, out: Path, index: int, seconds: int, size_mb: int) -> dict[str, Any]:
    """Run the jobs in `directory` (created, then removed); the figures plus `total_s`."""
    fio = binary()
    output = out / f"fio-{index}.json"
    directory.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    try:
        done = proc.run(command(fio, directory, seconds, size_mb, output), on_line=echo,
                        timeout=len(JOBS) * seconds + 600)  # fmt: skip
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if done.returncode != 0:
        raise HarnessError(f"fio exited {done.returncode}: {proc.last_error_line(done.output)}")
    result = figures(load(output))
    result.update(seconds=seconds, size_mb=size_mb, total_s=round(time.monotonic() - began, 2))
    result["json"] = output.name
    return result
