"""One boot = one sample, on any target: the boot directory, failure classes and the
sample record (docs/architecture.md), written once for all; what the kernel prints is
followed by targets/console.py.

The target gets the harness run and leaves its guest-result.json in the boot directory;
a failure the harness cannot see (a panic, a hang, no result at all) is a boot failure.
"""

from __future__ import annotations

import copy
import json
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import atomic, clock, paths, progress, reading
from kbisect.core.exceptions import BenchmarkError, BootError, CommandTimeout
from kbisect.measure import preempt, results
from kbisect.measure.record import Sample
from kbisect.scenario import profile
from kbisect.scenario.scenario import Scenario
from kbisect.targets import monitor as disturbance
from kbisect.targets.base import Job, Kernel, Target
from kbisect.targets.console import Console

VERSION = 2
TIMINGS = ("boot_s", "restore_s", "init_s", "bench_s", "total_s")
DISTURBED = "disturbed"  # the status of a sample kept on disk, never counted (retake.py)
# What take() does with a disturbed good sample (retake.py): stored as DISTURBED (RETAKE;
# LAST: and its slot gets no retake after it), or kept "ok" with its flag (KEEP; COUNT:
# marked `counted`, as --count-disturbed asks: the statistics use it).
RETAKE, LAST, KEEP, COUNT = "retake", "last", "keep", "count"


def command_line(scen: Scenario, append: str) -> tuple[str, ...]:
    """The kernel command-line extras of a boot: the scenario's, then the user's."""
    return tuple(shlex.split(scen.data["guest"].get("append", "")) + shlex.split(append))


def new_boot_dir(out_dir: Path, label: str | None) -> Path:
    """A new boot directory; two boots of a pool can start in the same millisecond."""
    stamp = f"{int(time.time() * 1000)}-{label or 'x'}"
    for n in range(1, 1000):
        boot_dir = out_dir / "boots" / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            boot_dir.mkdir(parents=True)
            return boot_dir
        except FileExistsError:
            continue
    raise FileExistsError(f"{out_dir / 'boots'}: no free name for {stamp}")


@dataclass(frozen=True)
class Boot:
    """One boot to take: the kernel, the scenario, the user's command-line extras, the
    run directory its sample goes to, the sample's label (a compare's side, a study's
    cell) and its slot (a compare's place in its plan's order, stored with the sample)."""

    kernel: Kernel
    scen: Scenario
    out_dir: Path
    append: str = ""
    label: str | None = None
    slot: int | None = None


def take(
    target: Target,
    boot: Boot,
    *,
    threshold: float = disturbance.THRESHOLD,
    when_disturbed: str = KEEP,
) -> Sample:
    """Boot once on `target`; return the sample (also written under out_dir/samples/).
    Raises BootError or BenchmarkError after storing a failed sample. A good sample taken
    while others used more than `threshold` of the host is stored as `when_disturbed`
    says (RETAKE, LAST, KEEP or COUNT above)."""
    kernel, scen, append = boot.kernel, boot.scen, boot.append
    target = target.seat()  # a pool's machine: the sample records which one took it
    target.validate(kernel)
    boot_dir = new_boot_dir(boot.out_dir, boot.label)
    templates = paths.cache_dir() / "pg-templates"
    templates.mkdir(parents=True, exist_ok=True)
    t = scen.data["timeouts"]
    console = Console(float(t["boot_s"]))
    log = boot_dir / "console.log"
    log.write_text(progress.log_header())
    job = Job(
        kernel,
        scen,
        command_line(scen, append),
        boot_dir,
        templates,
        console,
        log,
        float(t["total_s"]),
        float(t["idle_s"]),
    )
    commit = (kernel.manifest or {}).get("commit")
    profiled = due(scen.data, boot.out_dir, boot.label, commit)
    atomic.write_text(job.scenario_file, guest_json(scen.data, profiled))
    extras = ", ".join([target.headline(job), *job.append])
    progress.step(f"booting {kernel.image.name} on {target.name} ({extras})")
    start = time.monotonic()
    error: BootError | BenchmarkError | None = None
    monitor = target.monitor(job, threshold)
    try:
        with monitor:
            target.boot(job)
    except CommandTimeout as exc:
        error = BootError(f"{exc}; console log kept")
    except BootError as exc:
        error = BootError(f"{exc} (log: {log})")
    data = record(target, job, console, time.monotonic() - start, boot.label, append)
    if boot.slot is not None:
        data["slot"] = boot.slot
    data["disturbance"] = disturbance.judge(
        monitor.result, data.get("fingerprint"), threshold, target.runs_here
    )
    error = error or classify(data, console, log)
    if error is not None:
        data.update(
            status="boot-failed" if isinstance(error, BootError) else "benchmark-failed",
            error=str(error),
            tps=None,
        )
    elif (data["disturbance"] or {}).get("disturbed") and when_disturbed != KEEP:
        if when_disturbed == COUNT:
            data["disturbance"]["counted"] = True
        else:
            data["status"] = DISTURBED
            if when_disturbed == LAST:
                data["disturbance"]["last_try"] = True
    taken = Sample(data)
    written = results.write_sample(boot.out_dir, taken)
    warn_preempt(boot.out_dir, written, taken)
    if error is not None:
        raise error
    return taken


