"""A real machine reached over ssh (`kind = "ssh"` in a target file, machine.py): each
sample kexecs the machine into the kernel, verifies it, runs the harness there over ssh
and copies the result back; at the end (and on Ctrl-C) the machine is brought back to
its known-good kernel, verified. A hang, a panic or a silent harness power-cycles it
and records a boot failure. The emulated machine (targets/emu/) is one of these.
The switch is in switch.py, the way back in restore.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from kbisect.core import atomic, progress, reading
from kbisect.core.arch import Arch
from kbisect.core.checks import FAIL, Check
from kbisect.core.exceptions import BootError, CommandTimeout, InfraError, UserError
from kbisect.kernel import kimage
from kbisect.scenario import scenario
from kbisect.targets.base import Job, Kernel, Target, WrongArch
from kbisect.targets.console import is_panic
from kbisect.targets.ssh import check, config, kexec
from kbisect.targets.ssh import job as sshjob
from kbisect.targets.ssh.restore import Restoring
from kbisect.targets.ssh.switch import Switching
from kbisect.targets.ssh.transport import ConsoleFeed, Session, Unreachable, lock


class MachineNotReady(UserError):
    """The machine is unreachable or lacks something kbisect needs."""


class SshTarget(Switching, Restoring, Target):
    kind = "ssh"
    runs_here = False  # judged by the machine's steal time; this host only drives it

    def __init__(self, name: str, arch: Arch, m: config.Machine) -> None:
        super().__init__(name, arch)
        self.m = m
        self.session = Session(m)
        self.facts: dict[str, str] | None = None
        self.known: check.KnownGood | None = None
        self.switched = False
        self.rebooted = 0.0
        self.boots_dir = False  # workdir/boots exists on the machine
        self.majors_ok: set[int] = set()
        self.lock: IO[str] | None = None

    @classmethod
    def from_settings(cls, name: str, arch: Arch, settings: Mapping[str, Any]) -> Target:
        m = config.load(name, settings)
        if arch.name != m.arch:
            raise UserError(f"--arch {arch.name}: target {name} runs {m.arch}")
        return cls(name, arch, m)

    @property
    def known_file(self) -> Path:
        return config.state_dir(self.name) / "known-good.json"

    def describe(self) -> dict[str, Any]:
        known = self.known or self._stored_known()
        return {
            **super().describe(),
            "host": f"{self.m.host}:{self.m.port}",
            "switch": self.m.switch,
            "known_good": dataclasses.asdict(known) if known else None,
        }

    def headline(self, job: Job) -> str:
        return f"{self.m.switch} on {self.m.host}:{self.m.port}"

    # -- preflight ------------------------------------------------------------------------
    def _facts(self, majors: list[int]) -> dict[str, str]:
        script = check.facts_script(self.m, majors)
        try:  # the shared connection: a switch, reboot or power cycle drops it first
            out = self.session.run(script, timeout=60).output
        except (Unreachable, CommandTimeout) as exc:
            raise MachineNotReady(f"target {self.name}: cannot ssh to {exc}") from None
        return check.parse(out)

    def preflight(self, scen: scenario.Scenario | None = None) -> None:
        """Reachable, root, the arch, kexec, python3, (the scenario's PostgreSQL), lockdown
        off, LOAD_KEXEC off, no PostgreSQL running: else one line, before any install.
        Records the known-good kernel (bringing the machine back to it first if an
        earlier run left it on a kernel kbisect switched to)."""
        if scen is not None and "build" in scen.data["postgres"]:
            raise UserError(
                f"target {self.name}: a machine runs its own installed PostgreSQL; "
                "postgres.build (a PostgreSQL build) runs on vng guests only"
            )
        if self.lock is None:
            self.lock = lock(self.name)
        majors = [int(scen.data["postgres"]["major"])] if scen else []
        facts = self._facts(majors)
        stored = self._stored_known()
        if kexec.nonce_of(facts.get("cmdline", "")) and stored is not None:
            progress.step(f"{self.name} still runs a kernel kbisect switched to: restoring")
            self.known = stored
            self._restore(stored)
            facts = self._facts(majors)
        if kexec.nonce_of(facts.get("cmdline", "")):
            raise MachineNotReady(
                f"target {self.name} runs a kernel kbisect switched to ({facts.get('release')}) "
                "and no known-good kernel is recorded: reboot it into its own kernel"
            )
        problem = check.failures(check.rows(self.m, facts, majors))
        if problem:
            raise MachineNotReady(f"target {self.name} is not ready: {problem}")
        self.facts, self.majors_ok = facts, set(majors)
        self.known = self._known_good(facts)

    def _known_good(self, facts: dict[str, Any]) -> check.KnownGood:
        """What runs now is the machine's own kernel: record it as the known-good one."""
        known = check.known_good(facts)
        atomic.write_json(self.known_file, dataclasses.asdict(known))
        return known

    def _stored_known(self) -> check.KnownGood | None:
        try:  # a note of this host's: when damaged, the next preflight writes it again
            return check.KnownGood(**reading.json_table(self.known_file, ""))
        except (reading.CorruptFile, TypeError):
            return None

    def checks(self) -> list[Check]:
        majors = sorted({int(scenario.load(n).data["postgres"]["major"]) for n in scenario.names()})
        try:
            facts = self._facts(majors)
        except MachineNotReady as exc:
            return [Check(f"{self.name}: ssh", FAIL, str(exc), "check host, port, user and key")]
        return check.doctor_rows(self.m, facts, majors)

    def validate(self, kernel: Kernel) -> None:
        super().validate(kernel)
        found = kimage.arch(kernel.image.read_bytes()[:4096])
        if found is not None and found != self.arch.name:
            raise WrongArch(
                f"{kernel.image}: an {found} kernel, but {self.name} runs {self.arch.name}"
            )

    def _ready(self, scen: scenario.Scenario) -> None:
        """Preflight once per command; the scenario's PostgreSQL checked before installing."""
        major = int(scen.data["postgres"]["major"])
        if self.facts is None or major not in self.majors_ok:
            self.preflight(scen)

    # -- one boot -------------------------------------------------------------------------
    def boot(self, job: Job) -> None:
        self._ready(job.scen)
        assert self.known is not None and self.facts is not None
        want = sshjob.expected(job.kernel)
        nonce = kexec.new_nonce()
        cmdline = kexec.command_line(
            self.known.cmdline, job.append, nonce, self.facts.get("root_dev") or None
        )
        self.session.log = job.log
        feed = ConsoleFeed(
            self.m.console, job.console, job.boot_dir / "machine-console.log", is_panic
        )
        with feed:
            image = self._install(job.kernel.image)
            ramdisk = sshjob.initrd(job.kernel)
            on_machine = self._install(ramdisk) if ramdisk else None
            try:
                self._switch(image, cmdline, on_machine)
                self._await(nonce, feed)
                self._verify(want)
                self._measure(job, nonce)
            except (BootError, CommandTimeout, Unreachable) as exc:
                reason = f"kernel panic: {feed.panic[:160]}" if feed.panic else str(exc)
                progress.step(f"{self.name}: {reason}; power-cycling")
                self._restore(self.known, power=True)
                raise BootError(
                    f"{reason} (machine power-cycled, back on its known-good kernel)"
                ) from None

    def _verify(self, want: dict[str, str | None]) -> None:
        facts = self._facts([])
        got = {"release": facts.get("release"), "build_id": check.build_id(facts)}
        wrong = kexec.mismatch(want, got)
        if wrong:
            raise BootError(f"the machine runs another kernel than the one booted: {wrong}")

    def _measure(self, job: Job, nonce: str) -> None:
        boots = f"{self.m.workdir}/boots"
        if not self.boots_dir:
            self.session.check(f"{self.m.sudo}mkdir -p {shlex.quote(boots)}")
            self.boots_dir = True
        tar = job.boot_dir / f"{nonce}.tar"
        scen = job.boot_dir / f"{nonce}.json"
        atomic.write_bytes(scen, job.scenario_file.read_bytes())
        try:
            self.session.put([sshjob.harness_tar(tar), scen], boots)
        finally:
            tar.unlink(missing_ok=True)  # a copy of harness/: not a result to keep
        run_dir = f"{boots}/{nonce}"
        major = int(job.scen.data["postgres"]["major"])
        done = self.session.run(
            sshjob.harness_command(self.m, run_dir, major),
            timeout=job.timeout_s,
            idle_timeout=job.idle_s,
            on_line=job.console,
            capture=False,
        )
        progress.step(f"{self.name}: harness exited {done.returncode}")
        self.session.get(f"{run_dir}/out", job.boot_dir / "machine")
        result = job.boot_dir / "machine" / job.result_file.name
        if result.is_file():
            atomic.write_bytes(job.result_file, result.read_bytes())

    def close(self) -> None:
        try:
            if self.switched and self.known is not None:
                progress.step(f"{self.name}: back to its known-good kernel")
                self._restore(self.known)
        finally:
            # no ssh master outlives kbisect (ControlPersist would keep it a minute)
            with contextlib.suppress(InfraError):
                self.session.drop_master()
            if self.lock is not None:
                self.lock.close()
                self.lock = None
