"""The guest's fio preflight and storage helpers: command lines, saved real fio 3.33 JSON
(tests/data/fio/, from `harness.fio.preflight` on this host), disk lookup, mkfs, mounts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import fio, storage
from harness.proc import HarnessError

DATA = Path(__file__).parents[1] / "data" / "fio"


def doc(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text())
    return loaded


def test_command_runs_three_jobs_one_after_the_other():
    cmd = fio.command("/usr/bin/fio", Path("/pg/fio"), 3, 64, Path("/out/fio-1.json"))
    assert cmd[:3] == ["/usr/bin/fio", "--output-format=json", "--output=/out/fio-1.json"]
    names = [a.split("=", 1)[1] for a in cmd if a.startswith("--name=")]
    assert names == ["wal", "randread", "randwrite"]
    first = cmd.index("--name=wal")
    glob = cmd[:first]
    for option in (
        "--directory=/pg/fio",
        "--runtime=3",
        "--time_based",
        "--bs=8k",
        "--ioengine=psync",
        "--size=64m",
    ):
        assert option in glob
    # every job after the first waits for the one before (stonewall), none before
    jobs = " ".join(cmd[first:]).split("--name=")[1:]
    assert ["--stonewall" in job for job in jobs] == [False, True, True]
    assert "--fdatasync=1" in jobs[0] and "--overwrite=1" in jobs[0]  # lays the file out
    assert "--filename=kbisect-fio.dat" in glob and not any("--size" in j for j in jobs)
    assert "--direct=1" in jobs[1] and "--rw=randread" in jobs[1]
    assert "--direct=1" in jobs[2] and "--fsync=32" in jobs[2]


def test_figures_from_real_fio_on_ext4():
    raw = doc("ext4-host.json")
    wal_job = next(j for j in raw["jobs"] if j["jobname"] == "wal")
    assert wal_job["sync"]["total_ios"] == 0  # the fio 3.33 pitfall: count from lat_ns.N
    got = fio.figures(raw)
    assert got["version"] == "fio-3.33"
    wal = got["wal"]
    assert wal["syncs"] == wal_job["sync"]["lat_ns"]["N"] > 0
    runtime_s = wal_job["write"]["runtime"] / 1000
    assert wal["syncs_per_s"] == pytest.approx(wal["syncs"] / runtime_s, abs=0.1)
    p = wal_job["sync"]["lat_ns"]["percentile"]
    assert wal["sync_p50_us"] == pytest.approx(p["50.000000"] / 1000, abs=0.1)
    assert wal["sync_p99_us"] == pytest.approx(p["99.000000"] / 1000, abs=0.1)
    assert 0 < wal["sync_p50_us"] <= wal["sync_p99_us"]
    for name, side in (("randread", "read"), ("randwrite", "write")):
        job = next(j for j in raw["jobs"] if j["jobname"] == name)
        assert got[name]["iops"] == pytest.approx(job[side]["iops"], abs=0.1)
        pct = job[side]["clat_ns"]["percentile"]
        assert got[name]["clat_p99_us"] == pytest.approx(pct["99.000000"] / 1000, abs=0.1)


def test_tmpfs_is_orders_of_magnitude_faster_than_the_disk():
    disk, ram = fio.figures(doc("ext4-host.json")), fio.figures(doc("tmpfs-host.json"))
    assert ram["wal"]["syncs_per_s"] > 100 * disk["wal"]["syncs_per_s"]
    assert ram["randread"]["clat_p99_us"] < disk["randread"]["clat_p99_us"]


def test_a_missing_job_or_no_json_is_a_harness_error(tmp_path: Path):
    raw = doc("ext4-host.json")
    raw["jobs"] = raw["jobs"][:1]
    with pytest.raises(HarnessError, match="no job 'randread'"):
        fio.figures(raw)
    bad = tmp_path / "fio-1.json"
    bad.write_text("fio: pid=0, err=2/file:filesetup.c:1 No such file\n")
    with pytest.raises(HarnessError, match=r"fio wrote no JSON to fio-1\.json"):
        fio.load(bad)
    noisy = tmp_path / "fio-2.json"
    noisy.write_text(
        "note: both iodepth >= 1 and synchronous I/O engine are selected\n"
        + (DATA / "ext4-host.json").read_text()
    )
    assert fio.load(noisy)["fio version"] == "fio-3.33"


@pytest.mark.real
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_preflight_runs_fio_for_real_and_cleans_up(tmp_path: Path):
    got = fio.preflight(tmp_path / "scratch", tmp_path, 1, 1, 16)
    assert got["wal"]["syncs"] > 0 and got["randread"]["iops"] > 0
    assert got["json"] == "fio-1.json" and (tmp_path / "fio-1.json").is_file()
    assert got["seconds"] == 1 and got["total_s"] >= 3  # three one-second jobs
    assert not (tmp_path / "scratch").exists()


# -- harness/storage.py -------------------------------------------------------------------


def test_find_disk_by_sysfs_serial_then_by_id(tmp_path: Path):
    sys_block, by_id = tmp_path / "block", tmp_path / "by-id"
    for name, serial in (("vda", "other"), ("vdb", storage.SERIAL)):
        (sys_block / name).mkdir(parents=True)
        (sys_block / name / "serial").write_text(serial + "\n")
    assert storage.find_disk(storage.SERIAL, sys_block, by_id) == Path("/dev/vdb")
    (sys_block / "vdb" / "serial").write_text("x\n")
    by_id.mkdir()
    (tmp_path / "vdc").write_text("")
    (by_id / f"virtio-{storage.SERIAL}").symlink_to(tmp_path / "vdc")
    assert storage.find_disk(storage.SERIAL, sys_block, by_id) == tmp_path / "vdc"
    (by_id / f"virtio-{storage.SERIAL}").unlink()
    with pytest.raises(HarnessError, match="block devices: vda, vdb; is CONFIG_VIRTIO_BLK"):
        storage.find_disk(storage.SERIAL, sys_block, by_id)


def test_kernel_fs_error_names_the_config_symbol():
    text = "nodev\tsysfs\nnodev\ttmpfs\n\text4\n"
    assert storage.kernel_fs_error("ext4", text) is None
    assert storage.kernel_fs_error("xfs", text) == (
        "the kernel has no xfs filesystem: build it with CONFIG_XFS_FS (kbisect build --config xfs)"
    )


def test_mkfs_and_mount_commands():
    dev, point = Path("/dev/vdb"), Path("/tmp/kbisect-pg")
    ext4 = storage.mkfs_cmd("/sbin/mkfs.ext4", "ext4", dev)
    assert ext4[0] == "/sbin/mkfs.ext4" and ext4[-1] == "/dev/vdb" and "-F" in ext4
    assert "lazy_itable_init=0,lazy_journal_init=0" in ext4
    assert storage.mkfs_cmd("/sbin/mkfs.xfs", "xfs", dev) == [
        "/sbin/mkfs.xfs",
        "-f",
        "-q",
        "/dev/vdb",
    ]
    assert storage.mount_cmd("xfs", dev, point, "") == [
        "mount",
        "-t",
        "xfs",
        "/dev/vdb",
        "/tmp/kbisect-pg",
    ]
    assert storage.mount_cmd("ext4", dev, point, "noatime")[3:5] == ["-o", "noatime"]


def test_a_missing_mkfs_is_one_line_naming_the_package(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(storage, "TOOL_PATH", "/nonexistent")
    with pytest.raises(HarnessError, match=r"^mkfs.xfs is not installed .*\(package xfsprogs\)$"):
        storage._tool("xfs")


def test_mount_entry_is_the_longest_mount_holding_the_path():
    mounts = (
        "/dev/root / 9p ro,relatime 0 0\n"
        "kbisect-pgdata /tmp/kbisect-pg tmpfs rw,size=524288k 0 0\n"
        "/dev/vdb /tmp/kbisect-pg ext4 rw,noatime 0 0\n"
    )
    got = storage.mount_entry(Path("/tmp/kbisect-pg"), mounts)
    assert got == {"device": "/dev/vdb", "fs": "ext4", "mount_options": "rw,noatime"}
    assert storage.mount_entry(Path("/usr/lib"), mounts)["fs"] == "9p"
    assert storage.mount_entry(Path("/x"), "")["fs"] is None


def test_workdir_and_section_defaults():
    assert storage.section({}) == {"kind": "tmpfs"}
    default = Path("/tmp/kbisect-pg")
    assert storage.workdir({"kind": "disk"}, default) == default
    assert storage.workdir({"kind": "path", "path": "/srv/pg"}, default) == Path("/srv/pg")


@pytest.fixture
def loop_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 1 GiB sparse file on a loop device, standing for the guest's virtio disk."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup")
    backing = tmp_path / "disk.raw"
    with backing.open("wb") as f:
        f.truncate(2**30)
    done = subprocess.run(
        ["losetup", "--find", "--show", str(backing)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"losetup: {done.stderr.strip()}")
    device = Path(done.stdout.strip())
    monkeypatch.setattr(storage, "find_disk", lambda serial: device)
    yield device
    subprocess.run(["losetup", "--detach", str(device)], check=False)


@pytest.mark.real
@pytest.mark.parametrize("fs", ["ext4", "xfs"])
def test_prepare_formats_mounts_describes_and_unmounts_for_real(
    fs: str, loop_disk: Path, tmp_path: Path
) -> None:
    if shutil.which(f"mkfs.{fs}", path=storage.TOOL_PATH) is None:
        pytest.skip(f"mkfs.{fs} not installed")
    if storage.kernel_fs_error(fs, Path("/proc/filesystems").read_text()):
        pytest.skip(f"this host's kernel has no {fs}")
    point = tmp_path / "pg"
    spec = {"kind": "disk", "fs": fs, "mount_options": "noatime", "backing": "file", "size_gb": 1}
    storage.prepare(spec, point, 64)
    try:
        got = storage.describe(spec, point)
        assert (got["device"], got["fs"]) == (str(loop_disk), fs)
        assert "noatime" in got["mount_options"].split(",")
        (point / "probe").write_text("x")
    finally:
        assert storage.unmount(point) is None
    assert not (point / "probe").exists()  # it was on the disk, now unmounted
