"""The guest harness: pgbench output parsing (saved real PG 15 outputs), its pure helpers,
and (marked real) whole runs on this host with `--host-test` and real PostgreSQL."""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import boot, fingerprint, guest, pgbench, postgres, proc, system, template
from harness.proc import Account, HarnessError
from kbisect.core import clock, paths
from kbisect.core import proc as host_proc
from kbisect.measure import results
from kbisect.scenario import scenario

DATA = Path(__file__).parents[1] / "data" / "pgbench"
PG15 = Path("/usr/lib/postgresql/15/bin/postgres")


def out(name: str) -> str:
    return (DATA / name).read_text()


# -- pgbench output ---------------------------------------------------------------------


def test_parse_pg15_simple_update_prepared():
    report = pgbench.parse_report(out("pg15-simple-update-prepared.out"))
    assert report == {
        "tps": 5165.458014,
        "latency_avg_ms": 0.766,
        "latency_stddev_ms": 1.046,
        "failed_transactions": 0,
        "transactions": 25834,
        "series": [3631.7, 5175.2, 5318.1, 5595.7, 6097.0],
    }


def test_parse_pg15_select_only_and_tpcb():
    select = pgbench.parse_report(out("pg15-select-only-simple.out"))
    assert (select["tps"], select["series"]) == (21738.085623, [22829.5, 20719.6, 21540.8])
    tpcb = pgbench.parse_report(out("pg15-tpcb-like-extended.out"))
    assert (tpcb["tps"], tpcb["latency_avg_ms"], len(tpcb["series"])) == (1525.602548, 2.615, 5)


def test_aborted_run_is_an_error_with_the_server_message():
    with pytest.raises(HarnessError) as info:
        pgbench.parse_report(out("pg15-aborted-bad-sql.out"))
    assert str(info.value) == 'ERROR: column "nonexistent_column" does not exist'


PG14_TAIL = """\
progress: 1.0 s, 3631.7 tps, lat 1.087 ms stddev 0.787
progress: 2.0 s, 5175.2 tps, lat 0.769 ms stddev 0.980
number of transactions actually processed: 8806
latency average = 0.766 ms
latency stddev = 1.046 ms
initial connection time = 6.215 ms
tps = 4405.458014 (without initial connection time)
"""
PG13_TAIL = """\
progress: 1.0 s, 100.0 tps, lat 1.0 ms stddev 0.5
number of transactions actually processed: 100
latency average = 1.000 ms
tps = 99.000000 (including connections establishing)
tps = 100.000000 (excluding connections establishing)
"""
PG17_RETRIES = "progress: 3.0 s, 5318.1 tps, lat 0.743 ms stddev 1.097, 0 failed, 2 retried\n"


def test_older_and_newer_wordings():
    # Hand-written from the PG 13/14/17 formats (only PG 15 is installed here).
    pg14 = pgbench.parse_report(PG14_TAIL)
    assert (pg14["tps"], pg14["failed_transactions"], pg14["series"]) == (
        4405.458014,
        0,
        [3631.7, 5175.2],
    )
    assert pgbench.parse_report(PG13_TAIL)["tps"] == 100.0
    assert pgbench.progress_tps(PG17_RETRIES) == 5318.1
    assert pgbench.progress_tps("progress: 4.0 s, nan tps, lat nan ms stddev nan") == 0.0
    assert pgbench.progress_tps("starting vacuum...end.") is None


def test_unparsable_or_zero_output_is_an_error():
    with pytest.raises(HarnessError, match="no final"):
        pgbench.parse_report("pgbench (15.18)\nsomething else\n")
    with pytest.raises(HarnessError, match="0 tps"):
        pgbench.parse_report("tps = 0.000000 (without initial connection time)\n")


def test_pgbench_command_lines():
    bench = {"builtin": "simple-update", "clients": 4, "threads": 2, "duration_s": 5}
    bench |= {"protocol": "prepared", "vacuum": True}
    conn = ["-h", "/s", "-p", "5432", "-U", "postgres"]
    cmd = pgbench.run_cmd(Path("/pg/bin"), conn, bench, None)
    tail = ["-T", "5", "-M", "prepared", "-P", "1", "postgres"]
    assert cmd == ["/pg/bin/pgbench", *conn, "-b", "simple-update", "-c", "4", "-j", "2", *tail]
    no_vacuum = pgbench.run_cmd(Path("/b"), conn, bench | {"vacuum": False}, Path("/w/s.sql"))
    assert no_vacuum[-2:] == ["-n", "postgres"] and "-f" in no_vacuum and "-b" not in no_vacuum
    init = pgbench.init_cmd(Path("/b"), conn, 8470, 90)
    assert init[-7:] == ["-i", "-q", "-s", "8470", "-F", "90", "postgres"]


