"""The local target: each sample boots the kernel in a virtme-ng guest on this host.

KVM when kvm.py found it usable by booting, else TCG. A guest boots the root fs that
carries its scenario's PostgreSQL (rootfs.py: made once into the cache, with the host's
dirs under /kbisect); a native guest of a scenario with `postgres.source = "host"` sees
the host's own root fs instead (its PostgreSQL, its paths).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from kbisect.core import paths, proc
from kbisect.core.arch import Arch
from kbisect.pgbuild import store
from kbisect.scenario.scenario import Scenario
from kbisect.targets.base import Job, Target
from kbisect.targets.vng import command, disks, host, kvm, rootfs


def guest_argv(
    harness: Path, scenario_file: Path, out: Path, templates: Path, pycache: Path | None = None
) -> list[str]:
    """The harness's command line, in the guest's paths; `pycache`: where Python keeps
    its compiled modules (None: beside the sources, as the host's own root does)."""
    prefix = ["-X", f"pycache_prefix={pycache}"] if pycache is not None else []
    return [
        "python3",
        *prefix,
        str(harness / "guest.py"),
        "--scenario-json",
        str(scenario_file),
        "--out",
        str(out),
        "--template-dir",
        str(templates),
    ]


def boot_spec(job: Job, arch: Arch, accel: str, root: Path | None) -> command.Boot:
    """`root`: the guest's root fs (rootfs.find), None for the host's own."""
    if root is None:  # the guest sees the host's root: same paths inside
        shares = [command.Share(job.boot_dir), command.Share(job.templates)]
        argv = guest_argv(paths.harness_dir(), job.scenario_file, job.boot_dir, job.templates)
    else:  # a root fs of the guest's arch, the host's dirs under rootfs.GUEST_DIR
        shares = [
            command.Share(paths.harness_dir(), rootfs.GUEST_HARNESS, writable=False),
            command.Share(job.boot_dir, rootfs.GUEST_OUT),
            command.Share(job.templates, rootfs.GUEST_TEMPLATES),
            command.Share(rootfs.pycache_dir(root), rootfs.GUEST_PYCACHE),
        ]
        out = rootfs.GUEST_OUT
        argv = guest_argv(
            rootfs.GUEST_HARNESS,
            out / job.scenario_file.name,
            out,
            rootfs.GUEST_TEMPLATES,
            rootfs.GUEST_PYCACHE,
        )
    build = job.scen.data["postgres"].get("build")
    if build is not None:  # a PostgreSQL build, where its --prefix says (pgbuild/store.py)
        shares.append(command.Share(store.install_dir(build), rootfs.GUEST_PG, writable=False))
        argv += ["--pg-bindir", str(rootfs.GUEST_PG / "bin")]
    guest = job.scen.data["guest"]
    return command.Boot(
        image=job.kernel.image,
        arch=arch,
        cpus=guest["vcpus"],
        memory_mb=guest["memory_mb"],
        accel=accel,
        append=list(job.append),
        shares=shares,
        exec_argv=argv,
        root=root,
        disks=disks.vng_disks(job.scen.data, job.boot_dir),
    )


class VngTarget(Target):
    kind = "vng"

    @functools.cached_property
    def accel(self) -> str:
        return kvm.accel(self.arch.name)

    def root(self, scen: Scenario) -> Path | None:
        """The root fs a guest running `scen` boots; None: the host's own. A missing one
        is a UserError (preflight makes it when it can)."""
        if not rootfs.needs_root(self.arch, scen.data):
            return None
        return rootfs.find(self.arch, rootfs.pin_for(scen.data))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "accel": self.accel, "vm_host": host.facts(self.arch.qemu)}

    def userland(self, scen: Scenario) -> dict[str, Any] | None:
        return rootfs.userland(self.arch, scen.data)

    def headline(self, job: Job) -> str:
        return f"{self.accel}, {job.scen.data['guest']['vcpus']} vCPUs"

    def preflight(self, scen: Scenario | None = None) -> None:
        if scen is None:
            return
        disks.check_host(scen.data)  # the user's storage first: one line, before ~20 s of root
        if rootfs.needs_root(self.arch, scen.data):
            rootfs.ensure(self.arch, rootfs.pin_for(scen.data))

    def boot(self, job: Job) -> None:
        spec = boot_spec(job, self.arch, self.accel, self.root(job.scen))
        binary = command.binary()
        with disks.attached(spec.disks):  # a file-backed disk lives for this boot
            proc.run(
                command.command(spec, binary),
                env=command.env(binary),
                log=job.log,
                timeout=job.timeout_s,
                idle_timeout=job.idle_s,
                on_line=job.console,
                check=False,
            )
