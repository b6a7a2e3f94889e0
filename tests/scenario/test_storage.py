"""[storage] and [fio] in scenarios and their kernel fragments (the host side of a vng
guest's disk: tests/targets/test_vng_disks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import storage as guest_storage
from kbisect.core import paths
from kbisect.kernel import kconfig
from kbisect.scenario import scenario, storage
from kbisect.scenario.fields import ScenarioError

# The hashes the shipped scenarios had before [storage] and [fio] existed (commit 771de85),
# when every guest ran the host's PostgreSQL (15), and the pins that say so today.
# simple-update-2vcpu (32521c58378b) and its -hugepages twin (3a2e4dfa8d73) have changed on
# purpose since: a 10 s warm-up (tests/scenario/test_profile.py HASHES has their hashes).
OLD_HASHES = {
    "m8g-7dadeaa6e851": ("5429926fd211", 17),
    "smoke": ("939d902907b8", 15),
}


def smoke(*overrides: str) -> scenario.Scenario:
    return scenario.load("smoke").with_overrides(list(overrides))


def error(*overrides: str) -> str:
    with pytest.raises(ScenarioError) as info:
        smoke(*overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_shipped_scenarios_keep_their_hashes_and_are_tmpfs_without_fio():
    for name, (prefix, major) in OLD_HASHES.items():
        s = scenario.load(name).with_overrides(["postgres.source=host", f"postgres.major={major}"])
        assert s.hash.startswith(prefix), name
        assert not scenario.load(name).hash.startswith(prefix), name  # an image's server
        assert s.data["storage"] == {"kind": "tmpfs"}
        assert s.data["fio"]["enabled"] is False


def test_the_io_bound_pair_puts_more_data_than_memory_on_storage_with_fio():
    for name in ("io-bound-2vcpu", "m8g-io-bound"):
        s = scenario.load(name)
        assert s.data["storage"]["kind"] in ("disk", "path") and s.data["fio"]["enabled"]
        data_mb = s.get("pgbench.scale") * 15  # pgbench: about 15 MB per scale unit
        assert data_mb > s.get("guest.memory_mb"), name
    assert scenario.load("io-bound-2vcpu").data["storage"]["size_gb"] * 1024 > 3 * 100 * 15


def test_a_disk_fills_in_its_defaults_and_changes_the_hash():
    s = smoke('storage.kind="disk"')
    assert s.data["storage"] == {
        "kind": "disk",
        "backing": "file",
        "size_gb": 4,
        "fs": "ext4",
        "mount_options": "",
        "cache": "none",
    }
    assert s.data["fio"] == {"enabled": False, **storage.FIO}  # smoke says off
    assert s.hash != smoke().hash
    assert smoke('storage.kind="disk"', 'storage.fs="xfs"').hash != s.hash
    assert smoke('storage.kind="disk"', "fio.enabled=true").hash != s.hash


def test_fio_defaults_on_for_a_disk_in_a_scenario_that_does_not_say(tmp_path: Path):
    text = (paths.scenarios_dir() / "simple-update-2vcpu.toml").read_text()
    path = tmp_path / "simple-update-2vcpu.toml"
    path.write_text(text + '\n[storage]\nkind = "disk"\nsize_gb = 2\n')
    s = scenario.load(str(path))
    assert s.data["fio"] == {"enabled": True, "seconds": 2, "size_mb": 16}
    assert s.data["storage"]["size_gb"] == 2


def test_a_device_disk_and_a_path():
    s = smoke('storage.kind="disk"', 'storage.backing="device"', 'storage.device="/dev/sdb"')
    assert s.data["storage"]["device"] == "/dev/sdb" and "size_gb" not in s.data["storage"]
    s = smoke('storage.kind="path"', 'storage.path="/srv/pg"')
    assert s.data["storage"] == {"kind": "path", "path": "/srv/pg"}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (['storage.kind="nfs"'], "storage.kind must be one of tmpfs, disk, path"),
        (['storage.kind="disk"', 'storage.fs="btrfs"'], "storage.fs must be one of ext4, xfs"),
        (['storage.kind="disk"', "storage.size_gb=0"], "storage.size_gb must be 1 to 65536"),
        (["storage.size_gb=2"], 'storage.size_gb does not go with storage.kind = "tmpfs"'),
        (['storage.kind="path"'], 'storage.kind = "path" needs storage.path'),
        (['storage.kind="path"', 'storage.path="srv"'], "storage.path must be an absolute path"),
        (['storage.kind="disk"', 'storage.backing="device"'], "needs storage.device"),
        (
            ['storage.kind="disk"', 'storage.device="/dev/sdb"'],
            'storage.device does not go with storage.backing = "file"',
        ),
        (
            [
                'storage.kind="disk"',
                'storage.backing="device"',
                'storage.device="/dev/sdb"',
                "storage.size_gb=3",
            ],
            'storage.size_gb does not go with storage.backing = "device"',
        ),
        (
            ['storage.kind="disk"', 'storage.mount_options="noatime, nobarrier"'],
            "storage.mount_options must be comma-separated mount options",
        ),
        (['storage.kind="disk"', "storage.throttle_iops=0"], "storage.throttle_iops must be 1"),
        (["fio.seconds=0"], "fio.seconds must be 1 to 600"),
        (["fio.size_mb=8"], "fio.size_mb must be 16 to 65536"),
        (["fio.enabled=1"], "fio.enabled must be a boolean"),
        (["storage.speed=1"], "unknown field storage.speed"),
    ],
)
def test_bad_storage_is_one_line_naming_the_field(overrides: list[str], expected: str):
    message = error(*overrides)
    assert expected in message and message.startswith("smoke.toml with "), message


def test_kernel_fragments_come_with_the_filesystem():
    assert scenario.kernel_fragments(smoke()) == []
    assert scenario.kernel_fragments(smoke('storage.kind="disk"')) == []
    xfs = smoke('storage.kind="disk"', 'storage.fs="xfs"')
    assert scenario.kernel_fragments(xfs) == ["xfs"]
    # and the name resolves to a shipped fragment that sets XFS, which base/ no longer does
    frags = kconfig.resolve(scenario.kernel_fragments(xfs), "x86_64")
    assert frags[-1].name == "xfs.config" and frags[-1].settings["CONFIG_XFS_FS"] == "y"
    base = kconfig.resolve([], "x86_64")
    assert all("CONFIG_XFS_FS" not in f.settings for f in base)
    assert [f.settings["CONFIG_INET"] for f in base if "CONFIG_INET" in f.settings] == ["n"]
    assert any(f.settings.get("CONFIG_EXT4_FS") == "y" for f in base)


def test_postgresql_14_and_older_get_ipv4():
    assert scenario.kernel_fragments(smoke("postgres.major=14")) == ["inet"]
    both = smoke("postgres.major=13", 'storage.kind="disk"', 'storage.fs="xfs"')
    assert scenario.kernel_fragments(both) == ["xfs", "inet"]
    assert scenario.kernel_fragments(smoke("postgres.major=15")) == []
    [inet] = kconfig.resolve(["inet"], "x86_64")[-1:]
    assert inet.settings["CONFIG_INET"] == "y"


def test_the_host_and_the_guest_agree_on_the_serial():
    assert storage.SERIAL == guest_storage.SERIAL
    assert len(storage.SERIAL) <= 20  # virtio-blk keeps 20 bytes of a serial
