"""The host side of a vng guest's data disk: which disk, whether this host can give it
(refused in the vng target's preflight, before any boot), and its file for one boot."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from kbisect.core import paths
from kbisect.core.exceptions import UserError
from kbisect.scenario import scenario
from kbisect.scenario.storage import SERIAL
from kbisect.targets import registry
from kbisect.targets.vng import disks
from kbisect.targets.vng.command import Disk
from tests.targets.test_vng_target import refused_before_boot


def smoke(*overrides: str) -> scenario.Scenario:
    return scenario.load("smoke").with_overrides(list(overrides))


FILE_DISK = ('storage.kind="disk"', "storage.size_gb=2")
DEVICE = ('storage.kind="disk"', 'storage.backing="device"')


def test_vng_disks_per_kind(tmp_path: Path):
    boot_dir = tmp_path / "boots" / "123-A"
    assert disks.vng_disks(smoke().data, boot_dir) == []
    [disk] = disks.vng_disks(smoke(*FILE_DISK).data, boot_dir)
    assert disk == Disk(paths.cache_dir() / "disks" / "123-A.raw", SERIAL, 2, "none")
    s = smoke(
        *DEVICE,
        'storage.device="/dev/sdb"',
        "storage.throttle_iops=200",
        'storage.cache="writeback"',
    )
    [disk] = disks.vng_disks(s.data, boot_dir)
    assert (disk.path, disk.size_gb, disk.iops, disk.cache) == (
        Path("/dev/sdb"),
        None,
        200,
        "writeback",
    )
    with pytest.raises(UserError, match="needs a machine target"):
        disks.vng_disks(smoke('storage.kind="path"', 'storage.path="/srv"').data, boot_dir)


def test_attached_makes_a_sparse_file_for_the_boot_and_deletes_it(tmp_path: Path):
    disk = Disk(tmp_path / "disks" / "b.raw", SERIAL, size_gb=2)
    device = Disk(tmp_path / "dev", SERIAL)  # given: never made nor deleted
    device.path.write_bytes(b"x")
    with disks.attached([disk, device]):
        st = disk.path.stat()
        assert st.st_size == 2 * 2**30 and st.st_blocks * 512 < 2**20
    assert not disk.path.exists() and device.path.read_bytes() == b"x"
    with pytest.raises(RuntimeError), disks.attached([disk]):
        raise RuntimeError("boot failed")
    assert not disk.path.exists()


def test_device_problems(tmp_path: Path):
    assert "No such file" in str(disks.device_problem(tmp_path / "none", ""))
    (tmp_path / "f").write_text("")
    assert "is not a block device" in str(disks.device_problem(tmp_path / "f", ""))
    loops = sorted(Path("/dev").glob("loop[0-9]*"))
    if not loops or not os.access(loops[0], os.W_OK):
        pytest.skip("no writable /dev/loopN to stand for a block device")
    dev = loops[0]
    assert disks.device_problem(dev, "/dev/vda / ext4 rw 0 0\n") is None
    mounted = f"{dev} /mnt ext4 rw 0 0\n"
    assert "is mounted on this host" in str(disks.device_problem(dev, mounted))


def test_check_host_wants_room_for_the_file():
    disks.check_host(smoke('storage.kind="disk"', "storage.size_gb=1").data)
    with pytest.raises(UserError, match=r"storage\.size_gb = 65536 but .* GB free"):
        disks.check_host(smoke('storage.kind="disk"', "storage.size_gb=65536").data)
    with pytest.raises(UserError, match=r"storage\.device /dev/kbisect-none: No such file"):
        disks.check_host(smoke(*DEVICE, 'storage.device="/dev/kbisect-none"').data)
    disks.check_host(smoke().data)  # tmpfs: nothing to check


# -- the guard is real: the vng target's preflight refuses, before any boot -------------


class Usage(NamedTuple):
    total: int
    used: int
    free: int


def refused(overrides: tuple[str, ...]) -> str:
    """The preflight's one line for this storage."""
    with pytest.raises(UserError) as info:
        registry.get("vng").preflight(smoke(*overrides))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_preflight_refuses_a_file_disk_larger_than_the_free_space(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2**40, 2**40 - 2**30, 2**30))
    assert refused(FILE_DISK) == (
        f"storage.size_gb = 2 but {paths.cache_dir() / 'disks'} has 1.0 GB free"
    )
    registry.get("vng").preflight(smoke('storage.kind="disk"', "storage.size_gb=1"))


def test_preflight_refuses_an_absent_device_or_one_that_is_not_a_block_device(
    tmp_path: Path,
) -> None:
    absent = tmp_path / "sdz"
    assert refused((*DEVICE, f'storage.device="{absent}"')) == (
        f"storage.device {absent}: No such file or directory"
    )
    plain = tmp_path / "plain"
    plain.write_text("")
    assert refused((*DEVICE, f'storage.device="{plain}"')) == (
        f"storage.device {plain} is not a block device"
    )


def test_preflight_refuses_a_path_storage_a_guest_cannot_have() -> None:
    assert refused(('storage.kind="path"', 'storage.path="/srv/pg"')) == disks.NO_PATH


def test_kbisect_run_stops_in_preflight_with_one_line_and_no_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "sdz"
    sets = [*DEVICE, f'storage.device="{absent}"']
    argv = [x for item in sets for x in ("--set", item)]
    assert refused_before_boot(tmp_path, monkeypatch, capsys, *argv) == (
        f"kbisect: storage.device {absent}: No such file or directory"
    )
