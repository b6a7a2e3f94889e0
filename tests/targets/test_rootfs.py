"""Guest root file systems pinned to a PostgreSQL: the mmdebstrap command, the cache key,
the host-side finishing steps, and how `kbisect run` finds, makes or asks for the root."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core import arch, paths
from kbisect.core.exceptions import EXIT_USER, MissingTool, UserError
from kbisect.measure import sample
from kbisect.scenario import scenario, server
from kbisect.targets import registry
from kbisect.targets.base import Kernel, Target
from kbisect.targets.vng import rootfs
from tests.targets import images as fakeimages
from tests.targets.images import fake_root
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


def test_mmdebstrap_command_is_exact() -> None:
    a = arch.get("arm64")
    cmd = rootfs.mmdebstrap_command(a, Path("/c/root.partial"), server.Pin(15))
    assert cmd[:5] == [
        "mmdebstrap",
        "--mode=root",
        "--variant=extract",
        "--architectures=arm64",
        f"--include={','.join(rootfs.packages(server.Pin(15)))}",
    ]
    assert cmd[5:] == ["bookworm", "/c/root.partial"]
    assert "postgresql-15" in rootfs.packages(server.Pin(15)) and "python3" in rootfs.packages(
        server.Pin(15)
    )
    # no udev: virtme-ng's init skips its coldplug (12-20 s of a boot under TCG)
    assert "udev" not in rootfs.packages(server.Pin(15))
    with_mirror = rootfs.mmdebstrap_command(a, Path("/r"), server.Pin(15), "http://mirror/debian")
    assert with_mirror[-1] == "http://mirror/debian"
    seventeen = rootfs.mmdebstrap_command(arch.get("x86_64"), Path("/r"), server.Pin(17))
    assert seventeen[3] == "--architectures=amd64" and seventeen[-2:] == ["trixie", "/r"]
    exact = rootfs.packages(server.Pin(17, "17.12-0+deb13u1"))
    assert exact[-1] == "postgresql-17=17.12-0+deb13u1"
    listed = rootfs.mmdebstrap_command(a, Path("/r"), server.Pin(18), debs=Path("/c/d b.txt"))
    assert listed[5] == """--extract-hook=ls "$1/var/cache/apt/archives" > '/c/d b.txt'"""
    assert listed[-2] == "sid"


def test_a_pin_names_its_suite_or_says_why_none_can_carry_it() -> None:
    assert [server.Pin(m).suite for m in (15, 17, 18)] == ["bookworm", "trixie", "sid"]
    assert server.Pin(17).problem() is None
    assert server.Pin(17, "17.12-0+deb13u1").problem() is None
    no16 = server.Pin(16).problem()
    assert no16 is not None and no16.startswith("postgres.major = 16: no Debian suite")
    assert "15 (bookworm), 17 (trixie), 18 (sid)" in no16 and 'source = "host"' in no16
    wrong = server.Pin(17, "16.4-1").problem()
    assert wrong is not None and "not a Debian version of PostgreSQL 17" in wrong


def test_the_cache_key_changes_with_every_input_and_only_then() -> None:
    x86, arm = arch.get("x86_64"), arch.get("arm64")
    keys = {
        rootfs.key(x86, server.Pin(17)),
        rootfs.key(arm, server.Pin(17)),
        rootfs.key(x86, server.Pin(15)),
        rootfs.key(x86, server.Pin(17, "17.12-1")),
        rootfs.key(x86, server.Pin(17, "17.13-1")),
    }
    assert len(keys) == 5
    assert rootfs.key(x86, server.Pin(17)) == rootfs.key(x86, server.Pin(17))
    assert rootfs.key(x86, server.Pin(17)).startswith("x86_64-trixie-pg17-")
    assert rootfs.key(x86, server.Pin(17, "1:17.1-1")).startswith("x86_64-trixie-pg17-1_17.1-1-")


def test_tree_hash_sees_content_modes_and_links(tmp_path: Path) -> None:
    root = fake_root(tmp_path / "root")
    first = rootfs.tree_hash(root)
    assert rootfs.tree_hash(root) == first
    (root / "usr/bin/busybox").write_text("x")
    second = rootfs.tree_hash(root)
    (root / "usr/bin/busybox").chmod(0o755)
    third = rootfs.tree_hash(root)
    (root / "sbin").unlink()
    (root / "sbin").symlink_to("usr/bin")
    fourth = rootfs.tree_hash(root)
    assert len({first, second, third, fourth}) == 4


def test_server_version_reads_the_unpacked_deb_names() -> None:
    debs = ["postgresql-17-jit_x.deb", "postgresql-17_17.12-0+deb13u1_amd64.deb"]
    assert rootfs.server_version(debs, 17) == "17.12-0+deb13u1"
    assert rootfs.server_version(["postgresql-18_1%3a18.1-1_amd64.deb"], 18) == "1:18.1-1"
    assert rootfs.server_version(debs, 15) is None


def test_finish_makes_accounts_poweroff_and_mount_points(tmp_path: Path) -> None:
    root = fake_root(tmp_path / "root")
    rootfs.finish(root)
    rootfs.finish(root)  # idempotent: no second postgres entry
    passwd = (root / "etc/passwd").read_text().splitlines()
    assert passwd[0].startswith("root:") and sum(p.startswith("postgres:") for p in passwd) == 1
    assert any(g.startswith("postgres:") for g in (root / "etc/group").read_text().splitlines())
    assert (root / "usr/sbin/poweroff").is_symlink()
    assert str((root / "usr/sbin/poweroff").readlink()) == "/bin/busybox"
    for d in (rootfs.GUEST_HARNESS, rootfs.GUEST_OUT, rootfs.GUEST_TEMPLATES, rootfs.GUEST_PYCACHE):
        assert (root / d.relative_to("/")).is_dir()
    assert (root / "tmp/kbisect-pg").is_dir()
    assert (root / "tmp").stat().st_mode & 0o1777 == 0o1777


def recorded_builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, server.Pin]]:
    """rootfs.build stood in: it records (arch, pin) and leaves a finished fake root."""
    made: list[tuple[str, server.Pin]] = []

    def build(a: arch.Arch, pin: server.Pin, mirror: str | None = None) -> Path:
        made.append((a.name, pin))
        return fakeimages.installed(a, pin)

    monkeypatch.setattr(rootfs, "build", build)
    return made


def test_missing_root_fs_is_one_line_and_exit_2_before_any_boot_when_not_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    line = refused_before_boot(tmp_path, monkeypatch, capsys, "--arch", "arm64", images=False)
    assert line == (
        "kbisect: no arm64 root fs with PostgreSQL 15 (bookworm): run "
        "`kbisect image --arch arm64 --pg-major 15` as root"
    )


def test_a_major_no_suite_carries_is_refused_before_any_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused_before_boot(tmp_path, monkeypatch, capsys, "--set", "postgres.major=16")
    assert line.startswith("kbisect: postgres.major = 16: no Debian suite kbisect knows")


def test_as_root_a_missing_root_is_made_before_the_first_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = use_fake_vng(monkeypatch, tmp_path / "fakevng", images=False)
    made = recorded_builds(monkeypatch)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    target = registry.get("vng", "x86_64")
    scen = scenario.load("smoke")
    target.preflight(scen)
    target.preflight(scen)  # made once
    assert made == [("x86_64", server.Pin(15))]  # smoke's pin
    assert vng_calls(state) == []  # before any boot


def fake_vng_with_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arch_name: str
) -> tuple[Path, arch.Arch, Path, Kernel, Target]:
    """The fake vng, smoke's root for `arch_name`, a kernel and the vng target."""
    state = use_fake_vng(monkeypatch, tmp_path / "fakevng")
    a = arch.get(arch_name)
    root = fakeimages.installed(a, server.Pin(15))
    return state, a, root, Kernel(fake_image(tmp_path / "k")), registry.get("vng", arch_name)


