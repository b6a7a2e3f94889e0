"""Host disturbance: how much of this host's CPU went to other work while a sample ran.

A `Monitor` reads /proc/stat (every CPU's busy and steal time) and the CPU time of this
process and its descendants (the vng, QEMU, ssh of a sample) once a second, in a thread.
What the host spent beyond our own tree is "others"; a sample during which others used
more than `threshold` of the host's CPUs in any `window_s` window is `disturbed` (a hog
for part of a sample slows exactly that part; an average over minutes would hide it).
Shares are of the whole host: 0.5 on a 2-CPU host is one CPU. Pure functions take the
text of /proc files, so the tests feed them saved snippets.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from kbisect.core import progress
from kbisect.core.checks import OK, WARN, Check

THRESHOLD = 0.25  # of the host's CPUs, used by others in a window
WINDOW_S = 10.0
QUIET_LIMIT_S = 3600.0  # the longest wait for a quiet host before a retake
PROC = Path("/proc")
HZ = os.sysconf("SC_CLK_TCK")  # the unit of /proc/stat and /proc/<pid>/stat times


@dataclass(frozen=True)
class Point:
    """One reading: seconds, and clock ticks (USER_HZ) summed over every CPU."""

    t: float
    busy: int  # user + nice + system + irq + softirq (guest time is inside user/nice)
    total: int  # busy + idle + iowait + steal
    steal: int
    own: int  # CPU ticks of our process tree (tree_ticks)


def cpu_times(stat: str) -> tuple[int, int, int]:
    """(busy, total, steal) from the `cpu ` line of /proc/stat."""
    for line in stat.splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:]] + [0] * 10
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            busy = user + nice + system + irq + softirq
            return busy, busy + idle + iowait + steal, steal
    raise ValueError("no 'cpu' line in /proc/stat")


def proc_stat(text: str) -> tuple[int, int, int]:
    """(pid, ppid, CPU ticks) from /proc/<pid>/stat: utime + stime, plus cutime + cstime
    (its children that exited and were waited for). The name may hold ') ' itself."""
    head, _, rest = text.rpartition(")")
    f = rest.split()  # f[0] is field 3 (state)
    return int(head.split("(", 1)[0]), int(f[1]), sum(int(x) for x in f[11:15])


def tree_ticks(stats: list[str], root: int) -> int:
    """CPU ticks of `root` and its live descendants among /proc/*/stat texts. A process
    that exits moves its ticks into its parent's cutime/cstime, so the sum only grows."""
    procs = {pid: (ppid, ticks) for pid, ppid, ticks in map(proc_stat, stats)}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo, done = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in procs and pid not in done:
            done.add(pid)
            total += procs[pid][1]
            todo += children.get(pid, [])
    return total


def _windows(points: list[Point], window_s: float) -> list[tuple[Point, Point]]:
    """Consecutive (start, end) pairs at least `window_s` apart (the last may be shorter)."""
    out, start = [], points[0]
    for p in points[1:]:
        if p.t - start.t >= window_s or p is points[-1]:
            out.append((start, p))
            start = p
    return out


def _others(a: Point, b: Point) -> float:
    total = b.total - a.total
    return max(0.0, (b.busy - a.busy) - (b.own - a.own)) / total if total > 0 else 0.0


def summarize(
    points: list[Point],
    loadavg: list[float],
    threshold: float = THRESHOLD,
    window_s: float = WINDOW_S,
) -> dict[str, Any]:
    """The sample's disturbance record from its readings (at least two)."""
    first, last = points[0], points[-1]
    total = last.total - first.total
    busy, own = last.busy - first.busy, last.own - first.own
    peak = max((_others(a, b) for a, b in _windows(points, window_s)), default=0.0)
    return {
        "seconds": round(last.t - first.t, 1),
        "host_busy_share": round(busy / total, 3) if total else 0.0,
        "own_share": round(own / total, 3) if total else 0.0,
        "others_share": round(_others(first, last), 3),
        "own_cpu_s": round(own / HZ, 2),
        "others_cpu_s": round(max(0, busy - own) / HZ, 2),
        "others_peak": round(peak, 3),
        "steal_share": round((last.steal - first.steal) / total, 3) if total else 0.0,
        "loadavg": loadavg,
        "window_s": window_s,
        "threshold": threshold,
        "disturbed": peak > threshold,
    }


def judge(
    host: dict[str, Any] | None,
    fingerprint: dict[str, Any] | None,
    threshold: float,
    here: bool = True,
) -> dict[str, Any] | None:
    """The sample's record: the host's readings, and the machine's own CPUs during the
    measured runs as the harness saw them (`inside`: busy, and stolen by a hypervisor).

    The host's readings decide only when the kernel ran on this host (`here`: vng); a
    machine target runs elsewhere, and the host that drives it over ssh (even a loopback
    VM's host) says nothing of it. Steal time above `threshold` of the machine's CPUs
    disturbs a sample wherever it ran: a cloud VM's neighbours, or a guest's busy host."""
    cpu = (fingerprint or {}).get("cpu_during_runs")
    if host is None and not cpu:
        return host
    record: dict[str, Any] = {**(host or {"threshold": threshold}), "judged_on": "host"}
    disturbed = bool(host and host.get("disturbed"))
    if not here:
        record.update(judged_on="machine", host_disturbed=disturbed)
        disturbed = False
    if cpu:
        stolen = float(cpu.get("steal_share") or 0.0) > threshold
        record["inside"] = {**cpu, "disturbed": stolen}
        disturbed = disturbed or stolen
    record["disturbed"] = disturbed
    return record


def load(d: Mapping[str, Any]) -> float:
    """The share of the CPUs other work took while a sample ran, from its `disturbance`,
    as a model can use it (bisect/posterior/likelihood.py): others' mean share of the host
    where the kernel runs on it, plus the steal time inside the kernel; 0 for a sample
    from before either was kept."""
    host = 0.0 if d.get("judged_on") == "machine" else float(d.get("others_share") or 0.0)
    return round(min(1.0, host + float((d.get("inside") or {}).get("steal_share") or 0.0)), 3)


def loadavg(text: str) -> list[float]:
    return [float(x) for x in text.split()[:3]]


class Monitor:
    """`with Monitor() as m: ...` then `m.result`: the disturbance of what ran inside."""

    def __init__(
        self,
        threshold: float = THRESHOLD,
        window_s: float = WINDOW_S,
        interval: float = 1.0,
        root: int | None = None,
        proc: Path = PROC,
    ) -> None:
        self.threshold, self.window_s, self.interval = threshold, window_s, interval
        self.root, self.proc = root or os.getpid(), proc
        self.points: list[Point] = []
        self.result: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="disturbance", daemon=True)

    def _stats(self) -> list[str]:
        texts = []
        for entry in self.proc.glob("[0-9]*/stat"):
            try:
                texts.append(entry.read_text())
            except OSError:  # gone meanwhile
                continue
        return texts

    def read(self) -> Point:
        busy, total, steal = cpu_times((self.proc / "stat").read_text())
        own = tree_ticks(self._stats(), self.root)
        return Point(time.monotonic(), busy, total, steal, own)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.points.append(self.read())

    def __enter__(self) -> Monitor:
        self.points.append(self.read())
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.points.append(self.read())
        load = loadavg((self.proc / "loadavg").read_text())
        self.result = summarize(self.points, load, self.threshold, self.window_s)


