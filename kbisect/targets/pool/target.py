"""The pool as one Target (`Pool`), and each of its machines as a target of its own
(`Member`), whose samples record the pool and the machine that took them.

Used as a plain Target (a sequential bisection, `kbisect run`), a pool boots on its first
machine that is not quarantined: a sequence of boots never mixes machines unasked, since
a machine effect would pass for the kernel's. Spreading boots over the machines is the
dispatcher's (dispatch.py), which hands each task a `Member`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbisect.core import progress
from kbisect.core.arch import Arch
from kbisect.core.checks import Check
from kbisect.core.exceptions import InfraError, UserError
from kbisect.scenario.scenario import Scenario
from kbisect.targets import monitor as disturbance
from kbisect.targets.base import Job, Kernel, Target
from kbisect.targets.pool import config
from kbisect.targets.ssh.target import SshTarget
from kbisect.targets.vng.target import VngTarget


class NoMachineLeft(InfraError):
    """Every machine of a pool is quarantined."""


class TooManySlots(UserError):
    """More vng slots than this host has CPUs for."""


@dataclass
class Record:
    """What the dispatcher's quarantine rule counts (dispatch.py): strikes in a row per
    machine, and the machines that have had a good result."""

    strikes: dict[str, int] = field(default_factory=dict)
    good: set[str] = field(default_factory=set)


class Member(Target):
    """One machine of a pool: its own target, unchanged, and the pool's name recorded in
    every sample it takes (`pool`, `machine` in the sample's target)."""

    kind = "member"

    def __init__(self, pool: str, inner: Target, stopping: threading.Event) -> None:
        super().__init__(inner.name, inner.arch)
        self.pool = pool
        self.inner = inner
        self.runs_here = inner.runs_here
        self.stopping = stopping  # the pool's run was interrupted: no boot starts

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "pool": self.pool, "machine": self.name}

    def headline(self, job: Job) -> str:
        return self.inner.headline(job)

    def preflight(self, scen: Scenario | None = None) -> None:
        self.inner.preflight(scen)

    def checks(self) -> list[Check]:
        return self.inner.checks()

    def userland(self, scen: Scenario) -> dict[str, Any] | None:
        return self.inner.userland(scen)

    def validate(self, kernel: Kernel) -> None:
        self.inner.validate(kernel)

    def boot(self, job: Job) -> None:
        if self.stopping.is_set():  # a retry after the dispatcher ended this boot's command
            raise KeyboardInterrupt(f"pool {self.pool}: interrupted")
        self.inner.boot(job)

    def monitor(self, job: Job, threshold: float) -> disturbance.Monitor:
        return self.inner.monitor(job, threshold)

    def warn_if_busy(self) -> None:
        self.inner.warn_if_busy()

    def wait_quiet(self, threshold: float) -> None:
        self.inner.wait_quiet(threshold)

    def close(self) -> None:
        self.inner.close()


def machine_of(t: Target) -> str | None:
    """What a member drives, when two members could drive the same: an ssh host:port."""
    return f"{t.m.host}:{t.m.port}" if isinstance(t, SshTarget) else None


class Pool(Target):
    """N targets as one. `quarantined` (name -> why) is shared by every batch of the
    command: a machine taken out stays out."""

    kind = "pool"

    def __init__(self, name: str, arch: Arch, members: list[Target]) -> None:
        super().__init__(name, arch)
        config.check_distinct(name, [(m.name, machine_of(m)) for m in members])
        self.stopping = threading.Event()  # set by the dispatcher on an interruption
        self.members = [Member(name, m, self.stopping) for m in members]
        self.quarantined: dict[str, str] = {}
        self.record = Record()
        self.runs_here = any(m.runs_here for m in members)

    def live(self) -> list[Member]:
        """The machines not quarantined, in the file's order."""
        return [m for m in self.members if m.name not in self.quarantined]

    def quarantine(self, name: str, why: str) -> None:
        """Take a machine out for the rest of the command; NoMachineLeft if it was the last."""
        self.quarantined[name] = why
        progress.warn(f"pool {self.name}: machine {name} quarantined: {why}")
        if not self.live():
            raise NoMachineLeft(
                f"pool {self.name}: every machine is quarantined (last: {name}: {why})"
            )

    def seat(self) -> Member:
        """The machine a plain (sequential) boot goes to: the first one not quarantined."""
        live = self.live()
        if not live:
            raise NoMachineLeft(f"pool {self.name}: every machine is quarantined")
        return live[0]

    def describe(self) -> dict[str, Any]:
        members = [m.name for m in self.members]
        return {**super().describe(), "members": members, "quarantined": dict(self.quarantined)}

    def headline(self, job: Job) -> str:
        return self.seat().headline(job)

    def preflight(self, scen: Scenario | None = None) -> None:
        """Every machine's preflight; one that fails is quarantined (with a warning),
        unless all fail: then the first one's error, as a single target would raise it."""
        if scen is not None:
            self._check_slots(scen)
        failed: list[tuple[Member, Exception]] = []
        live = self.live()
        for m in live:
            try:
                m.preflight(scen)
            except (UserError, InfraError) as exc:
                failed.append((m, exc))
        if len(failed) == len(live) and failed:
            raise failed[0][1]
        for m, error in failed:
            self.quarantine(m.name, str(error))

    def _check_slots(self, scen: Scenario) -> None:
        """vng slots share this host: together their vCPUs must fit its CPUs."""
        slots = [m for m in self.live() if isinstance(m.inner, VngTarget)]
        if len(slots) < 2:
            return
        need = len(slots) * int(scen.data["guest"]["vcpus"])
        have = os.cpu_count() or 1
        if need > have:
            raise TooManySlots(
                f"pool {self.name}: {len(slots)} vng slots of {scen.data['guest']['vcpus']} "
                f"vCPUs need {need} CPUs, this host has {have}: list fewer vng members"
            )

    def checks(self) -> list[Check]:
        return [
            Check(f"{m.name}: {c.name}", c.status, c.detail, c.fix)
            for m in self.members
            for c in m.checks()
        ]

    def userland(self, scen: Scenario) -> dict[str, Any] | None:
        return self.seat().userland(scen)

    def validate(self, kernel: Kernel) -> None:
        for m in self.live():
            m.validate(kernel)

    def boot(self, job: Job) -> None:
        self.seat().boot(job)

    def monitor(self, job: Job, threshold: float) -> disturbance.Monitor:
        return self.seat().monitor(job, threshold)

    def warn_if_busy(self) -> None:
        here = [m for m in self.live() if m.runs_here][:1]  # this host's CPUs: once
        for m in here + [m for m in self.live() if not m.runs_here]:
            m.warn_if_busy()

    def wait_quiet(self, threshold: float) -> None:
        self.seat().wait_quiet(threshold)

    def close(self) -> None:
        """Every machine goes back to its own kernel, even when one of them fails to."""
        with contextlib.ExitStack() as stack:
            for m in self.members:
                stack.callback(m.close)


def build(
    label: str,
    arch: str | None,
    data: dict[str, Any],
    here: Path,
    make: Callable[[config.MemberSpec, str | None], Target],
) -> Pool:
    """The pool a file describes: every member built by `make` (the registry's), for
    `arch` (--arch, else the pool's own, resolved by the registry), all of one arch."""
    spec = config.parse(label, data, here)
    members = [make(m, arch) for m in spec.members]
    arches = sorted({m.arch.name for m in members})
    if len(arches) > 1:
        raise config.BadPool(
            f"pool {spec.name}: its members run different arches ({', '.join(arches)}): "
            "one kernel is built for all of them"
        )
    return Pool(spec.name, members[0].arch, members)
