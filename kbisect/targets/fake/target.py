"""A scripted target for tests and dry runs: no kernel boots, a small program plays the
machine (kbisect/targets/fake/guest.py), prints console lines and writes the harness's
result, so everything around it (sample records, failures, compare, bisect, resume,
interruption) runs for real.

Select it like any target: `--target fake` (defaults), or a TOML file with `kind = "fake"`
and any of the settings below (`--target path/to/fake.toml`, or NAME.toml in
~/.config/kbisect/targets/).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from kbisect.core import atomic, paths, proc, progress, reading
from kbisect.core.arch import Arch
from kbisect.core.exceptions import UserError
from kbisect.targets import monitor as disturbance
from kbisect.targets.base import Job, Target

GUEST = Path(__file__).with_name("guest.py")  # run as a script: no kbisect imports
MODES = ("ok", "panic", "hang", "spin", "noharness", "pgfail")
SIGNALS = ("KILL", "INT", "TERM", "HUP")
NTH = ("calls", "stored")
# setting: (type, default, meaning)
SETTINGS: dict[str, tuple[type, Any, str]] = {
    "tps": (float, 1000.0, "tps when neither append_tps nor the image's TPS line says"),
    "append_tps": (dict, {}, "--append item -> tps (first match wins)"),
    "scale": (float, 1.0, "a machine effect: every boot's tps times this (a pool's machine)"),
    "cv": (float, 0.01, "noise: tps * (1 + cv * N(0,1)), seeded"),
    "seed": (int, 0, "noise seed"),
    "drift_per_call": (float, 0.0, "a drifting host: tps * (1 + drift_per_call * call number)"),
    "noise_key": (str, "commit", "what the noise is keyed by: commit, subject or image"),
    "noise_nth": (str, "calls", "the draw's number: calls (earlier boots of the key) or stored"),
    "mode": (str, "ok", f"what every boot does: {', '.join(MODES)}"),
    "script": (list, [], "modes by call number, before `mode` applies"),
    "boot_fail": (list, [], "commits (or subjects) whose boots panic"),
    "delay_s": (float, 0.0, "seconds a boot takes"),
    "state": (str, "", "directory for calls.jsonl (default: in the cache)"),
    "kill_at": (int, 0, "fault injection: at this call number, SIGKILL kill_pid_file's group"),
    "kill_pid_file": (str, "", "file holding the pid whose process group kill_at kills"),
    "kill_signal": (str, "KILL", f"what kill_at sends: {', '.join(SIGNALS)}"),
    "disturb": (list, [], "a hog: others' share of the host's CPUs by call number (slows tps)"),
    "host_busy": (float, 0.0, "others' share of the host at the start of a run (warns)"),
    "busy_polls": (int, 0, "polls of the wait before a retake that find the host busy"),
    "steal": (list, [], "steal time inside the machine by call number (slows tps)"),
    "runs_here": (bool, True, "false: judged like a machine target, by steal time alone"),
    "preempt": (str, "none", "the preemption model the guest reports: a model, asked, unknown"),
    "perf": (str, "", "a profiled boot's perf program (tests/fakeperf/perf); empty: none"),
}
# "asked": the last preempt= of the command line; "unknown": none read (guest.py)
PREEMPT = ("none", "voluntary", "full", "lazy", "asked", "unknown")
NON_NEGATIVE = ("tps", "scale", "cv", "delay_s", "host_busy", "kill_at", "busy_polls")
ABSOLUTE = ("state", "kill_pid_file")  # paths the fake writes or reads: never the cwd's
HOST_FILE = "fake-host.json"  # guest.py writes the call's scripted share here


class BadFakeSettings(UserError):
    """A fake target's TOML has an unknown key or a wrong type."""


