"""Where kbisect keeps things: the cache (trees, build dirs, templates) and results; and
room to write there.

Room to write: a directory a run is about to fill (its results, the build cache) is
checked before any work, and a disk that fills during a run stops it in one line.

`check` is called before the first build or boot: the directory (or, when it does not
exist yet, its nearest existing parent) must be a directory, writable (probed by creating
a file there, which also catches a read-only mount as root) and hold the free space the
run's plan needs. `stopped` turns the OSError of a disk that filled or went read-only
during the run into a DiskFull line; every write before it was atomic, so `--resume`
continues from the last finished sample.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from kbisect.core.exceptions import InfraError

CHECKOUT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """$KBISECT_CACHE, else $XDG_CACHE_HOME/kbisect, else ~/.cache/kbisect."""
    if env := os.environ.get("KBISECT_CACHE"):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kbisect"


def results_dir() -> Path:
    """$KBISECT_RESULTS, else the checkout's results/ folder."""
    if env := os.environ.get("KBISECT_RESULTS"):
        return Path(env)
    return CHECKOUT / "results"


def harness_dir() -> Path:
    return CHECKOUT / "harness"


def configs_dir() -> Path:
    return CHECKOUT / "kernel-configs"


def scenarios_dir() -> Path:
    return CHECKOUT / "harness" / "scenarios"


def machine_dir(name: str) -> Path:
    """This host's notes about a machine target: known_hosts, its known-good kernel, ssh
    sockets, its running config."""
    return cache_dir() / "machines" / name


# -- room to write ----------------------------------------------------------------------
MIB = 1 << 20
PER_BOOT = 2 * MIB  # a sample, its console log and the guest's result, with room to spare
RESULTS_BASE = 8 * MIB  # the plan, the summary, the report and its plots
PER_BUILD = 1024 * MIB  # a kernel build's objects and image in the cache
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


class UnusableDir(InfraError):
    """A results or cache directory is not a directory, not writable, or too full for
    the run (checked before any build)."""


class DiskFull(InfraError):
    """The disk filled (or went read-only) during a run; what was finished is saved."""


def results_need(boots: int) -> int:
    """Bytes a run of `boots` boots (retries and retakes included) writes."""
    return RESULTS_BASE + boots * PER_BOOT


def check(path: Path, need: int, what: str) -> None:
    """`path` can take `need` more bytes, else one line (UnusableDir) naming `what`."""
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        where = "" if existing == path else f" ({existing} is a file)"
        raise UnusableDir(f"{what} {path}: not a directory{where}")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".kbisect-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UnusableDir(f"{what} {path}: not writable ({exc.strerror})") from None
    free = shutil.disk_usage(existing).free
    if free < need:
        raise UnusableDir(
            f"{what} {path}: {free / MIB:.1f} MiB free, the run needs about "
            f"{need / MIB:.0f} MiB; free some space or choose another directory"
        )


def stopped(exc: OSError) -> DiskFull | None:
    """The DiskFull line for a write that failed because the disk is full or read-only;
    None for any other OSError."""
    if exc.errno not in FULL:
        return None
    where = f" writing {exc.filename}" if exc.filename else ""
    return DiskFull(f"stopped{where}: {exc.strerror}; what was finished is saved")
