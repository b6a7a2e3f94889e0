"""Where a built kernel runs the harness: the `Target` seam.

A target boots one kernel for each sample, runs the harness (harness/guest.py) there with
the sample's scenario, and leaves the harness's `guest-result.json` in the sample's boot
directory. Everything common to all targets lives once: what the kernel prints (panics,
the harness's lines, the boot deadline) in targets/console.py, the boot directory,
failure classes and the sample record in measure/sample.py; a target only knows how to
get the harness run, what it is (`describe()`, stored in every sample) and what it needs
(`preflight()`, `checks()`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from kbisect.core.arch import Arch
from kbisect.core.checks import Check
from kbisect.core.exceptions import UserError
from kbisect.kernel import manifest as buildmanifest
from kbisect.scenario.scenario import Scenario
from kbisect.targets import monitor as disturbance

IMAGE_NAMES = ("bzImage", "Image")


class KernelNotFound(UserError):
    """--kernel names nothing that exists."""


class WrongArch(UserError):
    """The kernel was built for another arch than the target runs."""


@dataclass(frozen=True)
class Kernel:
    """A kernel image, and its build manifest when it comes from `kbisect build`."""

    image: Path
    manifest: Mapping[str, Any] | None = None

    @classmethod
    def find(cls, spec: str | Path) -> Kernel:
        """An image file, or a build directory holding bzImage or Image."""
        path = Path(spec).expanduser()
        if path.is_dir():
            images = [path / n for n in IMAGE_NAMES if (path / n).is_file()]
            if not images:
                raise KernelNotFound(f"{path}: no bzImage or Image in this directory")
            path = images[0]
        if not path.is_file():
            raise KernelNotFound(f"{spec}: no such kernel image")
        manifest_file = path.parent / "manifest.json"
        manifest = None
        if manifest_file.exists():
            recover = "remove it to boot the image as one built elsewhere, or build it again"
            manifest = buildmanifest.read(manifest_file, recover)
        return cls(path.resolve(), manifest)

    @property
    def arch(self) -> str | None:
        """The arch its build manifest names (None for an image from elsewhere)."""
        return (self.manifest or {}).get("arch")

    def describe(self, release: str | None) -> dict[str, Any]:
        m = self.manifest or {}
        return {
            "image": str(self.image),
            "release": release,
            "commit": m.get("commit"),
            "config_hash": m.get("config_hash"),
            "manifest": dict(m) if m else None,
        }


@dataclass(frozen=True)
class Job:
    """One boot = one sample, as a target sees it. The target feeds every line the
    machine prints (console, harness) to `console`, and must stop by `timeout_s`
    (everything) and `idle_s` (no output at all)."""

    kernel: Kernel
    scen: Scenario
    append: tuple[str, ...]  # kernel command-line extras: the scenario's, then the user's
    boot_dir: Path  # on this host: scenario.json is here; guest-result.json must land here
    templates: Path  # on this host: the PostgreSQL template cache
    console: Callable[[str], None]
    log: Path  # console.log in boot_dir: every line, starting with the reproduce line
    timeout_s: float
    idle_s: float

    @property
    def scenario_file(self) -> Path:
        return self.boot_dir / "scenario.json"

    @property
    def result_file(self) -> Path:
        return self.boot_dir / "guest-result.json"


class Target(ABC):
    """A place where a built kernel runs the harness. Use as a context manager: `close()`
    runs at the end of a command, also on Ctrl-C (a machine goes back to its own kernel)."""

    kind: ClassVar[str]

    def __init__(self, name: str, arch: Arch) -> None:
        self.name = name
        self.arch = arch

    @classmethod
    def from_settings(cls, name: str, arch: Arch, settings: Mapping[str, Any]) -> Target:
        """The target a TOML file (or a built-in name) describes; UserError if it is wrong."""
        return cls(name, arch)

    def describe(self) -> dict[str, Any]:
        """What a sample records about where it ran: kind, name, arch, accel, ... (a
        target adds its own keys, or its accelerator)."""
        return {"kind": self.kind, "name": self.name, "arch": self.arch.name, "accel": None}

    def headline(self, job: Job) -> str:
        """A few words for the progress line of a boot (accelerator, size)."""
        return self.kind

    def preflight(self, scen: Scenario | None = None) -> None:
        """Before any build or boot: UserError naming what is missing (for `scen`, when
        given: e.g. the PostgreSQL major it pins)."""
        return None

    def checks(self) -> list[Check]:
        """Rows for `kbisect doctor --target NAME`."""
        return []

    def userland(self, scen: Scenario) -> dict[str, Any] | None:
        """What every sample records of the root fs the harness runs on for `scen` (e.g.
        the image's PostgreSQL and content hash), None when the target cannot say."""
        return None

    def validate(self, kernel: Kernel) -> None:
        """Before booting `kernel`: UserError if this target cannot run it."""
        if kernel.arch is not None and kernel.arch != self.arch.name:
            raise WrongArch(
                f"{kernel.image}: built for {kernel.arch}, but target "
                f"{self.name} runs {self.arch.name}"
            )

    def seat(self) -> Target:
        """The target a boot goes to: itself (a pool: one of its machines, pool/)."""
        return self

    @abstractmethod
    def boot(self, job: Job) -> None:
        """Boot job.kernel and run the harness; raise BootError or CommandTimeout when
        the kernel never got there. Leave the harness's result in job.result_file."""

    # The kernel runs on this host (vng): the host's CPUs are the sample's, and other
    # work on them disturbs it. False for a machine target, judged from inside instead.
    runs_here = True

    def monitor(self, job: Job, threshold: float) -> disturbance.Monitor:
        """What watches this host's CPUs while `job` boots (a sample's "disturbance")."""
        return disturbance.Monitor(threshold)

    def warn_if_busy(self) -> None:
        """The start of a run: one line on stderr when other work keeps this host busy."""
        disturbance.warn_if_busy()

    def wait_quiet(self, threshold: float) -> None:
        """Before a retake: wait until other work leaves this host's CPUs (monitor.py).
        A machine target is judged from inside, which no poll from here sees: no wait."""
        if self.runs_here:
            disturbance.wait_quiet(lambda: disturbance.busy_now(disturbance.WINDOW_S, threshold))

    def close(self) -> None:
        """End of the command: leave the place as it was found."""
        return None

    def __enter__(self) -> Target:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
