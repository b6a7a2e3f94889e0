"""Host disturbance: /proc parsers on saved snippets of this host, the summary rule, and
(marked real) a Monitor around a real CPU hog."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbisect.core import arch
from kbisect.measure import results, sample
from kbisect.measure.record import Sample
from kbisect.scenario import scenario
from kbisect.targets import monitor
from kbisect.targets.base import Kernel, Target
from kbisect.targets.fake.target import FakeTarget
from kbisect.targets.monitor import Point

DATA = Path(__file__).parents[1] / "data" / "proc"


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_cpu_times_from_real_proc_stat():
    busy0, total0, steal0 = monitor.cpu_times(text("stat-0"))
    busy1, total1, _ = monitor.cpu_times(text("stat-1"))
    fields = [int(x) for x in text("stat-0").splitlines()[0].split()[1:]]
    assert busy0 == fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
    assert total0 == busy0 + fields[3] + fields[4] + fields[7]
    assert steal0 == fields[7]
    # saved while a kernel build kept both CPUs busy: idle did not move in 3 s
    assert total1 > total0 and (busy1 - busy0) / (total1 - total0) > 0.95
    with pytest.raises(ValueError, match="no 'cpu' line"):
        monitor.cpu_times("intr 1 2 3\n")


def test_loadavg_from_real_proc_loadavg():
    got = monitor.loadavg(text("loadavg"))
    assert got == [float(x) for x in text("loadavg").split()[:3]] and len(got) == 3


def test_proc_stat_with_a_parenthesis_in_the_name():
    raw = text("pid-odd-name")
    assert raw.split()[1] == "(a)"  # a naive split would be off by one
    fields = raw.split(") ")[-1].split()
    assert monitor.proc_stat(raw) == (
        int(raw.split()[0]),
        int(fields[1]),
        sum(int(x) for x in fields[11:15]),
    )


def test_tree_ticks_sums_the_root_and_its_descendants_only():
    stats = text("all-stat").splitlines()
    root = int(text("all-stat.root"))
    procs = [monitor.proc_stat(s) for s in stats]
    tree = [p for p in procs if p[0] == root or p[1] == root]
    assert len(tree) == 3  # sh and its two sleeps
    assert monitor.tree_ticks(stats, root) == sum(p[2] for p in tree)
    assert monitor.tree_ticks(stats, 1) == sum(p[2] for p in procs if p[0] != 2 and p[1] != 2)
    assert monitor.tree_ticks(stats, 999_999_999) == 0


def point(t: float, busy: int, own: int, total_per_s: int = 200, steal: int = 0) -> Point:
    return Point(t, busy, int(t * total_per_s), steal, own)


def test_summary_of_a_quiet_sample():
    # 2 CPUs at 100 ticks/s: we use one CPU, nothing else runs
    points = [point(t, 100 * t, 100 * t) for t in range(0, 31)]
    got = monitor.summarize(points, [1.0, 1.0, 1.0])
    assert got["host_busy_share"] == got["own_share"] == 0.5
    assert got["others_share"] == got["others_peak"] == 0.0
    assert not got["disturbed"] and got["seconds"] == 30 and got["threshold"] == 0.25


def test_a_hog_for_part_of_a_sample_is_caught_by_its_window():
    # 60 s: we use one CPU; from 20 to 30 s another process takes the second one
    points, busy = [], 0
    for t in range(0, 61):
        points.append(point(t, busy, 100 * t))
        busy += 200 if 20 <= t < 30 else 100
    got = monitor.summarize(points, [2.0, 1.0, 0.5])
    assert got["others_share"] == pytest.approx(1000 / 12000, abs=0.001)  # under the threshold
    assert got["others_peak"] == 0.5 and got["disturbed"]
    assert not monitor.summarize(points, [2.0], threshold=0.6)["disturbed"]


def test_steal_is_reported_apart():
    points = [point(0, 0, 0), point(10, 1000, 1000, steal=400)]
    assert monitor.summarize(points, [0.0])["steal_share"] == 0.2


def test_warning_only_when_disturbed():
    quiet = {"disturbed": False}
    assert monitor.warning(quiet) is None
    busy = {
        "disturbed": True,
        "others_share": 0.374,
        "seconds": 5.0,
        "loadavg": [3.5, 2, 1],
        "threshold": 0.25,
    }
    assert monitor.warning(busy) == (
        "host busy: 37% of CPU used by other processes in the last 5 s (load average 3.50); "
        "samples taken now may be disturbed (threshold 25%)"
    )


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.mark.real
def test_monitor_counts_our_own_children_as_ours_and_a_stranger_as_others():
    """Real /proc: a child of ours spinning is `own` (all of its CPU time, as it used it);
    a process started outside our tree (setsid + double fork, as another user's job would
    be) is `others`."""
    before = os.times()
    with monitor.Monitor(window_s=2.0, interval=0.5) as ours:
        child = multiprocessing.Process(target=_spin, args=(1.5,))
        child.start()
        child.join()
    after = os.times()
    child_cpu = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    assert ours.result is not None and child_cpu > 0.1
    assert ours.result["own_cpu_s"] >= child_cpu - 0.05
    spin = "import time\nend = time.monotonic() + 2.5\nwhile time.monotonic() < end: pass"
    stranger = [
        sys.executable,
        "-c",
        f"import os, subprocess, sys\nif os.fork() == 0:\n os.setsid()\n "
        f"subprocess.Popen([sys.executable, '-c', {spin!r}])",
    ]
    with monitor.Monitor(window_s=2.0, interval=0.5) as theirs:
        subprocess.run(stranger, check=True)
        time.sleep(3.0)
    assert theirs.result is not None
    # own: the two short-lived Pythons that start the stranger (about 0.3 s of CPU on a
    # loaded host, 0.31 once in CI); the stranger's 2.5 s spin counted as ours would exceed 1
    assert theirs.result["others_cpu_s"] > 0.5 and theirs.result["own_cpu_s"] < 1.0


def test_every_sample_records_its_disturbance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """sample.take around a fake target (a real child process) stores the Monitor's record
    (the real one, which reads /proc, in place of the fake target's scripted one)."""
    monkeypatch.setattr(FakeTarget, "monitor", Target.monitor)
    stored: list[Sample] = []
    monkeypatch.setattr(results, "write_sample", lambda _, data: stored.append(data))
    image = tmp_path / "bzImage"
    image.write_text("fake kernel\n")
    target = FakeTarget("fake", arch.get("x86_64"), {"delay_s": 1.5})
    data = sample.take(target, sample.Boot(Kernel.find(image), scenario.load("smoke"), tmp_path))
    record = data.disturbance
    assert record["seconds"] >= 1.5 and record["threshold"] == monitor.THRESHOLD
    assert set(record) >= {
        "host_busy_share",
        "own_share",
        "others_share",
        "others_peak",
        "loadavg",
        "disturbed",
    }
    assert stored == [data]


def test_doctor_row_and_start_of_run_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    quiet = [point(0, 0, 0), point(5, 600, 500)]  # others: 100 of 1000 ticks
    busy = [point(0, 0, 0), point(5, 900, 100)]  # others: 800 of 1000 ticks
    for points, status in ((quiet, "OK"), (busy, "WARN")):
        record = monitor.summarize(points, [1.5, 1.0, 1.0], window_s=5.0)
        monkeypatch.setattr(monitor, "busy_now", lambda seconds, r=record: r)
        row = monitor.check(5.0)
        assert (row.name, row.status) == ("host load", status)
        assert monitor.warn_if_busy(5.0) is record
        err = capsys.readouterr().err
        assert ("host busy: 80% of CPU used by other processes in the last 5 s" in err) == (
            status == "WARN"
        )
    assert row.detail.startswith("host busy: 80%") and row.fix
    monkeypatch.undo()
    assert monitor.check(0.5).name == "host load"  # for real: runs and answers


def test_judge_the_host_where_the_kernel_runs_and_steal_time_everywhere():
    host = {"others_peak": 0.6, "threshold": 0.25, "disturbed": True}
    quiet_inside = {"fingerprint": {"cpu_during_runs": {"seconds": 60, "steal_share": 0.01}}}
    stolen = {"cpu_during_runs": {"seconds": 60, "busy_share": 0.9, "steal_share": 0.4}}
    assert monitor.judge(None, None, 0.25) is None  # an older harness, no monitor
    here = monitor.judge(host, quiet_inside["fingerprint"], 0.25)
    assert here is not None and here["disturbed"] and here["judged_on"] == "host"
    assert here["inside"]["disturbed"] is False
    machine = monitor.judge(host, quiet_inside["fingerprint"], 0.25, here=False)
    assert machine is not None and not machine["disturbed"] and machine["host_disturbed"]
    assert machine["judged_on"] == "machine"
    robbed = monitor.judge({**host, "disturbed": False}, stolen, 0.25, here=False)
    assert robbed is not None and robbed["disturbed"] and robbed["inside"]["steal_share"] == 0.4
    assert not monitor.judge(None, stolen, 0.5)["disturbed"]  # type: ignore[index]


def test_the_wait_for_a_quiet_host_polls_until_quiet_and_gives_up_at_its_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    busy = {"disturbed": True, "others_share": 0.6, "threshold": 0.25}
    quiet = {**busy, "disturbed": False, "others_share": 0.0}
    polls = iter([busy, busy, busy, quiet])
    assert monitor.wait_quiet(lambda: next(polls), every=2)
    assert capsys.readouterr().err.count("waiting for it to be quiet") == 2  # polls 1 and 3
    assert not monitor.wait_quiet(lambda: busy, limit_s=0.0)  # a host busy past the limit
