"""The machine of the fake target (kbisect/targets/fake/target.py): prints what a booting
kernel and the harness would, and writes guest-result.json, as scripted. Standard library
only: it runs as a script.

    python3 kbisect/targets/fake/guest.py --settings FILE --image IMG --boot-dir DIR
        [--commit SHA] [--subject TEXT] [--append ITEM]...
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GUEST = "kbisect-guest: "


@dataclass(frozen=True)
class Call:
    """One boot, as the fake target asked for it on the command line."""

    settings: Path
    image: Path
    boot_dir: Path
    commit: str
    subject: str
    append: tuple[str, ...]  # the kernel command-line extras


def parse(argv: list[str]) -> Call:
    p = argparse.ArgumentParser(prog="fakeguest")
    for name in ("--settings", "--image", "--boot-dir"):
        p.add_argument(name, required=True)
    p.add_argument("--commit", default="")
    p.add_argument("--subject", default="")
    p.add_argument("--append", action="append", default=[])
    a = p.parse_args(argv)
    return Call(
        Path(a.settings), Path(a.image), Path(a.boot_dir), a.commit, a.subject, tuple(a.append)
    )


def log_call(state: Path, key: str, entry: dict[str, Any]) -> tuple[int, int]:
    """Append this call to state/calls.jsonl; (its number, earlier calls with this key)."""
    state.mkdir(parents=True, exist_ok=True)
    with (state / "calls.jsonl").open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        earlier = [json.loads(line) for line in f if line.strip()]
        same = sum(1 for e in earlier if e.get("key") == key)
        f.write(json.dumps({**entry, "key": key, "index": len(earlier), "nth": same}) + "\n")
    return len(earlier), same


def content_key(image: Path) -> str:
    """An image without a commit is keyed by what it holds, not where it lies: a path is
    new on every run, which made its noise a fresh random draw each time."""
    try:
        return "image:" + hashlib.sha256(image.read_bytes()).hexdigest()[:16]
    except OSError:
        return str(image)


def image_tps(image: Path) -> float | None:
    """The TPS line of a fake kernel image (tests/fakelinux/README), if any."""
    lines = image.read_text(errors="replace").split("\n") if image.is_file() else []
    if len(lines) > 2 and lines[0] == "fake-kernel" and lines[2].strip():
        return float(lines[2])
    return None


def base_tps(s: dict[str, Any], call: Call) -> float:
    for item in call.append:
        if item in s["append_tps"]:
            return float(s["append_tps"][item])
    found = image_tps(call.image)
    return float(s["tps"]) if found is None else found


def stored_ok(boot_dir: Path) -> int:
    """How many good samples the run (or the commit's store) already holds: boots live in
    DIR/boots/, samples in DIR/samples/ (measure/results.py)."""
    count = 0
    for path in (boot_dir.parent.parent / "samples").glob("[0-9]*-*.json"):
        try:
            count += json.loads(path.read_text()).get("status") == "ok"
        except (OSError, ValueError):
            continue
    return count


def noisy(base: float, s: dict[str, Any], key: str, nth: int) -> float:
    z = random.Random(f"{s['seed']}-{key}-{nth}").gauss(0.0, 1.0)
    return max(base * (1 + float(s["cv"]) * z), 0.001)


def drifted(tps: float, s: dict[str, Any], index: int) -> float:
    """A host whose speed moves by drift_per_call with every boot (call 0 unchanged)."""
    return max(tps * (1 + float(s.get("drift_per_call", 0.0)) * index), 0.001)


def hog(s: dict[str, Any], index: int, boot_dir: Path) -> float:
    """A scripted hog: others' share of the host during this call (the host side reads it
    from fake-host.json, fake/target.py); the guest loses that share of its tps."""
    disturb = s.get("disturb", [])
    share = float(disturb[index]) if index < len(disturb) else 0.0
    if share:
        (boot_dir / "fake-host.json").write_text(json.dumps({"others_share": share}))
    return share


def stolen(s: dict[str, Any], index: int) -> float:
    """Scripted steal time inside the fake kernel's machine during this call (a share of
    its CPUs, in the fingerprint as the harness records it); the tps loses that share."""
    steal = s.get("steal", [])
    return float(steal[index]) if index < len(steal) else 0.0


def mode_of(s: dict[str, Any], index: int, call: Call) -> str:
    if index < len(s["script"]):
        return str(s["script"][index])
    failing = s["boot_fail"]
    if any(c and (call.commit.startswith(c) or c == call.subject) for c in failing):
        return "panic"
    return str(s["mode"])


def run_entry(index: int, warmup: bool, tps: float) -> dict[str, Any]:
    return {
        "index": index,
        "warmup": warmup,
        "tps": round(tps, 3),
        "latency_avg_ms": 4.0,
        "latency_stddev_ms": 0.5,
        "failed_transactions": 0,
        "transactions": int(tps),
        "series": [round(tps, 3)] * 2,
    }


def preempt_model(s: dict[str, Any], call: Call) -> str | None:
    """The preemption model the fake kernel reports: the `preempt` setting's; "asked":
    the last preempt= of its command line, else none (a PREEMPT_DYNAMIC kernel built as
    PREEMPT_NONE); "unknown": none could be read (null, as without debugfs)."""
    setting = str(s.get("preempt", "none"))
    if setting == "unknown":
        return None
    if setting == "asked":
        asked = [a.split("=", 1)[1] for a in call.append if a.startswith("preempt=")]
        return asked[-1] if asked else "none"
    return setting


def fingerprint(call: Call, steal: float, model: str | None = "none") -> dict[str, Any]:
    return {
        "uname_r": "6.12.0-fake",
        "cmdline": " ".join(call.append),
        "preempt": model,
        "preempt_source": "debugfs" if model else None,
        "hugepages_total": 0,
        "hugepages_free": 0,
        "hugepage_size_kb": 2048,
        "thp": "madvise",
        "nproc": 2,
        "mem_total_kb": 1000000,
        "clocksource": "tsc",
        "pg_version": "15.0",
        "pg_settings": {"shared_buffers": "32MB"},
        "huge_pages_used": False,
        "cpu_during_runs": {
            "seconds": 1.0,
            "busy_share": 1.0,
            "steal_share": steal,
            "loadavg": [2.0, 2.0, 2.0],
        },
    }


def result(
    mode: str, tps: float, scen: dict[str, Any], call: Call, steal: float, model: str | None
) -> dict[str, Any]:
    failed = mode == "pgfail"
    bench = scen["pgbench"]
    runs = [] if failed else [run_entry(i, True, tps / 2) for i in range(bench["warmup_runs"])]
    runs += [] if failed else [run_entry(len(runs) + i, False, tps) for i in range(bench["runs"])]
    return {
        "version": 1,
        "status": "benchmark-failed" if failed else "ok",
        "error": "postgres: initdb failed" if failed else None,
        "runs": runs,
        "fingerprint": fingerprint(call, steal, model),
        "timings": {"restore_s": 0.1, "init_s": None, "bench_s": 1.0},
    }


def profiled(data: dict[str, Any], perf: str, scen: dict[str, Any], out: Path, tps: float) -> None:
    """A profiled boot, as the harness does it (harness/profile.py, run for real with the
    fake `perf` program the settings name); without one, the harness's failure."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from harness import profile  # the guest's own module: standard library only

    if not perf:
        data.update(status="benchmark-failed", error=profile.missing_perf(), runs=[])
        return
    index = len(data["runs"])
    data["profile"] = profile.capture(
        perf, out, scen["profile"], 0, lambda: run_entry(index, False, tps)
    )


