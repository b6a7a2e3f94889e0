"""Is KVM *usable*? Decided by booting something under `-accel kvm`, never by /dev/kvm.

Stage 1, on an arch whose PC BIOS runs one (`bootsector_probe` in core/arch/*.toml),
boots a 512-byte boot sector (generated here) under TCG (the control: proves QEMU
works) and under KVM with `-cpu host`, as vng uses it. A KVM failure there is
decisive. A pass is not: on a PVM host the boot sector runs while real kernels hang,
so stage 2 boots a real kernel (the `image` argument, or the newest kbisect build)
without a root fs; "VFS: Unable to mount root fs" proves it booted. Until a kernel
exists the answer is "unknown" and kbisect uses TCG. See docs/doctor.md.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kbisect.core import arch as arch_mod
from kbisect.core import atomic, clock, paths, proc, progress, reading
from kbisect.core.exceptions import CommandTimeout, UserError
from kbisect.targets import qemu
from kbisect.targets.vng import host as vm_host

MARKER = "KBISECT-KVM-PROBE-OK"
EXIT_VALUE = 0x10  # written to isa-debug-exit; QEMU exits (v << 1) | 1
EXIT_STATUS = (EXIT_VALUE << 1) | 1
KERNEL_MARKERS = ("VFS: Unable to mount root fs", "No working init found", "Run /init as init")
NO_KERNEL = "no kernel built yet; run kbisect build"
# (total, no-output) timeouts in seconds; the KVM boot sector took 5-7 s on a PVM host.
TIMEOUTS = {"bootsector": (60.0, 30.0), "kvm": (60.0, 30.0), "tcg": (300.0, 120.0)}
ACCEL_ENV = "KBISECT_ACCEL"
KVM_DEVICE = Path("/dev/kvm")


class BadAccel(UserError):
    """KBISECT_ACCEL holds something other than kvm or tcg."""


@dataclass(frozen=True)
class KvmStatus:
    usable: bool
    reason: str
    method: str  # "bootsector", "kernel", "foreign-arch", "no-device"
    decided: bool = True  # False: the probe could not tell (kbisect uses TCG meanwhile)
    control_ok: bool | None = None  # did the same boot succeed under TCG?


def boot_sector(marker: str = MARKER) -> bytes:
    """Real-mode code: print marker on COM1, then exit QEMU through isa-debug-exit."""
    code = bytearray(b"\xfa\x31\xc0\x8e\xd8\xfc")  # cli; xor ax,ax; mov ds,ax; cld
    code += b"\xbe\x00\x00"  # mov si, <message> (patched below)
    code += b"\xba\xf8\x03"  # mov dx, 0x3f8 (COM1)
    code += b"\xac\x84\xc0\x74\x03\xee\xeb\xf8"  # lodsb; test al,al; jz +3; out dx,al; jmp
    code += b"\xba\xf4\x00\xb0" + bytes([EXIT_VALUE]) + b"\xee"  # mov dx,0xf4; mov al,v; out
    code += b"\xf4\xeb\xfd"  # hlt; jmp hlt
    code[7:9] = struct.pack("<H", 0x7C00 + len(code))
    code += marker.encode() + b"\r\n\0"
    return bytes(code).ljust(510, b"\0") + b"\x55\xaa"


def qemu_base(a: arch_mod.Arch, accel: str, memory_mb: int) -> list[str]:
    # The serial console on stdout is all the probe reads; -no-reboot turns reboots into exits.
    headless = [*qemu.serial_console("stdio"), "-monitor", "none", "-net", "none"]
    size = qemu.memory(memory_mb, 1)
    return [qemu.binary(a), *qemu.accel(accel), *size, *headless, "-no-reboot"]


def bootsector_command(a: arch_mod.Arch, accel: str, image: Path) -> list[str]:
    # The boot sector is real-mode code that a PC's BIOS runs; isa-debug-exit ends QEMU.
    exit_device = ["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]
    drive = ["-drive", f"format=raw,file={image}"]
    return [*qemu_base(a, accel, 32), *qemu.machine(a), *exit_device, *drive]


def kernel_command(a: arch_mod.Arch, accel: str, image: Path) -> list[str]:
    # No root fs: the kernel panics at mount time; panic=-1 + -no-reboot make QEMU exit.
    boot = ["-kernel", str(image), "-append", f"console={a.console} panic=-1"]
    return [*qemu_base(a, accel, 512), *qemu.machine(a), *boot]


def judge_bootsector(returncode: int | None, output: str) -> str | None:
    """None when the boot sector ran to the end, else why not."""
    if MARKER in output and returncode == EXIT_STATUS:
        return None
    return _failure(returncode, output, "no marker on the serial console")


def judge_kernel(returncode: int | None, output: str) -> str | None:
    """None when the kernel got as far as mounting root (or further), else why not."""
    if any(m in output for m in KERNEL_MARKERS):
        return None
    if "Linux version" not in output:
        return _failure(returncode, output, "no kernel output")
    last = [ln.strip() for ln in output.splitlines() if ln.strip()][-1]
    return _failure(returncode, output, f"kernel stopped after: {last[:100]}")


def _failure(returncode: int | None, output: str, default: str) -> str:
    """The first QEMU error line (or default), and how QEMU ended (None: still running)."""
    errors = [
        ln.strip()
        for ln in output.splitlines()
        if ln.startswith("qemu-system") and ": warning: " not in ln
    ]
    what = errors[0] if errors else default
    if returncode is None:
        return what
    return (
        f"{what} (killed by signal {-returncode})"
        if returncode < 0
        else f"{what} (exit {returncode})"
    )


def _attempt(
    cmd: list[str],
    name: str,
    limits: tuple[float, float],
    judge: Callable[[int | None, str], str | None],
) -> str | None:
    """Run one probe boot, logged to the cache; None on success, else the reason."""
    log = paths.cache_dir() / "kvm-probe" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(progress.log_header(["doctor", "--recheck"]))
    lines: list[str] = []
    try:
        res = proc.run(
            cmd,
            log=log,
            timeout=limits[0],
            idle_timeout=limits[1],
            check=False,
            on_line=lines.append,
        )
    except CommandTimeout as exc:
        verdict = judge(None, "\n".join(lines))
        return verdict and f"{verdict}; {str(exc).split(' (log')[0]}"
    return judge(res.returncode, "\n".join(lines))


def newest_image(a: arch_mod.Arch) -> Path | None:
    """The newest kernel image kbisect built for this arch, if any."""
    found = (paths.cache_dir() / "builds").glob(f"*/{a.name}-*/*/{Path(a.image).name}")
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def _unusable(reason: str, method: str, control_ok: bool | None = True) -> KvmStatus:
    return KvmStatus(False, reason, method, decided=True, control_ok=control_ok)


def _unknown(reason: str, method: str, control_ok: bool) -> KvmStatus:
    return KvmStatus(False, reason, method, decided=False, control_ok=control_ok)


def probe(arch: str, image: Path | None = None) -> KvmStatus:
    """Boot under KVM and decide; `image` (or the newest build) settles a passing stage 1."""
    a = arch_mod.get(arch)
    if not a.is_native():
        host = arch_mod.host_arch()
        why = "KVM cannot run a foreign architecture"
        reason = f"{a.name} guests on an {host} host always run under TCG ({why})"
        return _unusable(reason, "foreign-arch", None)
    if not KVM_DEVICE.exists():
        return _unusable("no /dev/kvm", "no-device", None)
    if a.bootsector_probe and (stage1 := _probe_bootsector(a)) is not None:
        return stage1
    image = image or newest_image(a)
    if image is None:
        return _unknown(NO_KERNEL, "bootsector", control_ok=True)
    return _probe_kernel(a, image)


def _probe_bootsector(a: arch_mod.Arch) -> KvmStatus | None:
    """A status when the boot sector settles it (KVM fails, or QEMU is broken), else None."""
    img = paths.cache_dir() / "kvm-probe" / "bootsector.img"
    img.parent.mkdir(parents=True, exist_ok=True)
    img.write_bytes(boot_sector())
    limits = TIMEOUTS["bootsector"]
    progress.step("KVM probe: booting a boot sector under TCG (control) and KVM")
    cmd = bootsector_command(a, "tcg", img)
    if (control := _attempt(cmd, "bootsector-tcg", limits, judge_bootsector)) is not None:
        why = f"QEMU cannot run a boot sector even under TCG: {control}"
        return _unknown(why, "bootsector", control_ok=False)
    cmd = bootsector_command(a, "kvm", img)
    if (failed := _attempt(cmd, "bootsector-kvm", limits, judge_bootsector)) is not None:
        return _unusable(f"boot sector failed under KVM: {failed}", "bootsector")
    return None


def _probe_kernel(a: arch_mod.Arch, image: Path) -> KvmStatus:
    progress.step(f"KVM probe: booting {image} under KVM")
    failed = _attempt(kernel_command(a, "kvm", image), "kernel-kvm", TIMEOUTS["kvm"], judge_kernel)
    if failed is None:
        return KvmStatus(True, f"a kernel booted under KVM ({image.name})", "kernel")
    progress.step(f"KVM probe: {failed}; booting {image.name} under TCG (control)")
    control = _attempt(kernel_command(a, "tcg", image), "kernel-tcg", TIMEOUTS["tcg"], judge_kernel)
    if control is not None:
        why = f"{image} does not boot under TCG either ({control}): cannot tell"
        return _unknown(why, "kernel", control_ok=False)
    return _unusable(f"a kernel that boots under TCG failed under KVM: {failed}", "kernel")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def host_key(a: arch_mod.Arch) -> dict[str, Any]:
    """What a cached answer depends on, besides the probe method and image: the arch,
    QEMU's version, the host's kernel release and CPU model, and whether this user may
    open /dev/kvm (the device's presence is looked at first, on every call)."""
    facts = vm_host.facts(a.qemu)
    access = "rw" if os.access(KVM_DEVICE, os.R_OK | os.W_OK) else "no access"
    return {
        "arch": a.name,
        "qemu": facts["qemu"],
        "host": facts["kernel"],
        "cpu": facts["cpu_model"],
        "kvm": access,
    }


def _entry(e: Any) -> bool:
    """An entry as status() writes it (a damaged one is left out, never an error)."""
    if not (isinstance(e, dict) and isinstance(e.get("key"), dict)):
        return False
    st = e.get("status")
    fields = set(KvmStatus.__dataclass_fields__)
    if not (isinstance(st, dict) and set(st) == fields and isinstance(st["decided"], bool)):
        return False
    return isinstance(st["usable"], bool) and isinstance(st["reason"], str)


def _load() -> list[dict[str, Any]]:
    try:  # a cache: when damaged, the probe runs again and rewrites it
        entries = reading.json_table(paths.cache_dir() / "kvm.json", "").get("entries")
    except reading.CorruptFile:
        return []
    return [e for e in entries if _entry(e)] if isinstance(entries, list) else []


def lookup(
    entries: list[dict[str, Any]], host: dict[str, Any], image_sha: str | None
) -> KvmStatus | None:
    """A decided answer for this host wins; an undecided one only for the same image."""
    same = [e for e in entries if all(e["key"].get(k) == v for k, v in host.items())]
    pick = [e for e in same if e["status"]["decided"]] or [
        e for e in same if e["key"].get("image_sha256") == image_sha
    ]
    if not pick:
        return None
    return KvmStatus(**max(pick, key=lambda e: str(e["checked"]))["status"])


def status(arch: str, recheck: bool = False) -> KvmStatus:
    """The cached answer for this host (probing when there is none, or with recheck)."""
    a = arch_mod.get(arch)
    if not a.is_native() or not KVM_DEVICE.exists():
        return probe(arch)
    host = host_key(a)
    image = newest_image(a)
    sha = sha256(image) if image else None
    entries = _load()
    if not recheck and (hit := lookup(entries, host, sha)) is not None:
        return hit
    st = probe(arch, image)
    key = {**host, "method": st.method, "image_sha256": sha if st.method == "kernel" else None}
    checked = clock.utc_now()
    entries = [e for e in entries if e["key"] != key][-19:]
    entries.append({"key": key, "status": asdict(st), "checked": checked})
    atomic.write_json(paths.cache_dir() / "kvm.json", {"version": 1, "entries": entries})
    return st


def forced() -> str | None:
    """The KBISECT_ACCEL override, validated."""
    value = os.environ.get(ACCEL_ENV, "")
    if value and value not in ("kvm", "tcg"):
        raise BadAccel(f"{ACCEL_ENV}={value!r}: use kvm or tcg")
    return value or None


def accel(arch: str) -> str:
    """'kvm' or 'tcg' for vng: KBISECT_ACCEL wins, else the cached (or probed) answer."""
    return forced() or ("kvm" if status(arch).usable else "tcg")
