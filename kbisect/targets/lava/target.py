"""A LAVA lab as a Target: each boot is one LAVA job on one device of the lab's type.

The device that ran the job is the sample's machine (`machine` in its target, as a pool
member's), so compare, study and bisection over a device type block by device as over a
pool; the job's id, device and LAVA's own time for it are in the sample too (`lava`).
How a job ends, in kbisect's exits: the lab's own failure before the kernel reached the
ramdisk's shell (LAVA's Infrastructure, Configuration, Bug, Canceled errors; a job that
never starts; an unreachable server) is a LabError (exit 3, a pool quarantines such a
device's target); a kernel that never reached the shell is a BootError (5); the harness's
result decides the rest as for every target (measure/sample.py), and a job that passed
without the harness's result or without a tps measurement is a BenchmarkError (6).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kbisect.core import atomic
from kbisect.core.arch import Arch
from kbisect.core.checks import FAIL, OK, Check
from kbisect.core.exceptions import BenchmarkError, BootError, UserError
from kbisect.scenario.scenario import Scenario
from kbisect.targets import qemu
from kbisect.targets.base import Job, Target
from kbisect.targets.console import is_panic
from kbisect.targets.lava import config, files, job, lab
from kbisect.targets.vng import disks, kvm, rootfs


class LavaTarget(Target):
    kind = "lava"

    def __init__(self, name: str, arch: Arch, settings: config.Lab) -> None:
        super().__init__(name, arch)
        self.lab = settings
        self.runs_here = settings.local  # lava-run's QEMU runs on this host's CPUs
        self.jobs = 0
        self.published: dict[Path, str] = {}
        self.last: dict[str, Any] | None = None  # the last job: id, device, its time

    @classmethod
    def from_settings(cls, name: str, arch: Arch, settings: Mapping[str, Any]) -> Target:
        return cls(name, arch, config.load(name, settings))

    def describe(self) -> dict[str, Any]:
        where = self.lab.server if not self.lab.local else "local"
        out = {**super().describe(), "dispatcher": where, "device_type": self.lab.device_type}
        if self.last is not None:
            out.update(machine=self.last["device"], lava=dict(self.last))
        return out

    def headline(self, job: Job) -> str:
        return f"LAVA {self.lab.device_type} ({'lava-run' if self.lab.local else self.lab.server})"

    def root(self, scen: Scenario) -> Path:
        return rootfs.find(self.arch, rootfs.pin_for(scen.data))

    def preflight(self, scen: Scenario | None = None) -> None:
        lab.require(self.lab)
        if not self.lab.local:
            self.lab.token()  # there and readable: before anything is written
        if scen is None:
            return
        if scen.data["postgres"].get("build") is not None or disks.vng_disks(scen.data, Path()):
            raise UserError(
                f"target {self.name}: a LAVA job runs the scenario's packaged PostgreSQL on "
                f"tmpfs: scenario {scen.name} asks for a PostgreSQL build or a disk"
            )
        rootfs.ensure(self.arch, rootfs.pin_for(scen.data))

    def checks(self) -> list[Check]:
        """`kbisect doctor --target`: the command that reaches the lab, and the token."""
        probes: list[tuple[str, Callable[[], str]]] = [
            ("lab command", lambda: lab.require(self.lab)),
            ("token", self._token),
        ]
        rows = []
        for what, probe in probes:
            try:
                rows.append(Check(what, OK, probe(), ""))
            except UserError as exc:
                rows.append(Check(what, FAIL, str(exc), "docs/lava.md"))
        return rows

    def _token(self) -> str:
        if self.lab.local:
            return "none needed (lava-run on this host)"
        self.lab.token()
        return f"read from {self.lab.token_source}"

    def userland(self, scen: Scenario) -> dict[str, Any] | None:
        return rootfs.userland(self.arch, scen.data)

    def spec(self, j: Job, kernel: str, ramdisk: str, root: str) -> job.Spec:
        guest, t = j.scen.data["guest"], j.scen.data["timeouts"]
        return job.Spec(
            name=f"kbisect {j.scen.name} {j.kernel.image.parent.name[:12]}",
            device_type=self.lab.device_type,
            tags=self.lab.tags,
            arch=self.arch,
            kernel=kernel,
            ramdisk=ramdisk,
            rootfs=root,
            append=j.append,
            memory_mb=int(guest["memory_mb"]),
            cpus=int(guest["vcpus"]),
            boot_s=int(t["boot_s"]),
            total_s=int(t["total_s"]),
            idle_s=int(t["idle_s"]),
        )

    def boot(self, j: Job) -> None:
        self.last = None
        root = self.root(j.scen)
        work = j.boot_dir / "lava"
        work.mkdir(exist_ok=True)
        ramdisk = files.ramdisk(work / "ramdisk.cpio.gz", root / "bin/busybox", j.scenario_file)
        urls = [files.url(self.lab, p, self.published) for p in (j.kernel.image, ramdisk)]
        urls.append(files.url(self.lab, files.rootfs(root), self.published))
        spec = self.spec(j, *urls)
        job_file = work / "job.yaml"
        atomic.write_text(job_file, job.job_text(spec))
        devices = self.lab.devices
        device = devices[self.jobs % len(devices)] if devices else None
        self.jobs += 1
        if self.lab.local and device is None:
            device = work / "qemu-local.yaml"
            accel = qemu.accel(kvm.accel(self.arch.name))
            atomic.write_text(device, job.device_text(self.arch, accel, spec.memory_mb, spec.cpus))

        def seen(line: str) -> None:
            said = job.target_line(line)
            if said is not None:
                j.console(said)

        ran = lab.run(self.lab, job_file, device, j.log, seen, j.timeout_s + spec.boot_s)
        self._settle(j, ran)

    def _settle(self, j: Job, ran: lab.Ran) -> None:
        out = job.read(ran.lines)
        self.last = {"job": ran.job_id, "device": ran.device, "job_s": out.job_s}
        where = f"LAVA job {ran.job_id} on {ran.device}"
        if out.lab_fault():
            raise lab.LabError(f"{where}: {out.error_type}: {out.error or 'failed'}")
        harness = out.harness
        if harness is not None:
            atomic.write_json(j.result_file, harness)
        if not out.reached:
            panic = any(is_panic(job.target_line(x) or "") for x in ran.lines)
            why = "a kernel panic or oops" if panic else (out.error or "no shell on the console")
            raise BootError(f"{where}: the kernel never reached kbisect's ramdisk shell: {why}")
        if harness is None:
            why = out.error or "the test ended early"
            raise BenchmarkError(f"{where}: no harness result in the job's log ({why})")
        if harness.get("status") == "ok" and out.measurement is None:
            raise BenchmarkError(f"{where}: its results have no tps measurement")
