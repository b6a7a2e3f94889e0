"""doctor's checks of the host itself: the default tree, disk, cores and memory, and
whether KVM is usable (each a function of a `Host` returning a `Check`)."""

from __future__ import annotations

from kbisect.core import arch as arch_mod
from kbisect.core import paths
from kbisect.core.checks import FAIL, OK, WARN, Check
from kbisect.core.exceptions import KbisectError
from kbisect.doctor.host import Host
from kbisect.source import tree
from kbisect.targets.vng import kvm

GIB = 1 << 30
EMULATED = "using TCG: timings are emulated, compare only ratios"


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
