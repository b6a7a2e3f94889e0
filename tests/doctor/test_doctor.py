"""doctor: its decisions with a faked host, the table, the JSON, and one real run."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.commands import doctor as doctor_command
from kbisect.core import arch, checks
from kbisect.core.exceptions import MissingTool
from kbisect.doctor import doctor
from kbisect.doctor import host as doctor_host
from kbisect.scenario import server
from kbisect.source import tree
from kbisect.targets.vng import kvm, rootfs

GIB = 1 << 30
USABLE = kvm.KvmStatus(True, "a kernel booted under KVM (bzImage)", "kernel")
PVM = kvm.KvmStatus(
    False, "boot sector failed under KVM: MSR (killed by signal 6)", "bootsector", control_ok=True
)
UNKNOWN = kvm.KvmStatus(False, kvm.NO_KERNEL, "bootsector", decided=False, control_ok=True)


def image(name: str = "arm64") -> str:
    return str(rootfs.root_for(arch.get(name), server.DEFAULT_PIN).parent / rootfs.MANIFEST)


def arm64_image() -> str:
    return image("arm64")


class FakeHost(doctor_host.Host):
    """A well-equipped 8-core x86_64 host with usable KVM; tests spoil one thing each."""

    def __init__(self) -> None:
        self.tools = {
            t: f"/usr/bin/{t}"
            for t in (
                "vng",
                "qemu-system-x86_64",
                "qemu-system-aarch64",
                "udevadm",
                "gcc",
                "make",
                "flex",
                "bison",
                "bc",
                "ccache",
                "aarch64-linux-gnu-gcc",
                "busybox",
            )
        }
        self.path_tools = set(self.tools)
        self.files = {
            "/dev/kvm",
            "/usr/include/libelf.h",
            "/usr/include/openssl/opensslv.h",
            "/usr/lib/postgresql/15/bin/postgres",
            "/usr/lib/postgresql/15/bin/pgbench",
            str(tree.DEFAULT_TARBALL),
            arm64_image(),
            image("x86_64"),
        }
        self.free = 100 * GIB
        self.ncpus = 8
        self.static = True
        self.py = (3, 11, 2)
        self.kvm_answer: kvm.KvmStatus | Exception = USABLE
        self.kvm_calls: list[tuple[str, bool]] = []

    def which(self, name: str) -> str | None:
        return self.tools.get(name)

    def host_load(self) -> checks.Check:
        return checks.Check("host load", checks.OK, "others used 3% of the CPUs over 5 s")

    def on_path(self, name: str) -> bool:
        return name in self.path_tools

    def version(self, cmd: list[str]) -> str:
        return f"{Path(cmd[0]).name} 1.0"

    def exists(self, path: str | Path) -> bool:
        return str(path) in self.files

    def glob(self, pattern: str) -> list[str]:
        assert pattern == "/usr/lib/postgresql/*/bin"
        return sorted(
            {str(Path(f).parent) for f in self.files if f.startswith("/usr/lib/postgresql")}
        )

    def pkg_config(self, name: str) -> bool:
        return False

    def is_static(self, path: str) -> bool:
        return self.static

    def free_bytes(self, path: Path) -> int:
        return self.free

    def cpus(self) -> int:
        return self.ncpus

    def mem_bytes(self) -> int:
        return 16 * GIB

    def python(self) -> tuple[int, int, int]:
        return self.py

    def kvm(self, arch: str, recheck: bool) -> kvm.KvmStatus:
        self.kvm_calls.append((arch, recheck))
        if isinstance(self.kvm_answer, Exception):
            raise self.kvm_answer
        return self.kvm_answer


@pytest.fixture(autouse=True)
def x86_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arch, "host_arch", lambda: "x86_64")
    monkeypatch.delenv("KBISECT_ACCEL", raising=False)


def run(host: FakeHost, *argv: str) -> tuple[int, dict[str, checks.Check]]:
    """doctor.main in JSON mode; the exit code and the checks by name."""
    arch_name = argv[argv.index("--arch") + 1] if "--arch" in argv else "x86_64"
    args = argparse.Namespace(recheck="--recheck" in argv, json=True, arch=arch_name, target=None)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = doctor_command.main(args, host)
    data = json.loads(out.getvalue())
    assert data["summary"] == doctor.summary([checks.Check(**c) for c in data["checks"]])
    return code, {c["name"]: checks.Check(**c) for c in data["checks"]}


def test_healthy_host_is_all_ok(capsys: pytest.CaptureFixture[str]) -> None:
    code, checks = run(FakeHost())
    assert code == 0
    assert {c.status for c in checks.values()} == {"OK"}
    assert checks["kvm x86_64"].detail == f"KVM usable: {USABLE.reason}"


def test_text_output_is_the_table_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    host = FakeHost()
    host.ncpus = 2
    args = argparse.Namespace(recheck=False, json=False, arch="x86_64", target=None)
    assert doctor_command.main(args, host) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["OK", "python", "3.11.2"]
    assert lines[-1].endswith("1 WARN, 0 FAIL: kbisect can work here (read the warnings)")
    fix = lines.index(next(ln for ln in lines if ln.startswith("WARN  cpus"))) + 1
    assert lines[fix].strip() == "fix: use a machine with 4+ cores for absolute figures"


def test_pvm_host_warns_that_timings_are_emulated() -> None:
    host = FakeHost()
    host.kvm_answer = PVM
    code, checks = run(host)
    kvm_row = checks["kvm x86_64"]
    assert code == 0
    assert kvm_row.status == "WARN"
    assert kvm_row.detail == (
        f"KVM present but unusable ({PVM.reason}): using TCG: timings are emulated, "
        "compare only ratios"
    )
    assert "kvm-probe" in kvm_row.fix


def test_no_device_warns_without_probing() -> None:
    host = FakeHost()
    host.files.discard("/dev/kvm")
    code, checks = run(host)
    assert code == 0
    assert checks["kvm x86_64"].status == "WARN"
    assert checks["kvm x86_64"].detail.startswith("no /dev/kvm: using TCG")
    assert host.kvm_calls == []


def test_unknown_kvm_says_build_a_kernel_first() -> None:
    host = FakeHost()
    host.kvm_answer = UNKNOWN
    _, checks = run(host)
    assert checks["kvm x86_64"].status == "WARN"
    assert checks["kvm x86_64"].detail.startswith(
        "KVM unknown: no kernel built yet; run kbisect build"
    )


def test_recheck_reaches_the_probe() -> None:
    host = FakeHost()
    run(host, "--recheck")
    assert host.kvm_calls[0] == ("x86_64", True)


def test_probe_that_cannot_run_fails() -> None:
    host = FakeHost()
    host.kvm_answer = MissingTool("qemu-system-x86_64: not installed (run scripts/setup)")
    code, checks = run(host)
    assert code == 1
    assert checks["kvm x86_64"].status == "FAIL"
    assert "not installed" in checks["kvm x86_64"].detail


def test_accel_override_is_shown_and_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost()
    host.kvm_answer = PVM
    monkeypatch.setenv("KBISECT_ACCEL", "kvm")
    _, checks = run(host)
    assert checks["kvm x86_64"].detail.endswith("[KBISECT_ACCEL=kvm wins]")
    monkeypatch.setenv("KBISECT_ACCEL", "fast")
    code, checks = run(host)
    assert code == 1
    assert checks["kvm x86_64"].detail == "KBISECT_ACCEL='fast': use kvm or tcg"
    assert checks["kvm x86_64"].fix == "unset KBISECT_ACCEL, or set it to kvm or tcg"


def test_arm64_guests_are_always_tcg() -> None:
    host = FakeHost()
    code, checks = run(host, "--arch", "all")
    assert code == 0
    assert checks["kvm arm64"].status == "WARN"
    assert "always run under TCG" in checks["kvm arm64"].detail
    assert host.kvm_calls == [("x86_64", False)]  # arm64 never probed


def test_missing_vng_fails_with_exit_1() -> None:
    host = FakeHost()
    del host.tools["vng"]
    code, checks = run(host)
    assert code == 1
    assert checks["vng"].status == "FAIL"
    assert "scripts/setup" in checks["vng"].fix
    assert [c.name for c in checks.values() if c.status != "OK"] == ["vng"]


def test_vng_outside_path_is_used_from_the_venv() -> None:
    host = FakeHost()
    host.tools["vng"] = "/work/main/.venv/bin/vng"
    host.path_tools.discard("vng")
    code, checks = run(host)
    assert code == 0
    assert checks["vng"].status == "OK"
    assert "/work/main/.venv/bin/vng" in checks["vng"].detail


@pytest.mark.parametrize(
    ("gib", "status"), [(5, "FAIL"), (9.9, "FAIL"), (10, "WARN"), (29, "WARN"), (30, "OK")]
)
def test_disk_thresholds(gib: float, status: str) -> None:
    host = FakeHost()
    host.free = int(gib * GIB)
    code, checks = run(host)
    assert checks["disk"].status == status
    assert code == (1 if status == "FAIL" else 0)


def test_missing_cross_compiler_warns_unless_arm64_is_asked_for() -> None:
    host = FakeHost()
    del host.tools["aarch64-linux-gnu-gcc"]
    code, checks = run(host)
    row = checks["aarch64-linux-gnu-gcc"]
    assert (code, row.status) == (0, "WARN")
    assert row.detail == "missing: arm64 builds unavailable"
    assert row.fix == "apt-get install gcc-aarch64-linux-gnu"
    code, checks = run(host, "--arch", "arm64")
    assert (code, checks["aarch64-linux-gnu-gcc"].status) == (1, "FAIL")


def test_missing_arm64_root_fs_warns_unless_arm64_is_asked_for() -> None:
    host = FakeHost()
    host.files.remove(arm64_image())
    code, checks = run(host)
    row = checks["arm64 root fs (PostgreSQL 17)"]
    assert (code, row.status, row.fix) == (0, "WARN", "kbisect image --arch arm64 --pg-major 17")
    assert row.detail == "missing: made on the first boot that needs it (as root, ~20 s)"
    code, checks = run(host, "--arch", "arm64")
    assert (code, checks["arm64 root fs (PostgreSQL 17)"].status) == (1, "FAIL")


def test_a_missing_native_root_fs_only_warns_it_is_made_on_first_use() -> None:
    host = FakeHost()
    host.files.remove(image("x86_64"))
    code, checks = run(host, "--arch", "x86_64")
    row = checks["x86_64 root fs (PostgreSQL 17)"]
    assert (code, row.status) == (0, "WARN")
    assert row.fix == "kbisect image --arch x86_64 --pg-major 17"


def test_missing_aarch64_qemu_matters_only_for_arm64() -> None:
    host = FakeHost()
    del host.tools["qemu-system-aarch64"]
    code, checks = run(host)
    assert (code, checks["qemu-system-aarch64"].status) == (0, "WARN")
    code, _ = run(host, "--arch", "all")
    assert code == 1


@pytest.mark.parametrize(
    ("tool", "status", "fix"),
    [
        ("udevadm", "FAIL", "apt-get install udev"),
        ("gcc", "FAIL", "apt-get install build-essential"),
        ("flex", "FAIL", "apt-get install flex"),
        ("ccache", "WARN", "apt-get install ccache"),
        ("busybox", "FAIL", "apt-get install busybox-static"),
    ],
)
def test_missing_tools(tool: str, status: str, fix: str) -> None:
    host = FakeHost()
    del host.tools[tool]
    code, checks = run(host)
    assert (checks[tool].status, checks[tool].fix) == (status, fix)
    assert code == (1 if status == "FAIL" else 0)


def test_udev_says_why_it_matters() -> None:
    host = FakeHost()
    del host.tools["udevadm"]
    _, checks = run(host)
    assert checks["udevadm"].detail == "missing: without it vng loses the guest's output"


def test_dynamic_busybox_warns() -> None:
    host = FakeHost()
    host.static = False
    _, checks = run(host)
    assert checks["busybox"].status == "WARN"


def test_headers_missing_fail() -> None:
    host = FakeHost()
    host.files.discard("/usr/include/libelf.h")
    code, checks = run(host)
    assert (code, checks["libelf"].status, checks["libelf"].fix) == (
        1,
        "FAIL",
        "apt-get install libelf-dev",
    )
    assert checks["openssl"].status == "OK"


def test_postgres_newest_version_and_missing() -> None:
    host = FakeHost()
    host.files |= {"/usr/lib/postgresql/9/bin/pgbench", "/usr/lib/postgresql/17/bin/postgres"}
    _, checks = run(host)
    assert checks["postgres"].status == "OK"
    assert checks["pgbench"].status == "FAIL"  # 17 is the newest and it has no pgbench
    assert "/usr/lib/postgresql/17/bin/pgbench" in checks["pgbench"].detail


def test_tree_source() -> None:
    host = FakeHost()
    _, checks = run(host)
    assert checks["default tree"].status == "OK"
    host.files.discard(str(tree.DEFAULT_TARBALL))
    _, checks = run(host)
    assert checks["default tree"].status == "WARN"
    host.files.add(str(tree.default_path() / ".git"))
    _, checks = run(host)
    assert checks["default tree"].detail.startswith("imported in")


def test_few_cores_warn_to_compare_ratios() -> None:
    host = FakeHost()
    host.ncpus = 2
    code, checks = run(host)
    assert code == 0
    assert checks["cpus"].status == "WARN"
    assert checks["cpus"].detail == "2 cores: timings are slow; compare only ratios"


def test_old_python_fails() -> None:
    host = FakeHost()
    host.py = (3, 10, 12)
    code, checks = run(host)
    assert (code, checks["python"].status) == (1, "FAIL")


def test_table_is_aligned_with_fix_lines_only_for_problems() -> None:
    rows = [
        checks.Check("a", "OK", "fine", "never shown"),
        checks.Check("longer name", "WARN", "hmm", "do this"),
        checks.Check("b", "FAIL", "bad", "do that"),
    ]
    lines = doctor.render(rows).splitlines()
    assert lines == [
        "OK    a            fine",
        "WARN  longer name  hmm",
        "                   fix: do this",
        "FAIL  b            bad",
        "                   fix: do that",
    ]
    assert (
        doctor.summary(rows) == "1 OK, 1 WARN, 1 FAIL: kbisect cannot work here: fix the FAIL rows"
    )


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    host = FakeHost()
    del host.tools["vng"]
    args = argparse.Namespace(recheck=False, json=True, arch="x86_64", target=None)
    assert doctor_command.main(args, host) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["kind"], data["version"], data["ok"]) == ("doctor", 1, False)
    vng = next(c for c in data["checks"] if c["name"] == "vng")
    assert vng["status"] == "FAIL"


def test_parser_accepts_the_options() -> None:
    args = cli.build_parser().parse_args(["doctor", "--recheck", "--json", "--arch", "all"])
    assert (args.recheck, args.json, args.arch) == (True, True, "all")


def _elf(types: list[int]) -> bytes:
    head = bytearray(64)
    head[:5] = b"\x7fELF\x02"
    struct.pack_into("<Q", head, 0x20, 64)
    struct.pack_into("<HH", head, 0x36, 56, len(types))
    for t in types:
        head += struct.pack("<I", t) + bytes(52)
    return bytes(head)


def test_is_static_elf() -> None:
    assert doctor_host.is_static_elf(_elf([1, 1, 4]))
    assert not doctor_host.is_static_elf(_elf([6, 3, 1]))  # PT_INTERP: dynamically linked
    assert not doctor_host.is_static_elf(b"#!/bin/sh\n")
    assert not doctor_host.Host().is_static(sys.executable)


def test_real_host_methods_answer(tmp_path: Path) -> None:
    host = doctor_host.Host()
    assert host.which("sh") is not None
    assert host.which("no-such-tool-kbisect") is None
    assert host.version(["no-such-tool-kbisect", "--version"]) == ""
    assert host.version([sys.executable, "--version"]).startswith("Python 3.")
    assert host.free_bytes(tmp_path / "not" / "yet") > 0


@pytest.mark.real
def test_real_doctor_prints_a_kvm_verdict() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kbisect", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    row = next(c for c in data["checks"] if c["name"] == "kvm x86_64")
    assert row["status"] in ("OK", "WARN")
    assert row["detail"].startswith(
        ("KVM usable", "KVM present but unusable", "KVM unknown", "no /dev/kvm")
    )
