"""The machine target's switch into a kernel: the image copied over (checksummed), kexec
(or the user's switch_script), and the wait for the boot nonce on /proc/cmdline."""

from __future__ import annotations

import hashlib
import shlex
import time
from pathlib import Path

from kbisect.core import proc, progress
from kbisect.core.exceptions import BootError, InfraError
from kbisect.targets.ssh import config, job, kexec
from kbisect.targets.ssh.transport import ConsoleFeed, Session


class Switching:
    """SshTarget's switch steps (a mixin: the target has these attributes)."""

    name: str
    m: config.Machine
    session: Session
    switched: bool

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
            env=job.script_env(self.m, image, cmdline, ramdisk),
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