def busy_now(seconds: float = 5.0, threshold: float = THRESHOLD) -> dict[str, Any]:
    """Measure the host for `seconds` with nothing of ours running (start of a run, doctor,
    the wait before a retake)."""
    with Monitor(threshold, window_s=seconds) as m:
        time.sleep(seconds)
    assert m.result is not None
    return m.result


def warning(record: dict[str, Any]) -> str | None:
    """The start-of-run / doctor warning, or None when the host was quiet enough."""
    if not record["disturbed"]:
        return None
    return (
        f"host busy: {record['others_share'] * 100:.0f}% of CPU used by other processes in the "
        f"last {record['seconds']:.0f} s (load average {record['loadavg'][0]:.2f}); samples "
        f"taken now may be disturbed (threshold {record['threshold'] * 100:.0f}%)"
    )


def warn_if_busy(seconds: float = 5.0) -> dict[str, Any]:
    """For the start of a run: measure, warn on stderr when busy; the record either way."""
    record = busy_now(seconds)
    text = warning(record)
    if text:
        progress.warn(text)
    return record


def wait_quiet(
    poll: Callable[[], dict[str, Any]], limit_s: float = QUIET_LIMIT_S, every: int = 6
) -> bool:
    """Before a retake: poll() (a busy_now record) until the host is quiet, with a
    progress line on the first busy poll and every `every` after; give up after `limit_s`
    seconds of waiting (the retake is then judged like any sample). True if quiet."""
    start, n = time.monotonic(), 0
    while (record := poll())["disturbed"]:
        waited = time.monotonic() - start
        if n % every == 0:
            progress.step(
                f"host busy: other work uses {record['others_share'] * 100:.0f}% of the CPUs "
                f"(threshold {record['threshold'] * 100:.0f}%); waiting for it to be quiet "
                f"before the next sample ({waited / 60:.0f} of at most {limit_s / 60:.0f} min; "
                "an interrupted run resumes with --resume)"
            )
        n += 1
        if waited >= limit_s:
            return False
    return True


def check(seconds: float = 5.0) -> Check:
    """`kbisect doctor`'s row: is the host quiet enough to measure on right now?"""
    record = busy_now(seconds)
    text = warning(record)
    share = f"others used {record['others_share'] * 100:.0f}% of the CPUs over {seconds:g} s"
    if text:
        return Check("host load", WARN, text, "wait for the other work to finish, or stop it")
    return Check("host load", OK, f"{share}, load average {record['loadavg'][0]:.2f}")
