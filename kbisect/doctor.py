"""`kbisect doctor`: can this host build, boot and measure kernels, and is KVM usable?

Each check is a small function of a `Host` (whose methods the tests replace) returning a
`Check`. Exit 0 when kbisect can work (warnings allowed), 1 when any check FAILs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
from dataclasses import asdict
from glob import glob
from pathlib import Path

from kbisect import arch as arch_mod
from kbisect import disturbance, image, kvm, paths, proc, targets, tree
from kbisect.checks import FAIL, OK, WARN, Check
from kbisect.exceptions import EXIT_NEGATIVE, EXIT_OK, KbisectError

GIB = 1 << 30
EMULATED = "using TCG: timings are emulated, compare only ratios"


class Host:
    """Everything doctor asks the machine; tests replace these methods."""

    def which(self, name: str) -> str | None:
        """PATH, then the bin/ of the interpreter running kbisect (the venv)."""
        found = shutil.which(name) or str(Path(sys.executable).parent / name)
        return found if os.access(found, os.X_OK) else None

    def on_path(self, name: str) -> bool:
        return shutil.which(name) is not None

    def version(self, cmd: list[str]) -> str:
        """First output line of a version command ('' when it prints nothing or fails)."""
        try:
            out = proc.capture(cmd, check=False)
        except KbisectError:
            return ""
        return out.splitlines()[0].strip() if out else ""

    def exists(self, path: str | Path) -> bool:
        return Path(path).exists()

    def glob(self, pattern: str) -> list[str]:
        return sorted(glob(pattern))

    def pkg_config(self, name: str) -> bool:
        try:
            return proc.run(["pkg-config", "--exists", name], check=False).returncode == 0
        except KbisectError:
            return False

    def is_static(self, path: str) -> bool:
        with open(path, "rb") as f:
            return is_static_elf(f.read(1 << 16))

    def free_bytes(self, path: Path) -> int:
        while not path.exists():
            path = path.parent
        return shutil.disk_usage(path).free

    def cpus(self) -> int:
        return os.cpu_count() or 1

    def mem_bytes(self) -> int:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def python(self) -> tuple[int, int, int]:
        return sys.version_info[:3]

    def kvm(self, arch: str, recheck: bool) -> kvm.KvmStatus:
        return kvm.status(arch, recheck=recheck)

    def host_load(self) -> Check:
        return disturbance.check()


def is_static_elf(head: bytes) -> bool:
    """True for a 64-bit little-endian ELF with no PT_INTERP program header."""
    if head[:5] != b"\x7fELF\x02":
        return False
    try:
        (phoff,) = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        types = [struct.unpack_from("<I", head, phoff + i * phentsize)[0] for i in range(phnum)]
    except struct.error:  # truncated: cannot tell, so not "static"
        return False
    return 3 not in types  # PT_INTERP names the dynamic loader


def check_python(host: Host) -> Check:
    v = host.python()
    text = ".".join(map(str, v))
    if v >= (3, 11, 0):
        return Check("python", OK, text)
    return Check("python", FAIL, f"{text}: kbisect needs 3.11 or newer", "install Python 3.11+")


def check_tool(host: Host, name: str, missing: str, why: str, fix: str) -> Check:
    """A program with its version; `missing` is the status when it is absent."""
    path = host.which(name)
    if path is None:
        return Check(name, missing, f"missing: {why}", fix)
    return Check(name, OK, host.version([path, "--version"]) or path)


def check_vng(host: Host) -> Check:
    path = host.which("vng")
    if path is None:
        why = "kbisect boots every kernel with virtme-ng"
        return Check("vng", FAIL, f"missing: {why}", "run scripts/setup (installs it in .venv)")
    version = host.version([path, "--version"]) or path
    if not host.on_path("vng"):
        # kbisect runs vng from beside its own interpreter, with that dir on vng's PATH.
        return Check("vng", OK, f"{version} at {path} (used from there; not on your PATH)")
    return Check("vng", OK, version)


def check_qemu(host: Host, a: arch_mod.Arch, needed: bool) -> Check:
    fix = "apt-get install " + ("qemu-system-x86" if a.name == "x86_64" else "qemu-system-arm")
    return check_tool(host, a.qemu, FAIL if needed else WARN, f"{a.name} guests cannot boot", fix)


def check_cross(host: Host, a: arch_mod.Arch, needed: bool) -> Check:
    fix = f"apt-get install gcc-{a.cross_compile.rstrip('-').replace('_', '-')}"
    why = f"{a.name} builds unavailable"
    return check_tool(host, a.compiler(), FAIL if needed else WARN, why, fix)


def check_image(host: Host, a: arch_mod.Arch, needed: bool) -> Check:
    """A foreign-arch guest runs the harness on a root fs of its own arch."""
    root = image.root_for(a)
    if host.exists(root.parent / image.MANIFEST):
        return Check(f"{a.name} root fs", OK, str(root))
    why = f"missing: {a.name} guests cannot run the benchmark on this host"
    return Check(
        f"{a.name} root fs", FAIL if needed else WARN, why, f"kbisect image --arch {a.name}"
    )


def check_virtiofsd(host: Host) -> Check:
    # Informational: kbisect passes vng --force-9p, so guests share host dirs over 9p.
    note = "guests share files over 9p (vng --force-9p): kernels need CONFIG_9P_FS"
    bundled = "/usr/lib/qemu/virtiofsd"
    if host.exists(bundled) and host.version([bundled, "--version"]).startswith("virtiofsd ver"):
        return Check("virtiofsd", OK, f"{note}; QEMU's own virtiofsd takes other arguments")
    return Check("virtiofsd", OK, note)


def check_headers(host: Host, name: str, header: str, why: str, fix: str) -> Check:
    if host.exists(f"/usr/include/{header}") or host.pkg_config(name):
        return Check(name, OK, f"/usr/include/{header}")
    return Check(name, FAIL, f"missing {header}: {why}", fix)


def check_busybox(host: Host) -> Check:
    path = host.which("busybox")
    fix = "apt-get install busybox-static"
    if path is None:
        return Check("busybox", FAIL, "missing: vng builds the guest's initramfs with it", fix)
    version = host.version([path]).removesuffix(" multi-call binary.") or path
    if not host.is_static(path):
        return Check("busybox", WARN, f"{version}: dynamically linked", fix)
    return Check("busybox", OK, f"{version} (static)")


def check_postgres(host: Host) -> list[Check]:
    dirs = host.glob("/usr/lib/postgresql/*/bin")
    newest = max(
        dirs,
        key=lambda d: int(Path(d).parent.name) if Path(d).parent.name.isdigit() else 0,
        default="/usr/lib/postgresql/*/bin",
    )
    out = []
    for prog in ("postgres", "pgbench"):
        path = f"{newest}/{prog}"
        if host.exists(path):
            out.append(Check(prog, OK, host.version([path, "--version"]) or path))
        else:
            why = f"missing {path}: the guest cannot run the benchmark"
            out.append(Check(prog, FAIL, why, "apt-get install postgresql postgresql-contrib"))
    return out


def check_tree(host: Host) -> Check:
    imported = tree.default_path()
    if host.exists(imported / ".git"):
        return Check("default tree", OK, f"imported in {imported}")
    if host.exists(tree.DEFAULT_TARBALL):
        return Check("default tree", OK, f"{tree.DEFAULT_TARBALL} (imported on first use)")
    why = "no embedded default tree: pass --tree to your own kernel tree"
    return Check("default tree", WARN, why, "apt-get install linux-source-6.12")


def check_disk(host: Host) -> Check:
    where = paths.cache_dir()
    free = host.free_bytes(where)
    detail = f"{free / GIB:.1f} GiB free in {where}"
    fix = "free some space, or point KBISECT_CACHE at a bigger disk"
    if free < 10 * GIB:
        return Check("disk", FAIL, f"{detail}: a tree and its builds need 10-20 GiB", fix)
    if free < 30 * GIB:
        return Check("disk", WARN, f"{detail}: enough for one tree and a few builds", fix)
    return Check("disk", OK, detail)


def check_machine(host: Host) -> list[Check]:
    cpus, mem = host.cpus(), host.mem_bytes() / GIB
    fix = "use a machine with 4+ cores for absolute figures"
    cores = (
        Check("cpus", WARN, f"{cpus} cores: timings are slow; compare only ratios", fix)
        if cpus < 4
        else Check("cpus", OK, f"{cpus} cores")
    )
    memory = (
        Check("memory", WARN, f"{mem:.1f} GiB: guests get little memory", "add memory")
        if mem < 4
        else Check("memory", OK, f"{mem:.1f} GiB")
    )
    return [cores, memory]


def check_kvm(host: Host, arch: str, recheck: bool) -> Check:
    name = f"kvm {arch}"
    a = arch_mod.get(arch)
    try:
        forced = kvm.forced()
        if not a.is_native():
            st = kvm.probe(arch)
            return Check(name, WARN, f"{st.reason}: {EMULATED}", "measure on a native host")
        if not host.exists("/dev/kvm"):
            fix = "enable virtualization (BIOS, nested) and load kvm_intel/kvm_amd"
            return _forced(Check(name, WARN, f"no /dev/kvm: {EMULATED}", fix), forced)
        st = host.kvm(arch, recheck)
    except kvm.BadAccel as exc:
        return Check(name, FAIL, str(exc), f"unset {kvm.ACCEL_ENV}, or set it to kvm or tcg")
    except KbisectError as exc:
        return Check(name, FAIL, f"cannot decide: {exc}", "fix the rows above, then --recheck")
    return _forced(_kvm_check(name, st), forced)


def _kvm_check(name: str, st: kvm.KvmStatus) -> Check:
    logs = f"see {paths.cache_dir() / 'kvm-probe'}/*.log"
    if st.usable:
        return Check(name, OK, f"KVM usable: {st.reason}")
    if not st.decided:
        return Check(name, WARN, f"KVM unknown: {st.reason}; using TCG meanwhile", logs)
    detail = f"KVM present but unusable ({st.reason}): {EMULATED}"
    return Check(name, WARN, detail, f"{logs}; kbisect doctor --recheck after fixing the host")


def _forced(check: Check, forced: str | None) -> Check:
    if forced is None:
        return check
    return Check(
        check.name, check.status, f"{check.detail} [{kvm.ACCEL_ENV}={forced} wins]", check.fix
    )


# (program, status when missing, why it matters, fix)
TOOLS = [
    ("udevadm", FAIL, "without it vng loses the guest's output", "apt-get install udev"),
    ("gcc", FAIL, "kernels cannot build", "apt-get install build-essential"),
    ("make", FAIL, "kernels cannot build", "apt-get install build-essential"),
    ("flex", FAIL, "kernels cannot build", "apt-get install flex"),
    ("bison", FAIL, "kernels cannot build", "apt-get install bison"),
    ("bc", FAIL, "kernels cannot build", "apt-get install bc"),
    ("ccache", WARN, "every build starts cold (slow bisects)", "apt-get install ccache"),
]
# (pkg-config name, header, why it matters, fix)
HEADERS = [
    ("libelf", "libelf.h", "objtool cannot build", "apt-get install libelf-dev"),
    (
        "openssl",
        "openssl/opensslv.h",
        "certificate tools cannot build",
        "apt-get install libssl-dev",
    ),
]


def checks(host: Host, arches: list[str], recheck: bool = False) -> list[Check]:
    """Every check, in the order the table shows them."""
    known = [arch_mod.get(n) for n in arch_mod.names()]
    out = [check_python(host), check_vng(host)]
    out += [check_qemu(host, a, a.name in arches) for a in known]
    out += [check_tool(host, *tool) for tool in TOOLS]
    out += [check_cross(host, a, a.name in arches) for a in known if not a.is_native()]
    out += [check_image(host, a, a.name in arches) for a in known if not a.is_native()]
    out += [check_headers(host, *header) for header in HEADERS]
    out += [check_virtiofsd(host), check_busybox(host), *check_postgres(host)]
    out += [check_tree(host), check_disk(host), *check_machine(host), host.host_load()]
    return out + [check_kvm(host, a, recheck) for a in arches]


def render(results: list[Check]) -> str:
    """An aligned table: status, check, detail; WARN/FAIL rows get a `fix:` line."""
    width = max(len(c.name) for c in results)
    lines = []
    for c in results:
        lines.append(f"{c.status:<4}  {c.name:<{width}}  {c.detail}")
        if c.fix and c.status != OK:
            lines.append(f"{'':<4}  {'':<{width}}  fix: {c.fix}")
    return "\n".join(lines)


def summary(results: list[Check]) -> str:
    n = {s: sum(c.status == s for c in results) for s in (OK, WARN, FAIL)}
    if n[FAIL]:
        verdict = "kbisect cannot work here: fix the FAIL rows"
    else:
        verdict = "kbisect can work here" + (" (read the warnings)" if n[WARN] else "")
    return f"{n[OK]} OK, {n[WARN]} WARN, {n[FAIL]} FAIL: {verdict}"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--recheck", action="store_true", help="probe KVM again instead of using the cached answer"
    )
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument(
        "--arch",
        default=arch_mod.host_arch(),
        choices=[*arch_mod.names(), "all"],
        help="guest architecture to check (default: this host's; all: every one)",
    )
    parser.add_argument(
        "--target",
        metavar="NAME",
        help="also check a target (a machine: its ssh, kexec, PostgreSQL, kernel)",
    )


def main(args: argparse.Namespace, host: Host | None = None) -> int:
    arches = arch_mod.names() if args.arch == "all" else [args.arch]
    results = checks(host or Host(), arches, args.recheck)
    if args.target:
        results += targets.get(args.target).checks()
    failed = any(c.status == FAIL for c in results)
    if args.json:
        data = {
            "version": 1,
            "kind": "doctor",
            "ok": not failed,
            "summary": summary(results),
            "checks": [asdict(c) for c in results],
        }
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(render(results))
        print(summary(results))
    return EXIT_NEGATIVE if failed else EXIT_OK
