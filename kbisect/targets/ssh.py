"""A real machine reached over ssh (`kind = "ssh"` in a target file, machine.py): each
sample kexecs the machine into the kernel, verifies it, runs the harness there over ssh
and copies the result back; at the end (and on Ctrl-C) the machine is brought back to
its known-good kernel, verified. A hang, a panic or a silent harness power-cycles it
and records a boot failure. The emulated machine (kbisect/emu/) is one of these.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import shlex
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from kbisect import atomic, kexec, kimage, machine, proc, progress, scenario
from kbisect.arch import Arch
from kbisect.checks import FAIL, Check
from kbisect.exceptions import BootError, CommandTimeout, InfraError, UserError
from kbisect.remote import ConsoleFeed, Session, Unreachable, lock
from kbisect.targets import sshcheck, sshjob
from kbisect.targets.base import Job, Kernel, Target, WrongArch

REBOOT_AGAIN_S = 60.0


class MachineNotReady(UserError):
    """The machine is unreachable or lacks something kbisect needs."""


class SshTarget(Target):
    kind = "ssh"

    def __init__(self, name: str, arch: Arch, m: machine.Machine) -> None:
        super().__init__(name, arch)
        self.m = m
        self.session = Session(m)
        self.facts: dict[str, str] | None = None
        self.known: sshcheck.KnownGood | None = None
        self.switched = False
        self.rebooted = 0.0
        self.boots_dir = False  # workdir/boots exists on the machine
        self.majors_ok: set[int] = set()
        self.lock: IO[str] | None = None

    @classmethod
    def from_settings(cls, name: str, arch: Arch, settings: Mapping[str, Any]) -> Target:
        m = machine.load(name, settings)
        if arch.name != m.arch:
            raise UserError(f"--arch {arch.name}: target {name} runs {m.arch}")
        return cls(name, arch, m)

    @property
    def known_file(self) -> Path:
        return machine.state_dir(self.name) / "known-good.json"

    def describe(self) -> dict[str, Any]:
        known = self.known or self._stored_known()
        return {
            "kind": self.kind,
            "name": self.name,
            "arch": self.arch.name,
            "accel": None,
            "host": f"{self.m.host}:{self.m.port}",
            "switch": self.m.switch,
            "known_good": dataclasses.asdict(known) if known else None,
        }

    def headline(self, job: Job) -> str:
        return f"{self.m.switch} on {self.m.host}:{self.m.port}"

    # -- preflight ------------------------------------------------------------------------
    def _facts(self, majors: list[int]) -> dict[str, str]:
        script = sshcheck.facts_script(self.m, majors)
        try:  # the shared connection: a switch, reboot or power cycle drops it first
            out = self.session.run(script, timeout=60).output
        except (Unreachable, CommandTimeout) as exc:
            raise MachineNotReady(f"target {self.name}: cannot ssh to {exc}") from None
        return sshcheck.parse(out)

    def preflight(self, scen: scenario.Scenario | None = None) -> None:
        """Reachable, root, the arch, kexec, python3, (the scenario's PostgreSQL), lockdown
        off, LOAD_KEXEC off, no PostgreSQL running: else one line, before any install.
        Records the known-good kernel (bringing the machine back to it first if an
        earlier run left it on a kernel kbisect switched to)."""
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
        problem = sshcheck.failures(sshcheck.rows(self.m, facts, majors))
        if problem:
            raise MachineNotReady(f"target {self.name} is not ready: {problem}")
        self.facts, self.majors_ok = facts, set(majors)
        self.known = sshcheck.known_good(facts)
        atomic.write_json(self.known_file, dataclasses.asdict(self.known))

    def _stored_known(self) -> sshcheck.KnownGood | None:
        try:
            return sshcheck.KnownGood(**json.loads(self.known_file.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def checks(self) -> list[Check]:
        majors = sorted({int(scenario.load(n).data["postgres"]["major"]) for n in scenario.names()})
        try:
            facts = self._facts(majors)
        except MachineNotReady as exc:
            return [Check(f"{self.name}: ssh", FAIL, str(exc), "check host, port, user and key")]
        return sshcheck.doctor_rows(self.m, facts, majors)

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
            self.m.console, job.console, job.boot_dir / "machine-console.log", sshjob.is_panic
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

    def _install(self, image: Path) -> str:
        """A file in kbisect's dir on the machine, checksummed; its path there."""
        digest = hashlib.sha256(image.read_bytes()).hexdigest()
        where = f"{self.m.workdir}/kernels/{digest[:16]}"
        path = f"{where}/{image.name}"
        have = self.session.run(f"{self.m.sudo}sha256sum {shlex.quote(path)} 2>/dev/null").output
        if have.split()[:1] == [digest]:
            return path
        progress.step(f"copying {image.name} to {self.name}:{where}")
        self.session.check(f"{self.m.sudo}mkdir -p {shlex.quote(where)}")
        self.session.put([image], f"{path}.part")
        got = self.session.check(f"{self.m.sudo}sha256sum {shlex.quote(path)}.part").split()[:1]
        if got != [digest]:
            raise InfraError(f"{self.name}: {path} arrived corrupted ({got} != {digest})")
        self.session.check(f"{self.m.sudo}mv {shlex.quote(path)}.part {shlex.quote(path)}")
        return path

    def _switch(self, image: str, cmdline: str, ramdisk: str | None) -> None:
        if self.m.switch == "script":
            self._switch_by_script(image, cmdline, ramdisk)
            return
        progress.step(f"{self.name}: kexec into {image.rsplit('/', 1)[-1]} ({cmdline})")
        script = kexec.switch_script(image, cmdline, ramdisk)
        done = self.session.run(f"{self.m.sudo}sh -c {shlex.quote(script)}")
        if done.returncode != 0:
            raise BootError(f"kexec refused the kernel: {done.output.strip()[-200:]}")
        self.switched = True
        self.session.drop_master()

    def _switch_by_script(self, image: str, cmdline: str, ramdisk: str | None) -> None:
        """switch = "script": the user's local command boots the image (machine.py)."""
        assert self.m.switch_script is not None
        progress.step(f"{self.name}: switch_script into {image.rsplit('/', 1)[-1]} ({cmdline})")
        self.session.drop_master()
        self.switched = True
        done = proc.run(
            ["sh", "-c", self.m.switch_script],
            env=sshjob.script_env(self.m, image, cmdline, ramdisk),
            log=self.session.log,
            timeout=self.m.boot_timeout_s,
            check=False,
        )
        if done.returncode != 0:
            raise BootError(f"switch_script exited {done.returncode}: {done.output.strip()[-200:]}")

    def _await(self, nonce: str, feed: ConsoleFeed) -> None:
        start = time.monotonic()
        self.session.poll(
            "cat /proc/cmdline",
            lambda out: kexec.has_nonce(out, nonce),
            start + self.m.boot_timeout_s,
            lambda: f"kernel panic: {feed.panic[:160]}" if feed.panic else None,
        )
        progress.step(f"{self.name}: up with the nonce after {time.monotonic() - start:.0f}s")

    def _verify(self, want: dict[str, str | None]) -> None:
        facts = self._facts([])
        got = {"release": facts.get("release"), "build_id": sshcheck.build_id(facts)}
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
        self.session.put([sshjob.harness_tar(tar), scen], boots)
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

    # -- back to the known-good kernel ----------------------------------------------------
    def _restore(self, known: sshcheck.KnownGood, power: bool = False) -> None:
        """Reboot (or power-cycle) into the known-good kernel and verify it; a power cycle
        when a reboot does not get there in time; InfraError when nothing does."""
        for cycle in [True] if power else [False, True]:
            if cycle:
                self.session.power_cycle()
            else:
                self._reboot()
            try:
                self._await_known(known, reboot=not cycle)
                return
            except CommandTimeout:
                progress.step(f"{self.name}: not back on its known-good kernel in time")
        raise InfraError(f"{self.name} did not come back to its known-good kernel {known.release}")

    def _reboot(self) -> None:
        """A clean reboot into the machine's own default kernel (nothing left loaded)."""
        self.session.drop_master()
        with contextlib.suppress(Unreachable, CommandTimeout):  # down already, or going
            self.session.run(
                f"{self.m.sudo}sh -c 'kexec -u; systemctl --no-block reboot'", shared=False
            )
        self.rebooted = time.monotonic()

    def _await_known(self, known: sshcheck.KnownGood, reboot: bool) -> None:
        """Poll until the known-good kernel answers. With `reboot`, a kernel kbisect
        switched to that answers meanwhile (it was still booting when the reboot was
        asked for) is asked again."""
        start = time.monotonic()

        def back(out: str) -> bool:
            facts = sshcheck.parse(out)
            if known.matches(facts) is None:
                return True
            late = time.monotonic() - self.rebooted > REBOOT_AGAIN_S
            if reboot and late and kexec.nonce_of(facts.get("cmdline", "")):
                self._reboot()
            return False

        self.session.poll(
            sshcheck.facts_script(self.m, []), back, start + self.m.boot_timeout_s, lambda: None
        )
        self.switched = False
        took = time.monotonic() - start
        progress.step(f"{self.name}: back on {known.release} (verified) after {took:.0f}s")

    def close(self) -> None:
        try:
            if self.switched and self.known is not None:
                progress.step(f"{self.name}: back to its known-good kernel")
                self._restore(self.known)
        finally:
            if self.lock is not None:
                self.lock.close()
                self.lock = None
