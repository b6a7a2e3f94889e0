"""core/debroot.py, the one root-fs builder: the mmdebstrap command and the files both
`kbisect image` and `kbisect emu image` leave in the cache (mmdebstrap, mkfs.ext4 and
ssh-keygen stood in for)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kbisect.core import arch, debroot, proc
from kbisect.core.exceptions import MissingTool, UserError
from kbisect.scenario import server
from kbisect.targets.emu import image, where
from kbisect.targets.vng import rootfs
from tests.targets.images import fake_root


def test_the_command_puts_hooks_before_the_suite_and_the_mirror_last() -> None:
    cmd = debroot.mmdebstrap_command(
        arch="arm64",
        variant="apt",
        packages=["a", "b"],
        output=Path("/t"),
        hooks=[("essential", "echo 1"), ("customize", "echo 2")],
        mirror="http://m/debian",
    )
    assert cmd == [
        "mmdebstrap",
        "--mode=root",
        "--variant=apt",
        "--architectures=arm64",
        "--include=a,b",
        "--essential-hook=echo 1",
        "--customize-hook=echo 2",
        "bookworm",
        "/t",
        "http://m/debian",
    ]


def test_require_names_a_missing_program_then_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "mkfs.ext4" else name)
    with pytest.raises(MissingTool, match=r"^mkfs\.ext4: not installed \(run scripts/setup\)$"):
        debroot.require("kbisect emu image", ["mmdebstrap", "mkfs.ext4"], "why")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match=r"^kbisect emu image: run as root \(why\)$"):
        debroot.require("kbisect emu image", ["mmdebstrap"], "why")


# -- both builds, with the programs stood in for ---------------------------------------


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[str]]:
    """Root, every program installed; proc.run records the commands and makes what they
    would."""
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(arch, "host_arch", lambda: "x86_64")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    calls: list[list[str]] = []

    def run(cmd: Sequence[str], **kw: Any) -> None:
        calls.append([str(c) for c in cmd])
        if cmd[0] == "mmdebstrap" and "--variant=extract" in cmd:
            fake_root(Path(cmd[-1]))
            listing = next(c for c in cmd if c.startswith("--extract-hook="))
            Path(shlex.split(listing)[-1]).write_text(
                "lock\npartial\npostgresql-17_17.12-0+deb13u1_arm64.deb\nzstd_1.5.6_arm64.deb\n"
            )
        elif cmd[0] == "mmdebstrap":
            boot = Path(cmd[-1]) / "boot"
            boot.mkdir(parents=True)
            (boot / "vmlinuz-6.1.0-9-amd64").write_text("k")
            (boot / "initrd.img-6.1.0-9-amd64").write_text("i")
        elif cmd[0] == "mkfs.ext4":
            Path(cmd[-2]).write_text("disk")
        elif cmd[0] == "ssh-keygen":
            Path(cmd[-1]).write_text("key")
            Path(f"{cmd[-1]}.pub").write_text("ssh-ed25519 AAAA kbisect-emu")

    monkeypatch.setattr(proc, "run", run)
    return calls


def test_kbisect_image_leaves_the_root_its_log_and_manifest(as_root: list[list[str]]) -> None:
    a, pin = arch.get("arm64"), server.Pin(17)
    root = rootfs.build(a, pin)
    assert root == rootfs.root_for(a, pin)
    assert sorted(p.name for p in root.parent.iterdir()) == [
        ".lock",
        "debs.txt",
        "image.json",
        "mmdebstrap.log",
        "root",
    ]
    assert (root / "etc/hostname").read_text() == "kbisect\n"  # finish() ran
    manifest = json.loads((root.parent / rootfs.MANIFEST).read_text())
    assert manifest["command"] == rootfs.mmdebstrap_command(
        a,
        root.with_name("root.partial"),
        pin,
        None,
        root.parent / rootfs.DEBS,
        debroot.host_aptopts(),
    )
    assert manifest["suite"] == "trixie" and manifest["postgres_major"] == 17
    assert manifest["postgres_debian_version"] == "17.12-0+deb13u1"
    assert manifest["debs"] == ["postgresql-17_17.12-0+deb13u1_arm64.deb", "zstd_1.5.6_arm64.deb"]
    assert manifest["content_hash"] == rootfs.tree_hash(root)
    assert [c[0] for c in as_root] == ["mmdebstrap"]
    assert rootfs.build(a, pin) == root and len(as_root) == 1  # made once


def test_kbisect_emu_image_leaves_the_disk_kernel_initrd_and_manifest(
    as_root: list[list[str]],
) -> None:
    final = image.build()
    assert final == where.image_dir()
    assert sorted(p.name for p in final.iterdir()) == [
        "build.log",
        "customize.sh",
        "disk.img",
        "image.json",
        "initrd.img",
        "vmlinuz",
    ]
    manifest = image.manifest()
    assert manifest is not None
    assert (manifest["kernel"], manifest["release"]) == ("vmlinuz-6.1.0-9-amd64", "6.1.0-9-amd64")
    assert manifest["packages"] == [*image.PACKAGES[:6], "linux-image-amd64", *image.PACKAGES[7:]]
    assert [c[0] for c in as_root] == ["ssh-keygen", "mmdebstrap", "mkfs.ext4"]
    assert image.build() == final and len(as_root) == 3  # made once: kept
    image.build(force=True)
    assert [c[0] for c in as_root[3:]] == ["mmdebstrap", "mkfs.ext4"]  # the key is kept


def test_apt_options_go_before_the_suite() -> None:
    cmd = debroot.mmdebstrap_command(
        arch="amd64",
        variant="buildd",
        packages=["a"],
        output=Path("/t"),
        suite="sid",
        aptopts=['Acquire::Check-Valid-Until "false"'],
    )
    assert cmd[5:] == ['--aptopt=Acquire::Check-Valid-Until "false"', "sid", "/t"]


@pytest.mark.parametrize(
    ("conf", "wanted"),
    [
        ('Acquire::Check-Valid-Until "false";\n', 1),
        ('Acquire::Check-Valid-Until "true";\n', 0),
        ('// Acquire::Check-Valid-Until "false";\n', 0),
        ("", 0),
    ],
)
def test_a_root_shares_the_hosts_expiry_check(conf: str, wanted: int, tmp_path: Path) -> None:
    """A host whose apt skips the Release expiry check (a snapshot mirror) makes roots
    that skip it too; otherwise the roots' apt checks as Debian's does."""
    (tmp_path / "apt.conf.d").mkdir()
    (tmp_path / "apt.conf.d/99mirror").write_text(conf)
    assert debroot.host_aptopts(tmp_path) == ('Acquire::Check-Valid-Until "false"',) * wanted
    assert debroot.host_aptopts(tmp_path / "none") == ()
