"""The profile of a boot (the scenario's [profile]): `perf record` of a slice of one extra
pgbench run, `perf script`, and the stacks folded into `profile.folded`.

The extra run comes after the measured runs and its tps is never a sample's tps: it is
kept under the profile only (perf's own cost would bias it). perf records every CPU
(`-a`) for `seconds`, starting halfway into the run's spare time, so the slice sits in
the middle of the run, away from its start and end; a run shorter than the slice and
MARGIN_S on each side is made that long.

perf starts first, and the run only once perf is recording: perf's own start (loading
itself, reading every process's maps) takes seconds under TCG, and a slice timed from
before it ended up after the run (seen: a profile of the idle loop). perf runs
`sleep` as its workload with `-D`: its events switch on `delay` ms after that `sleep`
starts, which is when the run starts too; `sleep` ends the slice.

Folded stacks: one line per distinct stack, `comm;outermost;...;leaf count`, the format
flame graph tools read; written sorted, so the same samples give the same file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import proc
from harness.proc import HarnessError, echo

PERF_DATA = "perf.data"
FOLDED = "profile.folded"
SCRIPT_HEAD = "perf-script-head.txt"  # perf script's first lines, to check the folding by
HEAD_LINES = 2000
KEEP_DATA_BYTES = 16 * 1024 * 1024  # perf.data stays in the boot dir up to this size
TOP = 30  # symbols kept in the sample, by self share
MARGIN_S = 2  # the extra run's seconds at least, before and after perf's slice
START_TIMEOUT_S = 300  # perf record getting ready: seconds under TCG
SCRIPT_TIMEOUT_S = 1800  # perf script resolves symbols: slow under TCG
_HEADER = re.compile(r"^(\S.*?)\s+(\d+)(?:/\d+)?(?:\s|$)")  # `comm pid[/tid] ...`
_FRAME = re.compile(r"^\s+[0-9a-fA-F]+\s+(.*?)(?:\s+\(([^()]*)\))?$")  # `ip sym+off (dso)`
_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")


def run_seconds(duration_s: int, seconds: int) -> int:
    """The extra run's length: the scenario's duration, or longer when perf's slice needs
    it (kbisect/scenario/profile.py says the same to the host's timeouts)."""
    return max(duration_s, seconds + 2 * MARGIN_S)


def find_perf() -> str | None:
    """perf on the guest's PATH (the root's /usr/bin/perf), else None."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/bin"
    return shutil.which("perf", path=path)


def missing_perf() -> str:
    return (
        "profile.enabled needs perf on the guest's root and none was found: kbisect's own "
        "roots carry it (linux-perf); on the host's root or a machine, install perf "
        "(Debian: linux-perf)"
    )


def record_cmd(perf: str, data: Path, options: dict[str, Any], delay_ms: int = 0) -> list[str]:
    """perf record of every CPU for `seconds` after `delay_ms`, at `frequency` Hz, with
    call chains; its workload `sleep` starts when perf is ready (`started`)."""
    seconds = int(options["seconds"])
    return [
        perf,
        "record",
        "-a",
        "--call-graph",
        str(options["call_graph"]),
        "-F",
        str(options["frequency"]),
        "-e",
        str(options["event"]),
        "--no-buildid-cache",  # the guest's root is read-only
        *(["-D", str(delay_ms)] if delay_ms else []),
        "-o",
        str(data),
        "--",
        "sleep",
        f"{delay_ms / 1000 + seconds:g}",
    ]


def script_cmd(perf: str, data: Path) -> list[str]:
    """perf script: each sample's command, then its call chain, leaf first."""
    return [perf, "script", "-F", "comm,pid,tid,ip,sym,dso", "-i", str(data)]


def _symbol(sym: str, dso: str | None) -> str:
    """A frame's name: the symbol without its offset; an unknown one by its object."""
    name = _OFFSET.sub("", sym.strip())
    if name in ("", "[unknown]") and dso:
        return f"[{Path(dso).name.strip('[]')}]"
    return name.replace(";", ":") or "[unknown]"


def _flush(comm: str | None, frames: list[str], stacks: dict[str, int]) -> None:
    """Count one sample; a line with no frames under it (perf's warnings) is none."""
    if comm is None or not frames:
        return
    line = ";".join([comm.replace(";", ":"), *reversed(frames)])
    stacks[line] = stacks.get(line, 0) + 1


def fold(text: str) -> dict[str, int]:
    """`perf script` output -> {"comm;outermost;...;leaf": samples}."""
    stacks: dict[str, int] = {}
    comm: str | None = None
    frames: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            _flush(comm, frames, stacks)
            comm, frames = None, []
            continue
        if not line[0].isspace():
            _flush(comm, frames, stacks)
            header = _HEADER.match(line)
            comm, frames = (header.group(1) if header else line.split()[0]), []
            continue
        frame = _FRAME.match(line)
        if frame and comm is not None:
            frames.append(_symbol(frame.group(1), frame.group(2)))
    _flush(comm, frames, stacks)
    return stacks


def folded_text(stacks: dict[str, int]) -> str:
    return "".join(f"{stack} {count}\n" for stack, count in sorted(stacks.items()))


def top_symbols(stacks: dict[str, int], limit: int = TOP) -> list[dict[str, Any]]:
    """The leaf frames by their share of all samples (self %), largest first."""
    total = sum(stacks.values())
    own: dict[str, int] = {}
    for stack, count in stacks.items():
        leaf = stack.rsplit(";", 1)[-1]
        own[leaf] = own.get(leaf, 0) + count
    ranked = sorted(own.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [
        {"symbol": name, "samples": count, "self_pct": round(100.0 * count / total, 3)}
        for name, count in ranked
    ]


def _children(pid: int, comm: str) -> list[int]:
    """The processes named `comm` whose parent is `pid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # gone meanwhile
        head, _, rest = text.rpartition(")")  # `pid (comm) state ppid ...`
        fields = rest.split()
        if len(fields) > 1 and fields[1] == str(pid) and head.partition("(")[2] == comm:
            found.append(int(stat.parent.name))
    return found


def started(recorder: subprocess.Popen[bytes], timeout: float | None = None) -> None:
    """Wait until perf runs its workload (`sleep`): perf is set up and counting."""
    timeout = START_TIMEOUT_S if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while not _children(recorder.pid, "sleep"):
        if recorder.poll() is not None:
            return  # it ended already: its exit status tells why
        if time.monotonic() > deadline:
            recorder.kill()
            recorder.wait()
            raise HarnessError(f"perf record did not start within {timeout:g} s")
        time.sleep(0.05)


def capture(
    perf: str,
    out: Path,
    options: dict[str, Any],
    duration_s: int,
    workload: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """Run `workload` (the extra pgbench run) with perf recording a slice of its middle;
    fold the stacks into out/profile.folded; the sample's `profile` field."""
    # perf writes its samples into the guest's own memory, not into out/: out/ is the
    # host's directory over 9p (or a machine's disk), and perf's writes there would be
    # work of its own in the slice it records (seen: perf and the 9p worker at 23% of it).
    scratch = Path(tempfile.mkdtemp(prefix="kbisect-perf-", suffix=f"-{out.name}"))
    try:
        data = scratch / PERF_DATA
        seconds = float(options["seconds"])
        delay_ms = round(max(0.0, (duration_s - seconds) / 2) * 1000)  # run_seconds()
        log = out / "perf-record.log"
        with log.open("wb") as sink:
            recorder = subprocess.Popen(
                record_cmd(perf, data, options, delay_ms), stdout=sink, stderr=subprocess.STDOUT
            )
        try:
            started(recorder)
            run = workload()
            code = recorder.wait(timeout=delay_ms / 1000 + seconds + START_TIMEOUT_S)
        finally:
            if recorder.poll() is None:
                recorder.kill()
                recorder.wait()
        if code != 0:
            output = log.read_text(errors="replace")
            raise HarnessError(f"perf record failed: {proc.last_error_line(output)}")
        echo("[harness] perf script: folding the stacks")
        script = proc.run(script_cmd(perf, data), timeout=SCRIPT_TIMEOUT_S)
        if script.returncode != 0:
            raise HarnessError(f"perf script failed: {proc.last_error_line(script.output)}")
        stacks = fold(script.output)
        head = script.output.splitlines()[:HEAD_LINES]
        (out / SCRIPT_HEAD).write_text("".join(f"{line}\n" for line in head))
        (out / FOLDED).write_text(folded_text(stacks))
        kept = data.exists() and data.stat().st_size <= KEEP_DATA_BYTES
        if kept:
            shutil.move(str(data), str(out / PERF_DATA))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "event": str(options["event"]),
        "frequency": int(options["frequency"]),
        "call_graph": str(options["call_graph"]),
        "seconds": int(options["seconds"]),
        "samples": sum(stacks.values()),
        "top": top_symbols(stacks),
        "run": {k: run.get(k) for k in ("tps", "latency_avg_ms", "transactions")},
        "folded": FOLDED,
        "perf_data": PERF_DATA if kept else None,
    }