def say(line: str) -> None:
    print(line, flush=True)


def kill(s: dict[str, Any]) -> None:
    """Fault injection: send kill_signal (SIGKILL unless said) to the pid file's process
    group (a driver: its reaper then kills what it started, git bisect run and the steps),
    else our caller's. One kill(2): a second one, to the caller's group, raced: preempted
    between the two, this process could leave the driver alive long enough to see git die
    and exit on its own."""
    pid = int(Path(s["kill_pid_file"]).read_text().strip()) if s["kill_pid_file"] else 0
    os.killpg(os.getpgid(pid or os.getppid()), getattr(signal, f"SIG{s['kill_signal']}"))


def play(mode: str, s: dict[str, Any], call: Call, tps: float, steal: float) -> int:
    boot_dir = call.boot_dir
    say(f"[    0.000000] Linux version 6.12.0-fake ({' '.join(call.append)})")
    time.sleep(s["delay_s"])
    if mode == "panic":
        say("[    0.500000] Kernel panic - not syncing: VFS: Unable to mount root fs")
        return 0
    if mode == "hang":
        time.sleep(3600)
    while mode == "spin":
        say("[    1.000000] random: crng init done")
        time.sleep(0.2)
    if mode == "noharness":
        return 0
    scen = json.loads((boot_dir / "scenario.json").read_text())
    say(f"{GUEST}phase init")
    data = result(mode, tps, scen, call, steal, preempt_model(s, call))
    if data["status"] == "ok" and (scen.get("profile") or {}).get("enabled"):
        profiled(data, s["perf"], scen, boot_dir, tps)
    if data["status"] == "ok":
        say(f"{GUEST}phase run")
        say(f"{GUEST}tps {tps:.1f}")
    tmp = boot_dir / f".guest-result.json.{os.getpid()}.tmp"  # as the harness: atomic
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(boot_dir / "guest-result.json")
    say(f"{GUEST}phase done")
    return 0 if data["status"] == "ok" else 3


def main(argv: list[str]) -> int:
    call = parse(argv)
    s = json.loads(call.settings.read_text())
    named = {"commit": call.commit, "subject": call.subject, "image": str(call.image)}
    key = named.get(s["noise_key"], call.commit) or content_key(call.image)
    entry = {"commit": call.commit, "append": list(call.append), "boot_dir": str(call.boot_dir)}
    index, nth = log_call(Path(s["state"]), key, entry)
    if s["noise_nth"] == "stored":  # a boot redone after an interruption draws the same
        nth = stored_ok(call.boot_dir)
    if s["kill_at"] and index + 1 == s["kill_at"]:
        kill(s)
    mode = mode_of(s, index, call)
    tps = drifted(noisy(base_tps(s, call) * float(s.get("scale", 1.0)), s, key, nth), s, index)
    steal = stolen(s, index)
    return play(mode, s, call, tps * (1 - hog(s, index, call.boot_dir)) * (1 - steal), steal)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
