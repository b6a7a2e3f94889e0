"""The vng command line: exact lists for each concern."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from kbisect.core import arch
from kbisect.core.exceptions import UserError
from kbisect.targets.vng import command

FAKEVNG = Path(__file__).resolve().parents[1] / "fakevng"
EXEC = ["python3", "/h/guest.py", "--out", "/runs/boot 1", "--scenario-json", "/runs/s.json"]


@pytest.fixture(autouse=True)
def x86_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arch, "host_arch", lambda: "x86_64")


def boot(**kw: object) -> command.Boot:
    fields: dict[str, object] = {
        "image": Path("/k/bzImage"),
        "arch": arch.get("x86_64"),
        "cpus": 2,
        "memory_mb": 1024,
        "accel": "tcg",
        "exec_argv": EXEC,
    }
    fields.update(kw)
    return command.Boot(**fields)  # type: ignore[arg-type]


def test_tcg_command_is_exact() -> None:
    assert command.command(boot()) == [
        "vng",
        "--run",
        "/k/bzImage",
        "--verbose",
        "--force-9p",
        "--disable-kvm",
        "--cpus",
        "2",
        "--memory",
        "1024M",
        "--append",
        "panic=-1",
        "--append",
        "oops=panic",
        "--exec",
        "python3 /h/guest.py --out '/runs/boot 1' --scenario-json /runs/s.json",
    ]


def test_kvm_command_is_exact() -> None:
    assert command.command(boot(accel="kvm", cpus=4, memory_mb=2048), vng="/venv/bin/vng") == [
        "/venv/bin/vng",
        "--run",
        "/k/bzImage",
        "--verbose",
        "--force-9p",
        "--cpus",
        "4",
        "--memory",
        "2048M",
        "--append",
        "panic=-1",
        "--append",
        "oops=panic",
        "--exec",
        "python3 /h/guest.py --out '/runs/boot 1' --scenario-json /runs/s.json",
    ]


def test_kernel_args_come_after_the_panic_settings_one_per_append() -> None:
    cmd = command.command(boot(append=["preempt=full", "hugepages=64", 'dyndbg="file x +p"']))
    pairs = [cmd[i + 1] for i, c in enumerate(cmd) if c == "--append"]
    assert pairs == ["panic=-1", "oops=panic", "preempt=full", "hugepages=64", 'dyndbg="file x +p"']


def test_shares_in_order_before_exec() -> None:
    shares = [command.Share(Path("/runs/boot 1")), command.Share(Path("/cache/pg-templates"))]
    cmd = command.command(boot(shares=shares))
    i = cmd.index("--rwdir")
    assert cmd[i : i + 4] == ["--rwdir", "/runs/boot 1", "--rwdir", "/cache/pg-templates"]
    assert cmd[-2] == "--exec" and cmd.index("--exec") > i + 3


def test_a_share_at_another_guest_path_and_read_only() -> None:
    harness = command.Share(Path("/src/harness"), Path("/kbisect/harness"), writable=False)
    out = command.Share(Path("/runs/b"), Path("/kbisect/out"))
    assert harness.args() == ["--rodir", "/kbisect/harness=/src/harness"]
    assert out.args() == ["--rwdir", "/kbisect/out=/runs/b"]


def test_a_path_with_an_equals_sign_cannot_be_shared() -> None:
    with pytest.raises(UserError, match="cannot share a path that contains '='"):
        command.Share(Path("/runs/a=b"))


def test_exec_round_trips_through_shell_quoting() -> None:
    argv = ["python3", "/h/guest.py", "--out", "/a b/'q'", "--x", "$HOME;rm -rf /"]
    cmd = command.command(boot(exec_argv=argv))
    assert shlex.split(cmd[-1]) == argv


def test_foreign_arch_args() -> None:
    a = arch.get("arm64")
    cmd = command.command(boot(arch=a, image=Path("/k/Image"), root=Path("/roots/arm64")))
    assert cmd[:8] == [
        "vng",
        "--run",
        "/k/Image",
        "--verbose",
        "--force-9p",
        "--disable-kvm",
        "--arch",
        "arm64",
    ]
    assert cmd[8:10] == ["--root", "/roots/arm64"]
    assert command.arch_args(boot(arch=a)) == ["--arch", "arm64"]
    assert command.arch_args(boot()) == []  # native, no root: the host's own
    assert command.arch_args(boot(root=Path("/r"))) == ["--root", "/r"]  # native, an image


def test_binary_prefers_path_then_the_venv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(FAKEVNG))
    assert command.binary() == str(FAKEVNG / "vng")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert command.binary() == str(Path(sys.executable).parent / "vng")


def test_env_puts_vngs_own_directory_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command.env("/venv/bin/vng") == {"PATH": "/venv/bin:/usr/bin:/bin"}


def test_a_disk_goes_to_qemu_through_one_qemu_opts_argument() -> None:
    disk = command.Disk(Path("/c/disks/1-A.raw"), "kbisect-pgdata", size_gb=4)
    cmd = command.command(boot(disks=[disk]))
    [opts] = [a for a in cmd if a.startswith("--qemu-opts=")]
    assert cmd.index(opts) < cmd.index("--exec")
    assert shlex.split(opts.removeprefix("--qemu-opts=")) == [
        "-drive",
        "if=none,id=kbdisk0,file=/c/disks/1-A.raw,format=raw,cache=none",
        "-device",
        "virtio-blk-pci,drive=kbdisk0,serial=kbisect-pgdata",
    ]
    assert command.disk_args(boot()) == []


def test_a_throttled_disk_and_a_foreign_arch_disk() -> None:
    disk = command.Disk(Path("/dev/sdb"), "s", cache="writeback", iops=150)
    [opts] = command.disk_args(boot(disks=[disk], arch=arch.get("arm64")))
    drive, device = opts.split()[1], opts.split()[3]
    assert drive.endswith(",cache=writeback,throttling.iops-total=150")
    assert device == "virtio-blk-device,drive=kbdisk0,serial=s"  # virtio-mmio, as virtme's


@pytest.mark.parametrize("path", ["/a b/disk.raw", "/a,b.raw", "/x=y.raw", "/$(id).raw"])
def test_a_disk_path_the_shell_or_qemu_would_split_is_refused(path: str) -> None:
    with pytest.raises(UserError, match="a disk path must be"):
        command.Disk(Path(path), "s")