def test_foreign_guest_boots_the_root_fs_with_the_host_dirs_under_kbisect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, a, root, kernel, target = fake_vng_with_root(tmp_path, monkeypatch, "arm64")
    s = sample.take(target, sample.Boot(kernel, scenario.load("smoke"), tmp_path / "run"))
    assert s.ok and (s.tps or 0) > 0
    [call] = vng_calls(state)
    argv = call["argv"]
    assert argv[argv.index("--arch") + 1] == "arm64"
    assert argv[argv.index("--root") + 1] == str(root)
    assert argv[argv.index("--rodir") + 1] == f"/kbisect/harness={paths.harness_dir()}"
    rw = [argv[i + 1] for i, x in enumerate(argv) if x == "--rwdir"]
    assert rw == [
        f"/kbisect/out={s.boot_dir}",
        f"/kbisect/templates={tmp_path}/cache/pg-templates",
        f"/kbisect/pycache={tmp_path}/cache/pycache/{rootfs.key(a, server.Pin(15))}",
    ]
    guest = shlex.split(argv[argv.index("--exec") + 1])
    assert guest[:4] == [
        "python3",
        "-X",
        "pycache_prefix=/kbisect/pycache",
        "/kbisect/harness/guest.py",
    ]
    assert guest[guest.index("--out") + 1] == "/kbisect/out"
    assert guest[guest.index("--scenario-json") + 1] == "/kbisect/out/scenario.json"
    assert s.userland["image"] == rootfs.key(a, server.Pin(15))


