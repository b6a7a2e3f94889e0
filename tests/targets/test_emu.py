"""The emulated machine's command builders (exact lists) and its target file."""

from __future__ import annotations

import socket
import tomllib
from pathlib import Path

from kbisect.targets import registry
from kbisect.targets.emu import image, vm, where
from kbisect.targets.ssh import config


def test_mmdebstrap_command():
    cmd = image.mmdebstrap_command(Path("/c/root"), Path("/c/hook.sh"), "http://mirror/debian")
    assert cmd == [
        "mmdebstrap",
        "--mode=root",
        "--variant=apt",
        "--architectures=amd64",
        "--include=systemd-sysv,udev,openssh-server,kexec-tools,python3,postgresql-15,"
        "linux-image-amd64,iproute2,e2fsprogs,procps,zstd,dbus,fio",
        "--essential-hook=echo 'kexec-tools kexec-tools/load_kexec boolean false' "
        '| chroot "$1" debconf-set-selections',
        '--customize-hook=sh /c/hook.sh "$1"',
        "bookworm",
        "/c/root",
        "http://mirror/debian",
    ]


def test_customize_script_sets_up_the_machine():
    script = image.customize_script("ssh-ed25519 AAAA kbisect-emu")
    for needle in (
        'echo kbisect-emu > "$R/etc/hostname"',
        "/dev/vda / ext4 defaults 0 1",
        "DHCP=yes",
        "systemctl enable systemd-networkd ssh serial-getty@ttyS0.service",
        "systemctl disable postgresql",
        "'ssh-ed25519 AAAA kbisect-emu' > \"$R/root/.ssh/authorized_keys\"",
    ):
        assert needle in script


def test_mkfs_and_keygen_commands():
    assert image.mkfs_command(Path("/t"), Path("/d.img")) == [
        "mkfs.ext4",
        "-q",
        "-F",
        "-L",
        "kbisect-root",
        "-d",
        "/t",
        "/d.img",
        "4G",
    ]
    assert image.keygen_command(Path("/k/id")) == [
        "ssh-keygen",
        "-q",
        "-t",
        "ed25519",
        "-N",
        "",
        "-C",
        "kbisect-emu",
        "-f",
        "/k/id",
    ]


def test_boot_files_picks_the_newest_kernel(tmp_path):
    (tmp_path / "boot").mkdir()
    for release in ("6.1.0-1-amd64", "6.1.0-9-amd64"):
        (tmp_path / "boot" / f"vmlinuz-{release}").write_text("k")
    kernel, initrd = image.boot_files(tmp_path)
    assert kernel.name == "vmlinuz-6.1.0-9-amd64"
    assert initrd.name == "initrd.img-6.1.0-9-amd64"


def test_qemu_command_forwards_ssh_on_loopback_only():
    machine_vm = vm.Vm("emu", Path("/c/emu/emu"))
    cmd = vm.qemu_command(machine_vm, Path("/c/emu/image"), 40022, "tcg", 2048, 2)
    assert cmd == [
        "qemu-system-x86_64",
        "-name",
        "kbisect-emu",
        "-machine",
        "pc",
        "-accel",
        "tcg",
        "-cpu",
        "max",
        "-m",
        "2048",
        "-smp",
        "2",
        "-kernel",
        "/c/emu/image/vmlinuz",
        "-initrd",
        "/c/emu/image/initrd.img",
        "-append",
        "root=/dev/vda rw console=ttyS0,115200 nowatchdog",
        "-drive",
        "file=/c/emu/emu/disk.qcow2,if=virtio,format=qcow2",
        "-nic",
        "user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:40022-:22",
        "-display",
        "none",
        "-vga",
        "none",
        "-serial",
        "file:/c/emu/emu/serial.log",
        "-qmp",
        "unix:/c/emu/emu/qmp.sock,server=on,wait=off",
        "-daemonize",
        "-pidfile",
        "/c/emu/emu/pid",
    ]
    assert "-cpu" in vm.qemu_command(machine_vm, Path("/i"), 1, "kvm") and "host" in (
        vm.qemu_command(machine_vm, Path("/i"), 1, "kvm")
    )


def test_overlay_command():
    assert vm.overlay_command(Path("/i/disk.img"), Path("/v/disk.qcow2")) == [
        "qemu-img",
        "create",
        "-q",
        "-f",
        "qcow2",
        "-b",
        "/i/disk.img",
        "-F",
        "raw",
        "/v/disk.qcow2",
    ]


def test_target_file_is_a_valid_ssh_machine(tmp_path):
    key = tmp_path / "id"
    key.write_text("k")
    machine_vm = vm.Vm.named("emu")
    text = vm.toml_text(vm.target_settings(machine_vm, 40022, key, tmp_path / "kh"))
    settings = tomllib.loads(text)
    m = config.load("emu", settings)
    assert (m.host, m.port, m.user, m.key) == ("127.0.0.1", 40022, "root", key)
    assert m.power_cycle == f"qmp:{where.vm_dir('emu') / 'qmp.sock'}"
    assert m.console == f"tail -n0 -F {where.vm_dir('emu') / 'serial.log'}"
    path = vm.target_file("emu")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert registry.get("emu").kind == "ssh"


def test_free_port_is_a_loopback_port():
    port = vm.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # still free


def test_status_and_down_of_a_machine_never_started():
    status = vm.status("emu")
    assert status["running"] is False and status["pid"] is None and status["image"] is None
    assert vm.down("emu") is False


def test_up_without_an_image_is_a_one_line_user_error():
    import pytest

    with pytest.raises(vm.NoImage, match="kbisect emu image"):
        vm.up("emu", 2048, 2)
