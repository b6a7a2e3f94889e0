"""`kbisect doctor`: can this host build, boot and measure kernels, and is KVM usable?

Each check is a small function of a `Host` (doctor/host.py; the tests replace its methods)
returning a `Check`: doctor/tools.py (programs, headers, PostgreSQL, root filesystems) and
doctor/machine.py (tree, disk, cores, memory, KVM). Exit 0 when kbisect can work (warnings
allowed), 1 when any check FAILs.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kbisect.core import arch as arch_mod
from kbisect.core.checks import FAIL, OK, WARN, Check
from kbisect.doctor.host import Host
from kbisect.doctor.machine import check_disk, check_kvm, check_machine, check_tree
from kbisect.doctor.tools import (
    HEADERS,
    TOOLS,
    check_busybox,
    check_cross,
    check_headers,
    check_image,
    check_postgres,
    check_python,
    check_qemu,
    check_tool,
    check_virtiofsd,
    check_vng,
)
from kbisect.targets import registry


def checks(host: Host, arches: list[str], recheck: bool = False) -> list[Check]:
    """Every check, in the order the table shows them."""
    known = [arch_mod.get(n) for n in arch_mod.names()]
    out = [check_python(host), check_vng(host)]
    out += [check_qemu(host, a, a.name in arches) for a in known]
    out += [check_tool(host, *tool) for tool in TOOLS]
    out += [check_cross(host, a, a.name in arches) for a in known if not a.is_native()]
    out += [check_image(host, a, a.name in arches) for a in known]
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


def run(
    host: Host, arches: list[str], recheck: bool = False, target: str | None = None
) -> list[Check]:
    """The host's checks, then (with target) the target's own."""
    results = checks(host, arches, recheck)
    return results + (registry.get(target).checks() if target else [])


def as_json(results: list[Check]) -> dict[str, Any]:
    return {
        "version": 1,
        "kind": "doctor",
        "ok": not any(c.status == FAIL for c in results),
        "summary": summary(results),
        "checks": [asdict(c) for c in results],
    }
