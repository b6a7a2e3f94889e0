"""What a booting kernel prints, as every target sees it: the harness's own lines, a
panic or an oops, and the deadline for reaching the harness at all."""

from __future__ import annotations

import re
import time

from kbisect.core import progress
from kbisect.core.exceptions import BootError

PANIC = re.compile(r"Kernel panic|Oops:|BUG: |general protection fault|Unable to mount root")
GUEST = "kbisect-guest: "  # the harness's lines start with it (harness/guest.py)


def is_panic(line: str) -> bool:
    """The console line means the kernel failed: one rule for all targets."""
    return bool(PANIC.search(line))


class Console:
    """Follows what the machine prints: the harness's phases, live tps, panics, and the
    deadline for reaching the harness at all."""

    def __init__(self, boot_timeout: float) -> None:
        self.start = time.monotonic()
        self.boot_timeout = boot_timeout
        self.reached: float | None = None
        self.panic: str | None = None
        self.last_tps = 0.0
        self.marks: list[tuple[str, float]] = []  # each harness phase and when it began

    def phases(self, total: float) -> dict[str, float]:
        """Seconds per phase, as this side of the console saw them: `boot` up to the
        harness's first line, each harness phase up to the next one, and `shutdown` from
        the harness's `done` to the end of the boot (`total`, the same clock's)."""
        if self.reached is None:
            return {}
        out = {"boot": round(self.reached, 2)}
        ends = [t for _, t in self.marks[1:]] + [total]
        for (name, began), end in zip(self.marks, ends, strict=True):
            key = "shutdown" if name == "done" else name
            out[key] = round(out.get(key, 0.0) + max(0.0, end - began), 2)
        return out

    def __call__(self, line: str) -> None:
        if GUEST in line:
            self._guest(line.split(GUEST, 1)[1].strip())
        elif self.panic is None and is_panic(line):
            self.panic = line.strip()
        if self.reached is None and time.monotonic() - self.start > self.boot_timeout:
            raise BootError(f"the kernel did not reach the harness within {self.boot_timeout:.0f}s")

    def _guest(self, msg: str) -> None:
        if self.reached is None:
            self.reached = time.monotonic() - self.start
        kind, _, value = msg.partition(" ")
        if kind == "phase":
            self.marks.append((value.strip(), time.monotonic() - self.start))
            progress.step(f"guest: {value}")
        elif kind == "tps" and time.monotonic() - self.last_tps > 10:
            self.last_tps = time.monotonic()
            progress.step(f"guest: running, {value} tps")
