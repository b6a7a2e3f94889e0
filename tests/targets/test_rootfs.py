"""Root file systems for foreign-arch guests: the mmdebstrap command, the host-side
finishing steps, and how `kbisect run` finds (or asks for) the root."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from kbisect.core import arch, paths
from kbisect.core.exceptions import MissingTool, UserError
from kbisect.measure import sample
from kbisect.scenario import scenario
from kbisect.targets import registry
from kbisect.targets.base import Kernel
from kbisect.targets.vng import rootfs
from tests.targets.test_vng_target import (
    fake_image,
    refused_before_boot,
    use_fake_vng,
    vng_calls,
)


@pytest.fixture(autouse=True)
def x86_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(arch, "host_arch", lambda: "x86_64")
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))


def fake_root(where: Path) -> Path:
    """What mmdebstrap's extract variant leaves: base-passwd's masters, busybox, /tmp."""
    masters = where / "usr/share/base-passwd"
    masters.mkdir(parents=True)
    (masters / "passwd.master").write_text("root:*:0:0:root:/root:/bin/sh\n")
    (masters / "group.master").write_text("root:*:0:\n")
    (where / "usr/bin").mkdir(parents=True)
    (where / "usr/sbin").mkdir(parents=True)
    (where / "bin").symlink_to("usr/bin")
    (where / "sbin").symlink_to("usr/sbin")
    (where / "usr/bin/busybox").write_text("")
    for d in ("etc", "tmp"):
        (where / d).mkdir()
    return where


def installed(a: arch.Arch) -> Path:
    """A finished root fs in the cache, as `kbisect image` leaves it."""
    root = fake_root(rootfs.root_for(a))
    rootfs.finish(root)
    (root.parent / rootfs.MANIFEST).write_text(json.dumps({"arch": a.name}))
    return root


def test_mmdebstrap_command_is_exact() -> None:
    a = arch.get("arm64")
    cmd = rootfs.mmdebstrap_command(a, Path("/c/root.partial"))
    assert cmd[:5] == [
        "mmdebstrap",
        "--mode=root",
        "--variant=extract",
        "--architectures=arm64",
        f"--include={','.join(rootfs.packages())}",
    ]
    assert cmd[5:] == ["bookworm", "/c/root.partial"]
    assert "postgresql-15" in rootfs.packages() and "python3" in rootfs.packages()
    with_mirror = rootfs.mmdebstrap_command(a, Path("/r"), 15, "http://mirror/debian")
    assert with_mirror[-1] == "http://mirror/debian"
    assert rootfs.packages(16)[-1] == "postgresql-16"


def test_finish_makes_accounts_poweroff_and_mount_points(tmp_path: Path) -> None:
    root = fake_root(tmp_path / "root")
    rootfs.finish(root)
    rootfs.finish(root)  # idempotent: no second postgres entry
    passwd = (root / "etc/passwd").read_text().splitlines()
    assert passwd[0].startswith("root:") and sum(p.startswith("postgres:") for p in passwd) == 1
    assert any(g.startswith("postgres:") for g in (root / "etc/group").read_text().splitlines())
    assert (root / "usr/sbin/poweroff").is_symlink()
    assert str((root / "usr/sbin/poweroff").readlink()) == "/bin/busybox"
    for d in (rootfs.GUEST_HARNESS, rootfs.GUEST_OUT, rootfs.GUEST_TEMPLATES):
        assert (root / d.relative_to("/")).is_dir()
    assert (root / "tmp/kbisect-pg").is_dir()
    assert (root / "tmp").stat().st_mode & 0o1777 == 0o1777


def test_missing_root_fs_is_one_line_and_exit_2_before_any_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert refused_before_boot(tmp_path, monkeypatch, capsys, "--arch", "arm64") == (
        "kbisect: no arm64 root fs for a foreign-arch guest: run `kbisect image --arch arm64`"
    )


def test_foreign_guest_boots_the_root_fs_with_the_host_dirs_under_kbisect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = use_fake_vng(monkeypatch, tmp_path / "fakevng")
    a = arch.get("arm64")
    root = installed(a)
    kernel = fake_image(tmp_path / "k")
    target = registry.get("vng", "arm64")
    s = sample.take(target, sample.Boot(Kernel(kernel), scenario.load("smoke"), tmp_path / "run"))
    assert s["status"] == "ok" and s["tps"] > 0
    [call] = vng_calls(state)
    argv = call["argv"]
    assert argv[argv.index("--arch") + 1] == "arm64"
    assert argv[argv.index("--root") + 1] == str(root)
    assert argv[argv.index("--rodir") + 1] == f"/kbisect/harness={paths.harness_dir()}"
    rw = [argv[i + 1] for i, x in enumerate(argv) if x == "--rwdir"]
    assert rw == [
        f"/kbisect/out={s['boot_dir']}",
        f"/kbisect/templates={tmp_path}/cache/pg-templates",
    ]
    guest = shlex.split(argv[argv.index("--exec") + 1])
    assert guest[:2] == ["python3", "/kbisect/harness/guest.py"]
    assert guest[guest.index("--out") + 1] == "/kbisect/out"
    assert guest[guest.index("--scenario-json") + 1] == "/kbisect/out/scenario.json"


def test_build_refuses_the_native_arch_and_a_missing_mmdebstrap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(UserError, match="x86_64 is this host's arch"):
        rootfs.build(arch.get("x86_64"))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(MissingTool, match="mmdebstrap: not installed"):
        rootfs.build(arch.get("arm64"))
