"""The guest's profile (harness/profile.py): perf's command lines, the folding of `perf
script` into folded stacks, the top symbols, and a whole capture with a fake perf."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import profile
from harness.boot import Boot
from harness.proc import HarnessError

DATA = Path(__file__).resolve().parent.parent / "data" / "profile"
FAKE_PERF = Path(__file__).resolve().parent.parent / "fakeperf" / "perf"
OPTIONS = {"seconds": 10, "frequency": 499, "event": "cpu-clock", "call_graph": "fp"}


def test_record_and_script_commands() -> None:
    assert profile.record_cmd("/usr/bin/perf", Path("/o/perf.data"), OPTIONS) == [
        "/usr/bin/perf", "record", "-a", "--call-graph", "fp", "-F", "499", "-e",
        "cpu-clock", "--no-buildid-cache", "-o", "/o/perf.data", "--", "sleep", "10",
    ]  # fmt: skip
    with_delay = profile.record_cmd("perf", Path("d"), OPTIONS, 10_000)
    assert with_delay[-6:] == ["-D", "10000", "-o", "d", "--", "sleep", "20"][-6:]
    assert with_delay[with_delay.index("-D") + 1] == "10000" and with_delay[-1] == "20"
    assert profile.script_cmd("perf", Path("p.data")) == [
        "perf",
        "script",
        "-F",
        "comm,pid,tid,ip,sym,dso",
        "-i",
        "p.data",
    ]


def test_fold_synthetic() -> None:
    stacks = profile.fold((DATA / "synthetic.txt").read_text())
    lock = (
        "postgres;__libc_start_call_main;PostgresMain;ReadBuffer_common;BufferAlloc;"
        "StrategyGetBuffer;s_lock"
    )
    assert stacks == {
        lock: 3,
        "postgres;__libc_start_call_main;PostgresMain;ExecScan;ExecInterpExpr": 2,
        "swapper;cpu_startup_entry;do_idle;default_idle": 1,
    }
    assert profile.folded_text(stacks).splitlines()[-1] == (
        "swapper;cpu_startup_entry;do_idle;default_idle 1"
    )


def test_fold_offsets_unknowns_warnings_and_spaces() -> None:
    text = (
        "Warning:\n1 out of order events recorded.\n"
        "kworker/0:1 H    17/17\n"
        "\tffffffff81000010 worker_thread+0x1c ([kernel.kallsyms])\n"
        "\t    7f0000000123 [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
        "\n"
        "postgres 9\n\t  1234 a;b (/x)\n"
    )
    assert profile.fold(text) == {
        "kworker/0:1 H;[libc.so.6];worker_thread": 1,
        "postgres;a:b": 1,
    }


def test_top_symbols_by_self_share() -> None:
    stacks = profile.fold((DATA / "perf-script-B.txt").read_text())
    top = profile.top_symbols(stacks)
    assert [(t["symbol"], t["self_pct"]) for t in top] == [
        ("s_lock", 55.0),
        ("ExecInterpExpr", 25.0),
        ("default_idle", 15.0),
        ("[libc.so.6]", 5.0),
    ]
    assert len(profile.top_symbols(stacks, limit=2)) == 2


def test_real_capture_folds_every_sample() -> None:
    """perf script's head as the real guest printed it (docs/profiles.md)."""
    text = (DATA / "perf-script.txt").read_text()
    stacks = profile.fold(text)
    headers = sum(
        1 for i, line in enumerate(text.splitlines()[:-1])
        if line and not line[0].isspace() and text.splitlines()[i + 1].startswith("\t")
    )  # fmt: skip
    assert sum(stacks.values()) == headers > 50
    assert all(";" in stack for stack in stacks)


def test_run_seconds_makes_room_for_the_slice() -> None:
    assert profile.run_seconds(30, 10) == 30
    assert profile.run_seconds(5, 10) == 14


def test_capture_with_a_fake_perf(tmp_path: Path) -> None:
    out = tmp_path / "boot-B"
    out.mkdir()
    figures = profile.capture(str(FAKE_PERF), out, OPTIONS, 0, lambda: {"tps": 123.4})
    assert figures["samples"] == 100
    assert figures["top"][0] == {"symbol": "s_lock", "samples": 55, "self_pct": 55.0}
    assert figures["run"] == {"tps": 123.4, "latency_avg_ms": None, "transactions": None}
    assert figures["perf_data"] == "perf.data"  # small: kept
    folded = (out / profile.FOLDED).read_text().splitlines()
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded) == 100
    assert (out / profile.SCRIPT_HEAD).read_text().startswith("postgres")


def test_the_run_starts_only_once_perf_records(tmp_path: Path) -> None:
    """perf's start takes seconds under TCG: the run must not begin before it."""
    fake = tmp_path / "perf"
    mark = tmp_path / "perf-ready"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in record) python3 -c "import time; time.sleep(1)"; touch '
        + str(mark)
        + "; sleep 0.5;;\n"
        "script) cat " + str(DATA / "synthetic.txt") + ";;\nesac\n"
    )
    fake.chmod(0o755)
    seen: list[bool] = []

    def workload() -> dict[str, float]:
        seen.append(mark.exists())
        return {"tps": 1.0}

    figures = profile.capture(str(fake), tmp_path, OPTIONS, 0, workload)
    assert seen == [True]
    assert figures["samples"] > 0


def test_a_perf_that_never_gets_ready_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "perf"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")  # never runs its workload
    fake.chmod(0o755)
    monkeypatch.setattr(profile, "START_TIMEOUT_S", 0.5)
    ran: list[int] = []

    def workload() -> dict[str, float]:
        ran.append(1)
        return {}

    with pytest.raises(HarnessError, match="did not start within"):
        profile.capture(str(fake), tmp_path, OPTIONS, 0, workload)
    assert ran == []


def test_a_failed_perf_record_fails_the_boot(tmp_path: Path) -> None:
    fake = tmp_path / "perf"
    fake.write_text("#!/bin/sh\necho 'perf: no such event' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(HarnessError, match="perf record failed: perf: no such event"):
        profile.capture(str(fake), tmp_path, OPTIONS, 0, lambda: {"tps": 1.0})


def test_boot_without_perf_is_refused_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profile, "find_perf", lambda: None)
    scenario: dict[str, Any] = {
        "postgres": {"major": 17, "settings": {}},
        "profile": {**OPTIONS, "enabled": True},
    }
    boot = Boot(scenario, tmp_path, tmp_path, tmp_path / "w", host_test=True)
    with pytest.raises(HarnessError, match=r"profile\.enabled needs perf"):
        boot._perf()
    scenario["profile"]["enabled"] = False
    assert boot._perf() is None
