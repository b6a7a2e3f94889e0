"""kexec command lines (exact) and the checks that prove which kernel came up."""

from __future__ import annotations

from kbisect.targets.ssh import kexec


def test_command_line_drops_boot_words_and_adds_extras_then_nonce():
    known = "BOOT_IMAGE=/boot/vmlinuz-6.1 root=/dev/vda rw quiet kbisect.boot=old initrd=/x"
    got = kexec.command_line(known, ("preempt=none", "mitigations=off"), "abc123", "/dev/vda")
    assert got == "root=/dev/vda rw quiet preempt=none mitigations=off kbisect.boot=abc123"


def test_command_line_resolves_root_uuid_for_a_kernel_without_initramfs():
    known = "root=UUID=1234-abcd ro console=ttyS0,115200"
    got = kexec.command_line(known, (), "n1", "/dev/sda2")
    assert got == "root=/dev/sda2 ro console=ttyS0,115200 kbisect.boot=n1"
    assert kexec.command_line(known, (), "n1", None).startswith("root=UUID=1234-abcd ")


def test_command_line_quotes_what_needs_it():
    got = kexec.command_line('root=/dev/vda dyndbg="file x +p"', (), "n", None)
    assert got == "root=/dev/vda 'dyndbg=file x +p' kbisect.boot=n"


def test_load_commands():
    assert kexec.load_command("/k/bzImage", "root=/dev/vda x=1") == [
        "kexec",
        "-s",
        "-l",
        "/k/bzImage",
        "--append=root=/dev/vda x=1",
    ]
    assert kexec.load_command("/k/vmlinuz", "a", "/k/initrd.img", file_load=False) == [
        "kexec",
        "-l",
        "/k/vmlinuz",
        "--initrd=/k/initrd.img",
        "--append=a",
    ]


def test_switch_script_loads_checks_then_a_detached_clean_kexec():
    script = kexec.switch_script("/k/bzImage", "root=/dev/vda kbisect.boot=n")
    assert script == (
        "{ kexec -s -l /k/bzImage '--append=root=/dev/vda kbisect.boot=n' || "
        "kexec -l /k/bzImage '--append=root=/dev/vda kbisect.boot=n'; } && "
        'test "$(cat /sys/kernel/kexec_loaded)" = 1 && systemctl --no-block kexec'
    )
    assert "kexec -e" not in script


def test_nonces():
    a, b = kexec.new_nonce(), kexec.new_nonce()
    assert a != b and len(a) == 12
    line = f"root=/dev/vda kbisect.boot={a}\n"
    assert kexec.has_nonce(line, a)
    assert not kexec.has_nonce(line, b)
    assert not kexec.has_nonce(f"kbisect.boot={a}0", a)
    assert kexec.nonce_of(line) == a
    assert kexec.nonce_of("root=/dev/vda") is None


def test_mismatch():
    want = {"release": "6.12.0", "build_id": "ab"}
    assert kexec.mismatch(want, {"release": "6.12.0", "build_id": "ab"}) is None
    assert "release" in (kexec.mismatch(want, {"release": "6.1.0", "build_id": "ab"}) or "")
    assert "build_id" in (kexec.mismatch(want, {"release": "6.12.0", "build_id": "cd"}) or "")
    assert kexec.mismatch({"release": "6.12.0", "build_id": None}, {"release": "6.12.0"}) is None