def test_a_native_guest_boots_the_image_of_its_pin_unless_the_scenario_says_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, a, root, kernel, target = fake_vng_with_root(tmp_path, monkeypatch, "x86_64")
    image = sample.take(target, sample.Boot(kernel, scenario.load("smoke"), tmp_path / "a"))
    host_scen = scenario.load("smoke").with_overrides(["postgres.source=host", "postgres.major=15"])
    host = sample.take(target, sample.Boot(kernel, host_scen, tmp_path / "b"))
    first, second = (c["argv"] for c in vng_calls(state))
    assert "--arch" not in first and first[first.index("--root") + 1] == str(root)
    assert "--root" not in second and "--arch" not in second
    manifest = json.loads((root.parent / rootfs.MANIFEST).read_text())
    assert image.userland == {
        "source": "image",
        "image": rootfs.key(a, server.Pin(15)),
        "suite": "bookworm",
        "postgres_major": 15,
        "postgres_debian_version": "15.0-1",
        "content_hash": manifest["content_hash"],
    }
    assert host.userland == {"source": "host", "postgres_major": 15}


def test_build_refuses_an_unknown_major_and_a_missing_mmdebstrap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(UserError, match=r"postgres\.major = 16: no Debian suite"):
        rootfs.build(arch.get("x86_64"), server.Pin(16))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(MissingTool, match="mmdebstrap: not installed"):
        rootfs.build(arch.get("arm64"), server.Pin(17))


def test_kbisect_image_takes_a_scenario_or_a_major_and_refuses_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = recorded_builds(monkeypatch)
    assert cli.main(["image", "--scenario", "simple-update-2vcpu"]) == 0
    assert cli.main(["image", "--arch", "arm64", "--pg-major", "15", "--pg-version", "15.1-1"]) == 0
    assert cli.main(["image"]) == 0
    assert made == [
        ("x86_64", server.Pin(17)),
        ("arm64", server.Pin(15, "15.1-1")),
        ("x86_64", server.DEFAULT_PIN),
    ]
    capsys.readouterr()
    assert cli.main(["image", "--pg-major", "16"]) == EXIT_USER
    assert capsys.readouterr().err.strip().startswith("kbisect: postgres.major = 16: no Debian")
    assert cli.main(["image", "--scenario", "smoke", "--pg-version", "15.1-1"]) == EXIT_USER
    assert "--pg-version goes with --pg-major" in capsys.readouterr().err
    assert len(made) == 3
