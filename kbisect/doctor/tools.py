"""doctor's checks of the programs, headers, PostgreSQL and root filesystems kbisect
needs to build and boot kernels (each a function of a `Host` returning a `Check`)."""

from __future__ import annotations

from pathlib import Path

from kbisect.core import arch as arch_mod
from kbisect.core.checks import FAIL, OK, WARN, Check
from kbisect.doctor.host import Host
from kbisect.scenario import server
from kbisect.targets.vng import rootfs

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
    fix = f"apt-get install {a.qemu_package}"
    return check_tool(host, a.qemu, FAIL if needed else WARN, f"{a.name} guests cannot boot", fix)


def check_cross(host: Host, a: arch_mod.Arch, needed: bool) -> Check:
    fix = f"apt-get install gcc-{a.cross_compile.rstrip('-').replace('_', '-')}"
    why = f"{a.name} builds unavailable"
    return check_tool(host, a.compiler(), FAIL if needed else WARN, why, fix)


def check_image(host: Host, a: arch_mod.Arch, needed: bool) -> Check:
    """A guest runs the harness on a root fs carrying its scenario's PostgreSQL (the shipped
    scenarios pin DEFAULT_PIN); a foreign-arch guest always does."""
    pin = server.DEFAULT_PIN
    name = f"{a.name} root fs (PostgreSQL {pin.major})"
    root = rootfs.root_for(a, pin)
    if host.exists(root.parent / rootfs.MANIFEST):
        return Check(name, OK, str(root))
    why = f"missing: made on the first boot that needs it (as root, ~{rootfs.BUILD_S} s)"
    level = FAIL if needed and not a.is_native() else WARN
    return Check(name, level, why, f"kbisect image --arch {a.name} --pg-major {pin.major}")


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