# -- PostgreSQL, template, fingerprint, mounts --------------------------------------------


def test_version_check(tmp_path):
    for major in ("15", "16"):
        (tmp_path / major / "bin").mkdir(parents=True)
        (tmp_path / major / "bin" / "postgres").touch()
    (tmp_path / "17").mkdir()  # no binaries: not installed
    assert postgres.installed_majors(tmp_path) == [15, 16]
    assert postgres.version_error(17, [15]) == "scenario pins PostgreSQL 17 but the guest has 15"
    assert postgres.version_error(17, []) == "scenario pins PostgreSQL 17 but the guest has none"
    assert postgres.version_error(15, [15, 16]) is None


def test_server_command_line_and_initdb():
    cmd = postgres.server_cmd(Path("/b"), Path("/d"), Path("/s"), 5433, {"fsync": False})
    assert cmd[:3] == ["/b/postgres", "-D", "/d"]
    assert cmd[3:5] == ["-c", "fsync=off"]
    assert "listen_addresses=" in cmd and "unix_socket_directories=/s" in cmd
    assert "port=5433" in cmd
    assert "--no-data-checksums" in postgres.initdb_args(18)
    assert "--no-data-checksums" not in postgres.initdb_args(15)
    log = "2026-11-22 04:11:00.888 UTC [1] LOG: x\n2026-11-22 04:11:00.888 UTC [1] FATAL:  no"
    assert postgres.last_fatal(log + " memory\nLOG: y\n") == "FATAL: no memory"
    assert postgres.last_fatal("LOG: fine\n") is None
    hp = postgres.huge_pages_needed_cmd(Path("/b"), Path("/d"), Path("/s"), 1, {})
    assert hp[-2:] == ["-C", "shared_memory_size_in_huge_pages"]


def test_template_key_names_what_it_depends_on():
    key = template.key(15, 10, 100, postgres.initdb_args(15), "x86_64")
    assert key.startswith("pg15-x86_64-s10-ff100-")
    assert key == template.key(15, 10, 100, postgres.initdb_args(15), "x86_64")
    assert key != template.key(15, 10, 100, [*postgres.initdb_args(15), "-k"], "x86_64")


@pytest.mark.parametrize("zstd", [True, False])
@pytest.mark.parametrize("gnu_tar", [True, False])
def test_template_save_and_restore(tmp_path, monkeypatch, zstd, gnu_tar):
    if zstd and shutil.which("zstd") is None:
        pytest.skip("zstd not installed")
    real_which = shutil.which
    hidden = set() if zstd else {"zstd"}
    monkeypatch.setattr(shutil, "which", lambda n, **k: None if n in hidden else real_which(n, **k))
    pgdata = tmp_path / "pgdata"
    (pgdata / "base" / "1").mkdir(parents=True)
    (pgdata / "base" / "1" / "1259").write_bytes(os.urandom(5000))
    (pgdata / "PG_VERSION").write_text("15\n")
    pgdata.chmod(0o700)
    saved = template.save(pgdata, tmp_path / "tpl", "k")
    assert saved.name == ("k.tar.zst" if zstd else "k.tar.gz")
    assert template.find(tmp_path / "tpl", "k") == saved
    assert [p.name for p in (tmp_path / "tpl").iterdir()] == [saved.name]  # no temp left
    if not gnu_tar:
        hidden.add("tar")
    ran: list[list[str]] = []
    real_run = proc.run

    def recording_run(cmd: list[str], **kwargs: Any) -> proc.Done:
        ran.append(cmd)
        return real_run(cmd, **kwargs)

    monkeypatch.setattr(proc, "run", recording_run)
    restored = tmp_path / "restored"
    template.restore(saved, restored, None)
    assert (restored / "base" / "1" / "1259").read_bytes() == (
        pgdata / "base" / "1" / "1259"
    ).read_bytes()
    assert (restored.stat().st_mode & 0o777) == 0o700
    assert [Path(c[0]).name for c in ran] == (["tar"] if gnu_tar else [])


