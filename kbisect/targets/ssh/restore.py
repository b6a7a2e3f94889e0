"""The machine target back on its known-good kernel: a clean reboot (or a power cycle
when that does not get there in time), polled until the known-good kernel answers."""

from __future__ import annotations

import contextlib
import time

from kbisect.core import progress
from kbisect.core.exceptions import CommandTimeout, InfraError
from kbisect.targets.ssh import check, config, kexec
from kbisect.targets.ssh.transport import Session, Unreachable

REBOOT_AGAIN_S = 60.0


class Restoring:
    """SshTarget's way back (a mixin: the target has these attributes)."""

    name: str
    m: config.Machine
    session: Session
    switched: bool
    rebooted: float

    def _restore(self, known: check.KnownGood, power: bool = False) -> None:
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

    def _await_known(self, known: check.KnownGood, reboot: bool) -> None:
        """Poll until the known-good kernel answers. With `reboot`, a kernel kbisect
        switched to that answers meanwhile (it was still booting when the reboot was
        asked for) is asked again."""
        start = time.monotonic()

        def back(out: str) -> bool:
            facts = check.parse(out)
            if known.matches(facts) is None:
                return True
            late = time.monotonic() - self.rebooted > REBOOT_AGAIN_S
            if reboot and late and kexec.nonce_of(facts.get("cmdline", "")):
                self._reboot()
            return False

        self.session.poll(
            check.facts_script(self.m, []), back, start + self.m.boot_timeout_s, lambda: None
        )
        self.switched = False
        took = time.monotonic() - start
        progress.step(f"{self.name}: back on {known.release} (verified) after {took:.0f}s")
