#!/usr/bin/env python3
"""kbisect guest harness: restore (or build) the database template, run pgbench, report.

Runs inside the booted guest as root, standard library only. Protocol lines on stdout:
  kbisect-guest: phase <init|fio|template|restore|start|warmup|run|profile|stop|done>
  kbisect-guest: tps <value>         (every second of every pgbench run)
  kbisect-guest: result <path>       (the last line)
It writes <out>/guest-result.json atomically and exits 0 (status ok) or 3 (benchmark-failed).
`--host-test --workdir DIR` runs it on a host: no sysctl, no mounts, PGDATA under DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `harness` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.boot import Boot
from harness.proc import HarnessError, say

RESULT = "guest-result.json"
EXIT_OK, EXIT_FAILED = 0, 3


def write_result(out: Path, result: dict[str, Any]) -> Path:
    path = out / RESULT
    tmp = out / f".{RESULT}.{os.getpid()}.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def execute(boot: Boot, result: dict[str, Any]) -> None:
    """Every phase from init to the last run; fills `result`. The caller stops the server."""
    boot.prepare()
    say("phase fio")
    boot.fio()
    boot.database()
    say("phase start")
    boot.start()
    result["runs"] = boot.runs()
    figures = boot.profile()
    if figures is not None:
        result["profile"] = figures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "version": 1,
        "status": "ok",
        "error": None,
        "runs": [],
        "fingerprint": None,
    }
    boot: Boot | None = None
    try:
        say("phase init")
        scenario = json.loads(Path(args.scenario_json).read_text())
        boot = Boot(
            scenario, args.out, args.template_dir, args.workdir, args.host_test, args.pg_bindir
        )
        execute(boot, result)
    except HarnessError as exc:
        result.update(status="benchmark-failed", error=str(exc), runs=[])
    except Exception as exc:  # a harness bug still gives a result, never a number
        result.update(status="benchmark-failed", error=f"harness bug: {exc!r}", runs=[])
    finally:
        say("phase stop")
        if boot is not None:
            boot.stop()
    timings = boot.timings if boot is not None else {}
    result["fingerprint"] = (boot.fp or None) if boot is not None else None
    result["timings"] = {
        "fio_s": None,
        "restore_s": None,
        "init_s": None,
        "bench_s": None,
        **timings,
        "total_s": round(time.monotonic() - began, 3),
    }
    path = write_result(args.out, result)
    say("phase done")
    say(f"result {path}")
    return EXIT_OK if result["status"] == "ok" else EXIT_FAILED


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--scenario-json", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True, help="writable dir for the result")
    p.add_argument("--template-dir", type=Path, required=True)
    p.add_argument(
        "--host-test", action="store_true", help="on a host, for tests: no sysctl writes, no mounts"
    )
    p.add_argument(
        "--workdir",
        type=Path,
        help="where PGDATA goes (a tmpfs is mounted there unless --host-test)",
    )
    p.add_argument("--pg-bindir", type=Path, help="PostgreSQL's bin dir (default: Debian's)")
    args = p.parse_args(argv)
    if args.host_test and args.workdir is None:
        p.error("--host-test needs --workdir")
    return args


if __name__ == "__main__":
    raise SystemExit(main())