def check_settings(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    out = {k: v[1] for k, v in SETTINGS.items()}
    for key, value in settings.items():
        if key in ("kind", "arch"):
            continue
        if key not in SETTINGS:
            raise BadFakeSettings(
                f"target {name}: unknown fake setting {key!r} (known: {', '.join(SETTINGS)})"
            )
        kind = SETTINGS[key][0]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise BadFakeSettings(f"target {name}: {key} must be a {kind.__name__}")
        if not reading.finite(value):
            raise BadFakeSettings(f"target {name}: {key} must be finite, got {value}")
        if key in NON_NEGATIVE and settings[key] < 0:  # a number, checked above
            raise BadFakeSettings(f"target {name}: {key} must be at least 0, got {value}")
        out[key] = value
    for key in ABSOLUTE:
        if out[key] and not os.path.isabs(out[key]):
            raise BadFakeSettings(
                f"target {name}: {key} must be an absolute path, got {out[key]!r}"
            )
    bad = [m for m in [out["mode"], *out["script"]] if m not in MODES]
    if bad:
        raise BadFakeSettings(f"target {name}: unknown mode {bad[0]!r} (known: {', '.join(MODES)})")
    if any(type(x) not in (int, float) or x < 0 for x in out["append_tps"].values()):
        raise BadFakeSettings(f"target {name}: append_tps maps --append items to tps (numbers)")
    for key in ("disturb", "steal"):
        if any(not isinstance(x, int | float) or not 0 <= x <= 1 for x in out[key]):
            raise BadFakeSettings(f"target {name}: {key} holds shares of the CPUs, 0..1")
    for key, known in (("kill_signal", SIGNALS), ("noise_nth", NTH), ("preempt", PREEMPT)):
        if out[key] not in known:
            raise BadFakeSettings(f"target {name}: {key} must be one of {', '.join(known)}")
    return out


class FakeTarget(Target):
    kind = "fake"

    def __init__(self, name: str, arch: Arch, settings: dict[str, Any]) -> None:
        super().__init__(name, arch)
        self.settings = check_settings(name, settings)
        if not self.settings["state"]:
            self.settings["state"] = str(paths.cache_dir() / "fake" / name)
        self.runs_here = bool(self.settings["runs_here"])
        self.polls = 0  # wait_quiet's polls so far

    @classmethod
    def from_settings(cls, name: str, arch: Arch, settings: Mapping[str, Any]) -> Target:
        return cls(name, arch, dict(settings))

    def monitor(self, job: Job, threshold: float) -> disturbance.Monitor:
        return ScriptedMonitor(job.boot_dir / HOST_FILE, threshold)

    def warn_if_busy(self) -> None:
        record = scripted(float(self.settings["host_busy"]), disturbance.THRESHOLD)
        if text := disturbance.warning(record):
            progress.warn(text)

    def wait_quiet(self, threshold: float) -> None:
        """The wait before a retake, without waiting: the first `busy_polls` polls of this
        target find others using 60% of the host."""

        def poll() -> dict[str, Any]:
            self.polls += 1
            return scripted(0.6 if self.polls <= self.settings["busy_polls"] else 0.0, threshold)

        if self.runs_here:
            disturbance.wait_quiet(poll)

    def command(self, job: Job, settings_file: Path) -> list[str]:
        m = job.kernel.manifest or {}
        cmd = [
            sys.executable,
            str(GUEST),
            "--settings",
            str(settings_file),
            "--image",
            str(job.kernel.image),
            "--boot-dir",
            str(job.boot_dir),
            "--commit",
            str(m.get("commit") or ""),
            "--subject",
            str(m.get("subject") or ""),
        ]
        return cmd + [a for item in job.append for a in ("--append", item)]

    def boot(self, job: Job) -> None:
        settings_file = job.boot_dir / "fake-target.json"
        atomic.write_text(settings_file, json.dumps(self.settings, sort_keys=True))
        proc.run(
            self.command(job, settings_file),
            log=job.log,
            timeout=job.timeout_s,
            idle_timeout=job.idle_s,
            on_line=job.console,
            check=False,
        )


def scripted(others: float, threshold: float, seconds: float = 1.0) -> dict[str, Any]:
    """The disturbance record of a boot during which others used `others` of the host
    throughout: disturbance.summarize over two made-up readings, no /proc."""
    ticks = 10_000
    points = [
        disturbance.Point(0.0, 0, 0, 0, 0),
        disturbance.Point(seconds, round(others * ticks), ticks, 0, 0),
    ]
    return disturbance.summarize(points, [round(others * 2, 2)] * 3, threshold)


class ScriptedMonitor(disturbance.Monitor):
    """The fake target's monitor: the share guest.py scripted for this call."""

    def __init__(self, path: Path, threshold: float) -> None:
        super().__init__(threshold)
        self.path = path
        self.start = 0.0

    def __enter__(self) -> disturbance.Monitor:
        self.start = time.monotonic()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            share = float(reading.json_table(self.path, "")["others_share"])
        except (reading.CorruptFile, ValueError, KeyError, TypeError):
            share = 0.0  # nothing scripted, or the boot died first: a quiet host
        self.result = scripted(share, self.threshold, time.monotonic() - self.start)