def test_template_restore_reports_a_corrupt_archive(tmp_path):
    bad = tmp_path / "k.tar.gz"
    bad.write_bytes(b"not a tarball")
    with pytest.raises(HarnessError, match=r"k\.tar\.gz"):
        template.restore(bad, tmp_path / "restored", None)


def test_template_restore_chowns_to_the_account(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to chown")
    pgdata = tmp_path / "pgdata"
    (pgdata / "base").mkdir(parents=True)
    (pgdata / "base" / "f").write_text("x")
    saved = template.save(pgdata, tmp_path / "tpl", "k")
    restored = tmp_path / "restored"
    template.restore(saved, restored, Account(name="nobody", uid=65534, gid=65534))
    assert {p.stat().st_uid for p in (restored, restored / "base", restored / "base" / "f")} == {
        65534
    }


def test_fingerprint_parsers():
    assert fingerprint.preempt_from_debugfs("none voluntary (full) lazy\n") == "full"
    assert fingerprint.preempt_from_debugfs("") is None
    log = "6,1,0,-;Dynamic Preempt: voluntary\n6,2,0,-;Dynamic Preempt: lazy\n"
    assert fingerprint.preempt_from_log(log) == "lazy"
    assert fingerprint.bracketed("always [madvise] never") == "madvise"
    mem = fingerprint.meminfo("MemTotal:  1024 kB\nHugePages_Total:  64\nHugepagesize: 2048 kB\n")
    assert mem == {"MemTotal": 1024, "HugePages_Total": 64, "Hugepagesize": 2048}
    version = "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n"
    assert fingerprint.pg_version(version) == "15.18 (Debian 15.18-0+deb12u1)"
    assert fingerprint.pg_settings("a=1\nhuge_pages=off\n") == {"a": "1", "huge_pages": "off"}


def test_huge_pages_used():
    free = {"HugePages_Free": 64, "HugePages_Rsvd": 0}
    reserved = {"HugePages_Free": 64, "HugePages_Rsvd": 38}
    smaps = "7f00-7f40 rw-s 0 00:0f 1 /anon_hugepage (deleted)\nKernelPageSize:     2048 kB\n"
    assert fingerprint.huge_pages_used("off", free, reserved, None) is None
    assert fingerprint.huge_pages_used("on", free, reserved, None) is True
    assert fingerprint.huge_pages_used("try", free, free, "KernelPageSize: 4 kB\n") is False
    assert fingerprint.huge_pages_used("try", free, free, smaps) is True


MOUNTS = """\
rootfs / 9p ro,trans=virtio 0 0
tmpfs /tmp tmpfs rw 0 0
kbisect-pgdata /tmp/kbisect-pg tmpfs rw,size=512m 0 0
/dev/vda /data ext4 rw 0 0
host /data/shared\\040dir 9p rw 0 0
"""


def test_pgdata_must_be_tmpfs_or_a_block_device():
    table = system.mounts(MOUNTS)
    assert ("host", "/data/shared dir", "9p") in table
    assert system.filesystem_of(Path("/tmp/kbisect-pg/pgdata"), table) == (
        "kbisect-pgdata",
        "tmpfs",
    )
    assert system.pgdata_fs_error(Path("/tmp/kbisect-pg/pgdata"), table) is None
    assert system.pgdata_fs_error(Path("/data/pg"), table) is None
    assert system.pgdata_fs_error(Path("/home/pg"), table) == (
        "PGDATA /home/pg is on 9p (rootfs), not on tmpfs or a block device"
    )
    assert "on 9p (host)" in (system.pgdata_fs_error(Path("/data/shared dir/x"), table) or "")


def test_read_only_tmp_names_the_missing_overlay(tmp_path, monkeypatch):
    # A kernel without overlayfs leaves the guest's /tmp read-only (vng's overlay fails).
    def read_only(self, *args, **kwargs):
        raise OSError(30, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(HarnessError) as err:
        system.mount_tmpfs(tmp_path / "kbisect-pg", 64)
    message = str(err.value)
    assert "Read-only file system" in message and "CONFIG_OVERLAY_FS" in message
    assert "\n" not in message


def test_harness_uses_only_the_standard_library():
    allowed = set(sys.stdlib_module_names) | {"harness", "__future__"}
    for path in paths.harness_dir().glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_bad_scenario_json_still_gives_a_failed_result(tmp_path, capsys):
    (tmp_path / "s.json").write_text("{}")
    argv = ["--scenario-json", str(tmp_path / "s.json"), "--out", str(tmp_path / "out")]
    argv += ["--template-dir", str(tmp_path / "t"), "--host-test", "--workdir", str(tmp_path)]
    assert guest.main(argv) == guest.EXIT_FAILED
    result = json.loads((tmp_path / "out" / "guest-result.json").read_text())
    assert result["status"] == "benchmark-failed" and result["runs"] == []
    assert result["error"] == "scenario JSON lacks postgres.major"
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"kbisect-guest: result {tmp_path / 'out' / 'guest-result.json'}"
    assert "kbisect-guest: phase done" in lines


def test_account_lookup_of_a_missing_user():
    assert Account.lookup(None) is None
    with pytest.raises(HarnessError, match="does not exist"):
        Account.lookup("no-such-user-kbisect")


# -- real runs on this host --------------------------------------------------------------


@pytest.fixture(scope="module")
def dirs() -> Iterator[Path]:
    """A work dir the `postgres` user can reach (pytest's tmp dirs are root-only)."""
    if not PG15.exists():
        pytest.skip("PostgreSQL 15 is not installed")
    top = Path(tempfile.mkdtemp(prefix="kbisect-harness-"))
    top.chmod(0o755)
    (top / "work").mkdir(mode=0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


# The harness tests run guest.py on this host (--host-test): its own PostgreSQL, Debian 12's.
HOST_PG = ("postgres.source=host", "postgres.major=15")


def on_host(name: str) -> scenario.Scenario:
    return scenario.load(name).with_overrides(list(HOST_PG))


def run_guest(
    top: Path, s: scenario.Scenario, name: str, templates: str = "templates"
) -> tuple[int, list[str], dict[str, Any]]:
    (top / f"{name}.json").write_text(s.to_json())
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    cmd = [
        python,
        str(paths.harness_dir() / "guest.py"),
        "--scenario-json",
        str(top / f"{name}.json"),
    ]
    cmd += ["--out", str(top / name), "--template-dir", str(top / templates)]
    cmd += ["--host-test", "--workdir", str(top / "work")]
    done = host_proc.run(cmd, capture=True, check=False, timeout=120)
    result = json.loads((top / name / "guest-result.json").read_text())
    return done.returncode, done.output.splitlines(), result


def as_sample(result: dict[str, Any], s: scenario.Scenario) -> dict[str, Any]:
    """Wrap a guest result the way the host does, to check it fits the sample schema."""
    measured = [r["tps"] for r in result["runs"] if not r["warmup"]]
    return {
        "version": 1,
        "kind": "sample",
        "created": clock.utc_now(),
        "command": "kbisect run",
        "label": "A",
        "scenario": {"name": s.name, "hash": s.hash, "settings": s.data},
        "kernel": {
            "image": "bzImage",
            "release": None,
            "commit": None,
            "config_hash": None,
            "manifest": None,
        },
        "append": "",
        "accel": "tcg",
        "status": result["status"],
        "error": result["error"],
        "tps": sum(measured) / len(measured) if measured else None,
        "runs": result["runs"],
        "fingerprint": result["fingerprint"],
        "timings": {"boot_s": 1.0, **result["timings"]},
    }


def check_ok(
    code: int, lines: list[str], result: dict[str, Any], s: scenario.Scenario, made: bool = False
) -> None:
    """`made`: this boot made the data set's template (its own phase, before the restore)."""
    assert code == 0, lines[-20:]
    assert result["status"] == "ok" and result["error"] is None
    phases = [ln.split()[-1] for ln in lines if ln.startswith("kbisect-guest: phase ")]
    template = ["template"] if made else []
    assert phases == ["init", "fio", *template, "restore", "start", "warmup", "run", "stop", "done"]
    assert lines[-1].startswith("kbisect-guest: result ")
    assert sum(ln.startswith("kbisect-guest: tps ") for ln in lines) >= 8
    duration = s.get("pgbench.duration_s")
    assert [r["warmup"] for r in result["runs"]] == [True, False]
    for run in result["runs"]:
        assert run["tps"] > 0 and run["latency_avg_ms"] > 0
        assert abs(len(run["series"]) - duration) <= 1
    fp = result["fingerprint"]
    assert fp["pg_version"].startswith("15")
    assert fp["pg_settings"]["shared_buffers"] == "32MB"
    assert fp["pg_settings"]["max_wal_size"] == "128MB"  # a scenario setting, really applied
    assert fp["huge_pages_used"] is None  # huge_pages = off
    assert fp["nproc"] >= 1 and fp["mem_total_kb"] > 0 and fp["uname_r"]
    results.validate(as_sample(result, s), "sample")


@pytest.mark.real
def test_smoke_builds_the_template_then_restores_it(dirs):
    smoke = on_host("smoke")
    code, lines, first = run_guest(dirs, smoke, "first", "smoke-templates")
    check_ok(code, lines, first, smoke, made=True)
    assert first["timings"]["init_s"] > 0 and first["timings"]["restore_s"] is None
    assert len(list((dirs / "smoke-templates").glob("pg15-*.tar.*"))) == 1
    code, lines, second = run_guest(dirs, smoke, "second", "smoke-templates")
    check_ok(code, lines, second, smoke)
    assert second["timings"]["restore_s"] > 0 and second["timings"]["init_s"] is None
    assert (dirs / "second" / "pgbench-run-1.log").read_text().count("progress:") >= 4


@pytest.mark.real
def test_a_pinned_major_the_root_lacks_fails_clearly(dirs):
    s = scenario.load("smoke").with_overrides(["postgres.source=host", "postgres.major=18"])
    code, lines, result = run_guest(dirs, s, "pg18")
    assert code == 3
    assert result["status"] == "benchmark-failed"
    assert result["error"] == "scenario pins PostgreSQL 18 but the guest has 15"
    assert result["runs"] == [] and "tps" not in json.dumps(result["runs"])
    assert not any(ln.startswith("kbisect-guest: tps") for ln in lines)
    results.validate(as_sample(result, s), "sample")


@pytest.mark.real
def test_pgbench_failure_gives_no_number(dirs, tmp_path):
    (tmp_path / "bad.sql").write_text("SELECT nonexistent_column FROM pgbench_accounts;\n")
    text = (paths.scenarios_dir() / "smoke.toml").read_text()
    text = text.replace('builtin = "simple-update"', 'script = "bad.sql"')
    (tmp_path / "smoke.toml").write_text(text)
    s = scenario.load(str(tmp_path / "smoke.toml")).with_overrides(
        ["pgbench.duration_s=2", *HOST_PG]
    )
    code, _, result = run_guest(dirs, s, "badsql")
    assert code == 3
    assert result["status"] == "benchmark-failed" and result["runs"] == []
    assert result["error"] == (
        'pgbench run 0 exited 2: ERROR: column "nonexistent_column" does not exist'
    )
    results.validate(as_sample(result, s), "sample")


def test_cpu_during_runs_from_two_proc_stat_readings():
    data = Path(__file__).parents[1] / "data" / "proc"
    before = fingerprint.cpu_times((data / "stat-0").read_text())
    after = fingerprint.cpu_times((data / "stat-1").read_text())
    assert before is not None and after is not None and after[1] > before[1]
    got = fingerprint.cpu_during(before, after, 61.04, "1.50 0.90 0.40 3/200 999\n")
    assert got is not None and 0 <= got["busy_share"] <= 1 and got["steal_share"] == 0.0
    assert got["seconds"] == 61.0 and got["loadavg"] == [1.5, 0.9, 0.4]
    # a guest whose hypervisor took a third of its CPUs
    stolen = fingerprint.cpu_during((100, 1000, 0), (400, 1900, 300), 9.0, None)
    assert stolen == {"seconds": 9.0, "busy_share": 0.333, "steal_share": 0.333, "loadavg": None}
    assert fingerprint.cpu_during(None, after, 1.0, None) is None
    assert fingerprint.cpu_times("intr 1 2\n") is None


def test_warm_up_runs_take_their_own_length(tmp_path, monkeypatch):
    from kbisect.scenario import scenario

    data = scenario.load("smoke").with_overrides(["pgbench.warmup_runs=2", "pgbench.warmup_s=3"])
    b = boot.Boot(json.loads(data.to_json()), tmp_path, tmp_path / "t", tmp_path / "w")
    asked = []

    def run(index, warmup, bench, script):
        asked.append((index, warmup, bench["duration_s"]))
        return {"index": index, "warmup": warmup, "tps": 1.0}

    monkeypatch.setattr(b, "_run", run)
    runs = b.runs()
    duration = data.get("pgbench.duration_s")
    assert asked == [(0, True, 3), (1, True, 3), (2, False, duration)]
    assert [r["warmup"] for r in runs] == [True, True, False]
