"""One boot's measurement: prepare the guest, restore (or build) the database, start
PostgreSQL, run pgbench, stop. `guest.py` drives it and writes the result."""

from __future__ import annotations

import os
import platform
import shutil
import time
from pathlib import Path
from typing import Any

from harness import fingerprint, fio, pgbench, proc, profile, storage, system, template
from harness.postgres import (
    FINGERPRINT_SETTINGS,
    PG_ROOT,
    Server,
    conn_args,
    huge_pages_needed_cmd,
    initdb_args,
    initdb_cmd,
    installed_majors,
    settings_sql,
    version_error,
)
from harness.proc import Account, HarnessError, echo, last_error_line, say

GUEST_WORKDIR = Path("/tmp/kbisect-pg")


def get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise HarnessError(f"scenario JSON lacks {dotted}")
        node = node[part]
    return node


class Boot:
    """One boot's measurement, phase by phase; `stop()` is safe to call at any point."""

    def __init__(
        self,
        scenario: dict[str, Any],
        out: Path,
        template_dir: Path,
        workdir: Path | None,
        host_test: bool | None = None,
        bindir: Path | None = None,
    ) -> None:
        """`workdir`: where PGDATA goes (None: in the guest or on a machine, PGDATA's
        filesystem at GUEST_WORKDIR, or the scenario's storage.path). `host_test`
        (default: a workdir was given): touch nothing on the system. `bindir`:
        PostgreSQL's programs (None: Debian's layout for the pinned major)."""
        self.scenario, self.out, self.template_dir = scenario, out, template_dir
        self.host_test = workdir is not None if host_test is None else host_test
        self.storage = storage.section(scenario)
        self.workdir = (
            workdir if workdir is not None else storage.workdir(self.storage, GUEST_WORKDIR)
        )
        self.mounted = False  # a disk this boot formatted and mounted (unmounted by stop)
        self.major = int(get(scenario, "postgres.major"))
        self.bindir = bindir or PG_ROOT / str(self.major) / "bin"
        self.own_bindir = bindir is not None
        self.pgdata, self.sockdir = self.workdir / "pgdata", self.workdir / "sock"
        self.settings: dict[str, Any] = dict(get(scenario, "postgres.settings"))
        self.server: Server | None = None
        self.account: Account | None = None
        self.fp: dict[str, Any] = {}
        self.perf: str | None = None  # perf's path when this boot is profiled
        self.timings: dict[str, float | None] = dict.fromkeys(
            ("fio_s", "restore_s", "init_s", "bench_s")
        )

    # -- init: check versions, prepare the system, fingerprint ---------------------------
    def prepare(self) -> None:
        try:
            if not self.host_test:
                self._prepare_guest()
        finally:  # a failed preparation still says what the guest looked like
            self.fp.update(fingerprint.system(self._dmesg))
        found = [self.major] if (self.bindir / "postgres").exists() else []
        error = version_error(self.major, found if self.own_bindir else installed_majors(PG_ROOT))
        if error:
            raise HarnessError(error)
        self.account = Account.lookup("postgres") if system.is_root() else None
        self.perf = self._perf()
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
        self.fp["storage"] = {**storage.describe(self.storage, self.workdir), "fio": None}
        version = proc.run([str(self.bindir / "postgres"), "--version"], timeout=60)
        self.fp["pg_version"] = fingerprint.pg_version(version.output)
        self.fp["pg_binary_sha256"] = fingerprint.file_sha256(self.bindir / "postgres")

    def _perf(self) -> str | None:
        """perf, when this boot is profiled: checked before anything runs."""
        if not (self.scenario.get("profile") or {}).get("enabled"):
            return None
        perf = profile.find_perf()
        if perf is None:
            raise HarnessError(profile.missing_perf())
        return perf

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
        storage.prepare(self.storage, self.workdir, int(guest["pgdata_size_mb"]))
        self.mounted = self.storage["kind"] == "disk"

    def _dmesg(self) -> str | None:
        try:
            done = proc.run(["dmesg"], timeout=60)
        except HarnessError:  # no dmesg: the preemption model stays unknown
            return None
        return done.output if done.returncode == 0 else None

    def _own(self, path: Path) -> None:
        if self.account is not None:
            os.chown(path, self.account.uid, self.account.gid)

    def _new_server(self) -> Server:
        port = int(get(self.scenario, "postgres.port"))
        return Server(
            self.bindir, self.pgdata, self.sockdir, port, self.account, self.out / "postgres.log"
        )

    # -- fio: what the PGDATA filesystem does, before anything else writes to it -------------
    def fio(self) -> None:
        options = self.scenario.get("fio") or {}
        if not options.get("enabled"):
            return
        echo("[harness] fio preflight on the PGDATA filesystem")
        figures = fio.preflight(
            self.workdir / "fio", self.out, 1, int(options["seconds"]), int(options["size_mb"])
        )
        self.fp["storage"]["fio"] = figures
        self.timings["fio_s"] = figures["total_s"]

    # -- restore (or build) the database ---------------------------------------------------
    def database(self) -> None:
        bench = get(self.scenario, "pgbench")
        name = template.key(
            self.major,
            int(bench["scale"]),
            int(bench["fillfactor"]),
            initdb_args(self.major),
            platform.machine(),
            get(self.scenario, "postgres").get("build"),
        )
        archive = template.find(self.template_dir, name)
        if archive is None:
            say("phase template")  # the first boot of a data set: initdb and pgbench -i
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
        saved = template.save(self.pgdata, self.template_dir, name)
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
        try:
            self.server.start(self.settings)
        except HarnessError as exc:
            raise HarnessError(f"{exc}{self._huge_pages_hint(before)}") from exc
        after = fingerprint.meminfo(fingerprint.read("/proc/meminfo") or "")
        names = sorted({*self.settings, *FINGERPRINT_SETTINGS})
        self.fp["pg_settings"] = fingerprint.pg_settings(self.server.psql(settings_sql(names)))
        self.fp["pg_server"] = self.server.psql("SELECT version()").strip() or None
        self.fp["hugepages_free"] = after.get("HugePages_Free")
        smaps = fingerprint.read(f"/proc/{self.server.pid}/smaps")
        setting = self.fp["pg_settings"].get("huge_pages", str(self.settings["huge_pages"]))
        self.fp["huge_pages_used"] = fingerprint.huge_pages_used(setting, before, after, smaps)

    def _huge_pages_hint(self, meminfo: dict[str, int]) -> str:
        if self.settings.get("huge_pages") != "on":
            return ""
        cmd = huge_pages_needed_cmd(
            self.bindir, self.pgdata, self.sockdir, int(get(self.scenario, "postgres.port")),
            self.settings,
        )  # fmt: skip
        done = proc.run(cmd, account=self.account, cwd=str(self.sockdir), timeout=60)
        needed = done.output.strip() if done.returncode == 0 else "?"
        free = meminfo.get("HugePages_Free", 0)
        return f" (huge_pages=on needs {needed} huge pages, {free} free: raise guest.hugepages)"

    # -- warm-up and measured runs -----------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        bench = get(self.scenario, "pgbench")
        script = self._script(bench)
        warmups, measured = int(bench["warmup_runs"]), int(bench["runs"])
        began, runs = time.monotonic(), []
        cpu, measured_from = None, began
        say("phase warmup")
        for index in range(warmups + measured):
            if index == warmups:
                say("phase run")
                cpu, measured_from = self._cpu(), time.monotonic()
            warmup = index < warmups
            length = bench.get("warmup_s") if warmup else None  # a shorter warm-up run
            run_bench = {**bench, "duration_s": length} if length else bench
            runs.append(self._run(index, warmup, run_bench, script))
        self.fp["cpu_during_runs"] = fingerprint.cpu_during(
            cpu, self._cpu(), time.monotonic() - measured_from, fingerprint.read("/proc/loadavg")
        )
        self.timings["bench_s"] = round(time.monotonic() - began, 3)
        return runs

    def profile(self) -> dict[str, Any] | None:
        """One extra run, profiled (harness/profile.py); its figures, never a tps sample."""
        if self.perf is None:
            return None
        say("phase profile")
        options = get(self.scenario, "profile")
        bench = dict(get(self.scenario, "pgbench"))
        bench["duration_s"] = profile.run_seconds(int(bench["duration_s"]), int(options["seconds"]))
        script = self._script(bench)
        index = int(bench["warmup_runs"]) + int(bench["runs"])
        began = time.monotonic()
        figures = profile.capture(
            self.perf,
            self.out,
            options,
            bench["duration_s"],
            lambda: self._run(index, False, bench, script),
        )
        self.timings["profile_s"] = round(time.monotonic() - began, 3)
        return figures

    @staticmethod
    def _cpu() -> tuple[int, int, int] | None:
        return fingerprint.cpu_times(fingerprint.read("/proc/stat"))

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
        if self.mounted:
            self.mounted = False
            problem = storage.unmount(self.workdir)
            if problem:
                echo(f"[harness] warning: cannot unmount {self.workdir}: {problem}")
