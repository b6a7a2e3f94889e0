#!/usr/bin/env python3
"""kbisect guest harness: restore (or build) the database template, run pgbench, report.

Runs inside the booted guest as root, standard library only. Protocol lines on stdout:
  kbisect-guest: phase <init|restore|start|warmup|run|stop|done>
  kbisect-guest: tps <value>         (every second of every pgbench run)
  kbisect-guest: result <path>       (the last line)
It writes <out>/guest-result.json atomically and exits 0 (status ok) or 3 (benchmark-failed).
`--host-test --workdir DIR` runs it on a host: no sysctl, no mounts, PGDATA under DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `harness` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import fingerprint, pgbench, proc, system, template
from harness.postgres import (
    FINGERPRINT_SETTINGS,
    PG_ROOT,
    Server,
    conn_args,
    initdb_args,
    initdb_cmd,
    installed_majors,
    settings_sql,
    version_error,
)
from harness.proc import Account, HarnessError

GUEST_WORKDIR = Path("/tmp/kbisect-pg")
RESULT = "guest-result.json"
EXIT_OK, EXIT_FAILED = 0, 3


def say(message: str) -> None:
    print(f"kbisect-guest: {message}", flush=True)


def echo(line: str) -> None:
    print(line, flush=True)


def get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise HarnessError(f"scenario JSON lacks {dotted}")
        node = node[part]
    return node


def last_error_line(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() or "fatal" in ln.lower()]
    return " ".join((errors or lines or ["no output"])[-1].split())


class Harness:
    def __init__(self, args: argparse.Namespace, scenario: dict[str, Any]) -> None:
        self.args, self.scenario = args, scenario
        self.out: Path = args.out
        self.host_test: bool = args.host_test
        self.workdir: Path = args.workdir if args.host_test else GUEST_WORKDIR
        self.major = int(get(scenario, "postgres.major"))
        self.bindir = PG_ROOT / str(self.major) / "bin"
        self.pgdata, self.sockdir = self.workdir / "pgdata", self.workdir / "sock"
        self.settings: dict[str, Any] = dict(get(scenario, "postgres.settings"))
        self.server: Server | None = None
        self.account: Account | None = None
        self.fp: dict[str, Any] = {}
        self.timings: dict[str, float | None] = {"restore_s": None, "init_s": None, "bench_s": None}

    # -- init: check versions, prepare the system, fingerprint ---------------------------
    def prepare(self) -> None:
        if not self.host_test:
            self._prepare_guest()
        self.fp.update(fingerprint.system(self._dmesg))
        error = version_error(self.major, installed_majors(PG_ROOT))
        if error:
            raise HarnessError(error)
        self.account = Account.lookup("postgres") if system.is_root() else None
        for path in (self.workdir / "pgdata", self.sockdir):
            if path.exists():
                shutil.rmtree(path)
        self.sockdir.mkdir(parents=True, mode=0o700)
        self._own(self.sockdir)
        problem = system.pgdata_fs_error(self.workdir.resolve(), system.proc_mounts())
        if problem and not self.host_test:
            raise HarnessError(problem)
        if problem:
            echo(f"[harness] warning: {problem}")
        version = proc.run([str(self.bindir / "postgres"), "--version"], timeout=60)
        self.fp["pg_version"] = fingerprint.pg_version(version.output)

    def _prepare_guest(self) -> None:
        if not system.is_root():
            raise HarnessError("the guest harness must run as root (or pass --host-test)")
        system.ensure_dev_shm()
        system.mount_debugfs()
        guest = get(self.scenario, "guest")
        if int(guest.get("hugepages", 0)) > 0:
            system.reserve_hugepages(int(guest["hugepages"]))
        if guest.get("thp"):
            system.set_thp(str(guest["thp"]))
        system.mount_tmpfs(self.workdir, int(guest["pgdata_size_mb"]))

    def _dmesg(self) -> str | None:
        done = proc.run(["dmesg"], timeout=60)
        return done.output if done.returncode == 0 else None

    def _own(self, path: Path) -> None:
        if self.account is not None:
            os.chown(path, self.account.uid, self.account.gid)

    def _new_server(self) -> Server:
        port = int(get(self.scenario, "postgres.port"))
        return Server(
            self.bindir, self.pgdata, self.sockdir, port, self.account, self.out / "postgres.log"
        )

    # -- restore (or build) the database ---------------------------------------------------
    def database(self) -> None:
        bench = get(self.scenario, "pgbench")
        name = template.key(
            self.major,
            int(bench["scale"]),
            int(bench["fillfactor"]),
            initdb_args(self.major),
            platform.machine(),
        )
        archive = template.find(self.args.template_dir, name)
        if archive is None:
            began = time.monotonic()
            self._build_template(name)
            self.timings["init_s"] = round(time.monotonic() - began, 3)
        say("phase restore")
        if archive is not None:
            began = time.monotonic()
            echo(f"[harness] restoring template {archive}")
            template.restore(archive, self.pgdata, self.account)
            self.timings["restore_s"] = round(time.monotonic() - began, 3)

    def _build_template(self, name: str) -> None:
        echo(f"[harness] no template {name}: initdb + pgbench -i")
        self.pgdata.mkdir(mode=0o700)
        self._own(self.pgdata)
        self._step(initdb_cmd(self.bindir, self.pgdata, self.major), "initdb")
        self.server = self._new_server()
        self.server.start(self.settings)
        bench = get(self.scenario, "pgbench")
        conn = conn_args(self.sockdir, self.server.port)
        self._step(
            pgbench.init_cmd(self.bindir, conn, int(bench["scale"]), int(bench["fillfactor"])),
            "pgbench -i",
            "pgbench-init.log",
        )
        self.server.psql("CHECKPOINT")
        clean, self.server = self.server.stop(), None
        if not clean:
            raise HarnessError("PostgreSQL did not shut down cleanly after pgbench -i")
        saved = template.save(self.pgdata, self.args.template_dir, name)
        echo(f"[harness] saved template {saved}")

    def _step(self, cmd: list[str], what: str, log: str | None = None) -> proc.Done:
        done = proc.run(cmd, account=self.account, cwd=str(self.sockdir), on_line=echo)
        if log:
            (self.out / log).write_text(done.output)
        if done.returncode != 0:
            raise HarnessError(f"{what} exited {done.returncode}: {last_error_line(done.output)}")
        return done

    # -- start, fingerprint the server -----------------------------------------------------
    def start(self) -> None:
        before = fingerprint.meminfo(fingerprint.read("/proc/meminfo") or "")
        self.server = self._new_server()
        self.server.start(self.settings)
        after = fingerprint.meminfo(fingerprint.read("/proc/meminfo") or "")
        names = sorted({*self.settings, *FINGERPRINT_SETTINGS})
        self.fp["pg_settings"] = fingerprint.pg_settings(self.server.psql(settings_sql(names)))
        self.fp["hugepages_free"] = after.get("HugePages_Free")
        smaps = fingerprint.read(f"/proc/{self.server.pid}/smaps")
        setting = self.fp["pg_settings"].get("huge_pages", str(self.settings["huge_pages"]))
        self.fp["huge_pages_used"] = fingerprint.huge_pages_used(setting, before, after, smaps)

    # -- warm-up and measured runs -----------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        bench = get(self.scenario, "pgbench")
        script = self._script(bench)
        warmups, measured = int(bench["warmup_runs"]), int(bench["runs"])
        began, runs = time.monotonic(), []
        say("phase warmup")
        for index in range(warmups + measured):
            if index == warmups:
                say("phase run")
            runs.append(self._run(index, index < warmups, bench, script))
        self.timings["bench_s"] = round(time.monotonic() - began, 3)
        return runs

    def _script(self, bench: dict[str, Any]) -> Path | None:
        if not bench.get("script"):
            return None
        copy = self.sockdir / "script.sql"  # readable by the postgres user, wherever it was
        shutil.copyfile(bench["script"], copy)
        copy.chmod(0o644)
        return copy

    def _run(
        self, index: int, warmup: bool, bench: dict[str, Any], script: Path | None
    ) -> dict[str, Any]:
        assert self.server is not None
        cmd = pgbench.run_cmd(self.bindir, conn_args(self.sockdir, self.server.port), bench, script)

        def on_line(line: str) -> None:
            echo(line)
            tps = pgbench.progress_tps(line)
            if tps is not None:
                say(f"tps {tps:.1f}")

        done = proc.run(
            cmd,
            account=self.account,
            cwd=str(self.sockdir),
            on_line=on_line,
            timeout=2 * int(bench["duration_s"]) + 300,
        )
        (self.out / f"pgbench-run-{index}.log").write_text(done.output)
        if done.returncode != 0:
            why = pgbench.first_error(done.output) or last_error_line(done.output)
            raise HarnessError(f"pgbench run {index} exited {done.returncode}: {why}")
        report = pgbench.parse_report(done.output)
        return {"index": index, "warmup": warmup, **report}

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


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


def execute(harness: Harness, result: dict[str, Any]) -> None:
    """Every phase from init to the last run; fills `result`. The caller stops the server."""
    harness.prepare()
    harness.database()
    say("phase start")
    harness.start()
    result["runs"] = harness.runs()


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
    harness: Harness | None = None
    try:
        say("phase init")
        harness = Harness(args, json.loads(Path(args.scenario_json).read_text()))
        execute(harness, result)
    except HarnessError as exc:
        result.update(status="benchmark-failed", error=str(exc), runs=[])
    except Exception as exc:  # a harness bug still gives a result, never a number
        result.update(status="benchmark-failed", error=f"harness bug: {exc!r}", runs=[])
    finally:
        say("phase stop")
        if harness is not None:
            harness.stop()
    timings = harness.timings if harness is not None else {}
    result["fingerprint"] = (harness.fp or None) if harness is not None else None
    result["timings"] = {
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
    p.add_argument("--workdir", type=Path, help="with --host-test: where PGDATA goes")
    args = p.parse_args(argv)
    if args.host_test and args.workdir is None:
        p.error("--host-test needs --workdir")
    return args


if __name__ == "__main__":
    raise SystemExit(main())
