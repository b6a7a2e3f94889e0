"""The machine a study (or one share of it) ran on: what `kbisect study merge` compares
before it puts shares from several runners into one report.

CPU model and core count from /proc, the host kernel's command line without the tokens
that name a boot rather than a configuration (BOOT_IMAGE=, initrd=, root=...), and what
the target says about itself (kind, arch, accelerator).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from kbisect.targets.base import Target
from kbisect.targets.vng import host as vm_host

COMPARED = ("cpu_model", "cores", "cmdline_base", "target_kind", "arch", "accel")
PER_BOOT = ("BOOT_IMAGE=", "initrd=", "root=", "resume=", "rd.", "systemd.")


def cmdline_base(cmdline: str) -> str:
    return " ".join(t for t in cmdline.split() if not t.startswith(PER_BOOT))


def host(target: Target) -> dict[str, Any]:
    t = target.describe()
    return {
        "cpu_model": vm_host.cpu_model(vm_host.read("/proc/cpuinfo")),
        "cores": os.cpu_count(),
        "cmdline_base": cmdline_base(vm_host.read("/proc/cmdline")),
        "target_kind": t.get("kind"),
        "target": t.get("name"),
        "arch": t.get("arch"),
        "accel": t.get("accel"),
        "hostname": os.uname().nodename,
    }


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """`cores: 2 vs 96` for each compared field that differs."""
    return [f"{k}: {a.get(k)} vs {b.get(k)}" for k in COMPARED if a.get(k) != b.get(k)]