def _stored(out_dir: Path, but: Path | None = None) -> Iterator[Sample]:
    """The run's samples as far as they can be read (a damaged one is the report's)."""
    for path in results.sample_paths(out_dir):
        if path == but:
            continue
        try:
            yield Sample.of(reading.json_table(path, ""))
        except reading.CorruptFile:
            continue


def warn_preempt(out_dir: Path, written: Path, taken: Sample) -> None:
    """Say it when a boot did not get the preemption model it asked for (preempt.py), at
    the first such sample of its label in the run: later ones go to the report."""
    label, commit = taken.label, taken.commit
    name = f"the boot of {commit[:12]}" if label is None and commit else preempt.who(label)
    text = preempt.message(name, taken.preempt)
    if text is None:
        return
    for earlier in _stored(out_dir, written):
        if earlier.label == label and preempt.message("", earlier.preempt):
            return
    progress.warn(text)


def classify(
    data: dict[str, Any], console: Console, log: Path
) -> BootError | BenchmarkError | None:
    """What went wrong, if anything: a panic beats everything the harness said."""
    if console.panic:
        return BootError(f"kernel panic or oops: {console.panic[:160]} (log: {log})")
    if data.get("status") is None:
        return BootError(f"the kernel never reached the harness (log: {log})")
    if data["status"] != "ok":
        return BenchmarkError(f"{data.get('error') or 'harness failed'} (log: {log})")
    return None


def _guest_result(path: Path) -> dict[str, Any]:
    try:
        return reading.json_table(path, "")
    except reading.CorruptFile:
        return {}  # absent or half-written: the harness never finished


def record(
    target: Target, job: Job, console: Console, total: float, label: str | None, append: str
) -> dict[str, Any]:
    """The sample: the harness's result wrapped with the kernel, target and timings."""
    guest = _guest_result(job.result_file)
    runs = guest.get("runs", [])
    measured = [r["tps"] for r in runs if not r.get("warmup")]
    timings = {**dict.fromkeys(TIMINGS), **guest.get("timings", {})}
    timings.update(boot_s=round(console.reached or 0.0, 2), total_s=round(total, 2))
    timings["phases"] = console.phases(time.monotonic() - console.start)
    ok = guest.get("status") == "ok" and measured
    release = (guest.get("fingerprint") or {}).get("uname_r")
    fragments = [f["name"] for f in (job.kernel.manifest or {}).get("fragments", [])]
    config = preempt.read_config(job.kernel.image.parent / "config") if fragments else {}
    return {
        "version": VERSION,
        "kind": "sample",
        "created": clock.utc_now(),
        "command": progress.reproduce_line(),
        "label": label,
        "scenario": {"name": job.scen.name, "hash": job.scen.hash, "settings": job.scen.data},
        "kernel": job.kernel.describe(release),
        "append": append,
        "target": target.describe(),
        "userland": target.userland(job.scen),
        "status": guest.get("status"),
        "error": guest.get("error"),
        "tps": sum(measured) / len(measured) if ok else None,
        "runs": runs,
        "fingerprint": guest.get("fingerprint"),
        "preempt": preempt.check(job.append, fragments, config, guest.get("fingerprint")),
        "timings": timings,
        **({"profile": guest["profile"]} if ok and guest.get("profile") else {}),
        "boot_dir": str(job.boot_dir),
    }


# -- which boots are profiled (the scenario's [profile], docs/profiles.md) --------------
# Decided on the host: the first `boots_per_side` boots of each side that came back with a
# profile. A side is a label (a compare's A or B) and a kernel commit; a failed profiled
# boot leaves the turn to the next boot of its side. The guest learns it from its
# scenario JSON, whose profile.enabled is true only for a boot to profile.


def due(data: dict[str, Any], out_dir: Path, label: str | None, commit: str | None) -> bool:
    """Is the next boot of this side to be profiled: fewer of its samples in the run carry
    a profile than the scenario wants?"""
    if not profile.enabled(data):
        return False
    mine = [s for s in _stored(out_dir) if s.label == label and s.kernel.get("commit") == commit]
    return sum(bool(s.profile) for s in mine) < int(data["profile"]["boots_per_side"])


def guest_json(data: dict[str, Any], profiled: bool) -> str:
    """The scenario JSON the guest harness reads: profile.enabled says this boot's part."""
    view = copy.deepcopy(data)
    if "profile" in view:
        view["profile"]["enabled"] = profiled
    return json.dumps(view, indent=2, sort_keys=True) + "\n"
