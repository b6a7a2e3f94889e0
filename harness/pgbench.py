"""pgbench command lines, and the parser for its output (PostgreSQL 13 to 17 wording).

Vacuum handling: every boot restores a template that `pgbench -i` already vacuumed and
checkpointed. With `pgbench.vacuum = true` (the default) pgbench does its usual pre-run
step before *each* run: VACUUM of pgbench_branches and pgbench_tellers and TRUNCATE of
pgbench_history, so warm-up and measured runs start from the same small-table state.
`vacuum = false` passes `-n` (no pre-run vacuum) for scripts that manage that themselves.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.proc import HarnessError

_PROGRESS = re.compile(r"^progress: (\d+(?:\.\d+)?) s, (-?nan|\d+(?:\.\d+)?) tps\b")
_TPS = re.compile(  # PG 14+ wording, then PG 13's
    r"^tps = (\d+(?:\.\d+)?) "
    r"\((?:without initial connection time|excluding connections establishing)\)"
)
_LAT_AVG = re.compile(r"^latency average = (\d+(?:\.\d+)?) ms")
_LAT_SD = re.compile(r"^latency stddev = (\d+(?:\.\d+)?) ms")
_FAILED = re.compile(r"^number of failed transactions: (\d+)")
_PROCESSED = re.compile(r"^number of transactions actually processed: (\d+)")
_ERROR = re.compile(r"^pgbench: (?:error|fatal): (.*)")


def init_cmd(bindir: Path, conn: list[str], scale: int, fillfactor: int) -> list[str]:
    """Create and fill the pgbench tables (`-q`: one progress line every 5 s)."""
    return [
        str(bindir / "pgbench"),
        *conn,
        "-i",
        "-q",
        "-s",
        str(scale),
        "-F",
        str(fillfactor),
        "postgres",
    ]


def run_cmd(bindir: Path, conn: list[str], bench: dict[str, Any], script: Path | None) -> list[str]:
    """One timed run: `-P 1` progress every second, `-M` the scenario's protocol."""
    what = ["-f", str(script)] if script is not None else ["-b", str(bench["builtin"])]
    cmd = [
        str(bindir / "pgbench"),
        *conn,
        *what,
        "-c",
        str(bench["clients"]),
        "-j",
        str(bench["threads"]),
        "-T",
        str(bench["duration_s"]),
        "-M",
        str(bench["protocol"]),
        "-P",
        "1",
    ]
    if not bench.get("vacuum", True):
        cmd.append("-n")
    return [*cmd, "postgres"]


def progress_tps(line: str) -> float | None:
    """The tps of one `progress: 3.0 s, 5318.1 tps, ...` line, else None."""
    m = _PROGRESS.match(line.strip())
    if m is None:
        return None
    value = float(m.group(2))
    return 0.0 if value != value else value  # a second with no transaction prints nan


def _first(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    for line in lines:
        m = pattern.match(line)
        if m:
            return m.group(1)
    return None


def first_error(output: str) -> str | None:
    """The first server `ERROR:` (the root cause), else the first `pgbench: error:` message,
    whitespace collapsed into one line."""
    server = re.search(r"\bERROR:\s+(.+)", output)
    if server:
        return "ERROR: " + " ".join(server.group(1).split())
    found = _first(_ERROR, [line.strip() for line in output.splitlines()])
    return None if found is None else " ".join(found.split())


def _failed(failed: str | None, processed: str | None) -> int | None:
    # PG <= 14 prints no failure count: there a failed transaction aborts the run instead.
    if failed is not None:
        return int(failed)
    return 0 if processed is not None else None


def parse_report(output: str) -> dict[str, Any]:
    """tps, latencies, counts and the per-second series of one run's output."""
    lines = [line.strip() for line in output.splitlines()]
    if any("Run was aborted" in line for line in lines):
        raise HarnessError(first_error(output) or "pgbench: run was aborted")
    tps = _first(_TPS, lines)
    if tps is None:
        raise HarnessError("pgbench printed no final `tps = ...` line")
    if float(tps) <= 0:
        raise HarnessError("pgbench reported 0 tps")
    avg, sd = _first(_LAT_AVG, lines), _first(_LAT_SD, lines)
    failed, processed = _first(_FAILED, lines), _first(_PROCESSED, lines)
    series = [v for v in (progress_tps(line) for line in lines) if v is not None]
    return {
        "tps": float(tps),
        "latency_avg_ms": None if avg is None else float(avg),
        "latency_stddev_ms": None if sd is None else float(sd),
        "failed_transactions": _failed(failed, processed),
        "transactions": None if processed is None else int(processed),
        "series": series,
    }
