"""Where kbisect keeps things: the cache (trees, build dirs, templates) and results; the
one check of every path kbisect is given or makes; and room to write there.

The boundary: before any work, every path (an --out, -o, --history, a scenario, study or
target file, $KBISECT_CACHE, $KBISECT_RESULTS) goes through `look` once: a path the OS
refuses (a name over 255 bytes, the whole over 4095), a symbolic link to nothing, a loop
of links, a file on the way or of the wrong kind is one line naming the option and the
path, never an OSError out of exists() or mkdir(). An output (`output`) is also not a
symbolic link (kbisect would write through it, or replace it) and lies in a writable
directory; nothing is created before the inputs are accepted. A name used as a path
(`name`: `emu --name`) is [A-Za-z0-9._-] and not `.` or `..`, so it stays where it goes.

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

from kbisect.core.exceptions import InfraError, KbisectError, UserError

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


def names_file(name: str) -> bool:
    """A scenario, study, target or pool given by its file (a path, or NAME.toml), not by
    a name to look up."""
    return "/" in name or name.endswith(".toml")


def saved(name: str) -> str:
    """How a run records a scenario or target it was given: a file as an absolute path
    (--resume may run from elsewhere), a name as it is."""
    return str(Path(name).expanduser().resolve()) if names_file(name) else name


def machine_dir(name: str) -> Path:
    """This host's notes about a machine target: known_hosts, its known-good kernel, ssh
    sockets, its running config."""
    return cache_dir() / "machines" / name


# -- the path boundary ------------------------------------------------------------------
NAME_MAX = 255  # bytes in one name of a path (Linux)
PATH_MAX = 4096  # bytes in a whole path, its final NUL included


class BadPath(UserError):
    """A path the user gave that cannot be used: too long, a dangling link or a loop, a
    file on the way, the wrong kind, a symbolic link to write through, not writable, or a
    name that would leave its directory."""


class UnusableDir(InfraError):
    """A results or cache directory is not a directory, not writable, or too full for
    the run (checked before any build)."""


class DiskFull(InfraError):
    """The disk filled (or went read-only) during a run; what was finished is saved."""


def why_not(path: Path) -> str | None:
    """Why no file can be at `path` whatever it is for (too long, a loop of symbolic links,
    a link to nothing or a file on the way, no permission to look), or None: it exists,
    or could be made. Never raises: Python's exists() and is_dir() raise on a long name."""
    raw = os.fsencode(path)
    if len(raw) >= PATH_MAX:
        return f"{len(raw)} bytes long, more than a path may have ({PATH_MAX - 1})"
    if any(len(part) > NAME_MAX for part in raw.split(b"/")):
        return f"a name in it is longer than {NAME_MAX} bytes"
    try:
        os.stat(path)
    except OSError as exc:
        return _why(path, exc)
    return None


def _why(path: Path, exc: OSError) -> str | None:
    on_the_way = (path, *path.parents)
    if exc.errno == errno.ENOENT:  # missing, which is fine, unless a link on the way dangles
        for p in on_the_way:
            if os.path.islink(p) and not os.path.exists(p):
                return f"{'' if p == path else f'{p} is '}a symbolic link to nothing"
        return None
    if exc.errno == errno.ELOOP:
        return "a loop of symbolic links"
    if exc.errno == errno.ENOTDIR:
        for p in reversed(path.parents):
            if os.path.lexists(p) and not os.path.isdir(p):
                return f"not a directory ({p} is a file)"
        return "not a directory"
    return exc.strerror or str(exc)


Error = type[KbisectError]


def look(path: Path, what: str, want: str = "", error: Error = BadPath) -> bool:
    """Whether `path` exists, once it is known to be a usable path (`why_not`) of the kind
    wanted ("dir", "file" or "" for either) if it exists; else `error`, one line naming
    `what` (the option) and the path."""
    if (why := why_not(path)) is not None:
        raise error(f"{what} {path}: {why}")
    if not os.path.exists(path):
        return False
    if want == "dir" and not os.path.isdir(path):
        raise error(f"{what} {path}: not a directory")
    if want == "file" and os.path.isdir(path):
        raise error(f"{what} {path}: is a directory, not a file")
    return True


def writable(path: Path, what: str, error: Error = BadPath) -> Path:
    """`path` is a directory that is or can be made, and writable (probed by creating a
    file in it, or in its nearest existing parent, which catches a read-only mount as
    root); that existing directory, else `error`. Creates nothing that stays."""
    look(path, what, "dir", error)
    existing = path
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".kbisect-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise error(f"{what} {path}: not writable ({exc.strerror})") from None
    return existing


def output(path: Path, what: str, want: str) -> None:
    """An output the user named (`want` "file": export -o, ktest-config --out; "dir":
    history --out, a run's --out): not a symbolic link (kbisect would write through it, or
    replace it), of the kind wanted, in a writable directory; checked before any input is
    read, and nothing is made (BadPath, exit 2)."""
    not_a_link(path, what, want)
    look(path, what, want)
    writable(path if want == "dir" else path.parent, what)


def not_a_link(path: Path, what: str, want: str) -> None:
    """An output is written where it is named, never through a symbolic link there."""
    if os.path.islink(path):
        kind = "directory" if want == "dir" else "file"
        raise BadPath(f"{what} {path}: a symbolic link; name the {kind} itself")


def environment() -> None:
    """$KBISECT_CACHE and $KBISECT_RESULTS, when set, are usable paths to a directory
    (checked once, before any command; a room check follows where one writes)."""
    for var, what in (("KBISECT_CACHE", "the cache"), ("KBISECT_RESULTS", "results dir")):
        if value := os.environ.get(var):
            look(Path(value), f"{what} (${var})", "dir", UnusableDir)


# -- room to write ----------------------------------------------------------------------
MIB = 1 << 20
PER_BOOT = 2 * MIB  # a sample, its console log and the guest's result, with room to spare
RESULTS_BASE = 8 * MIB  # the plan, the summary, the report and its plots
PER_BUILD = 1024 * MIB  # a kernel build's objects and image in the cache
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


def results_need(boots: int) -> int:
    """Bytes a run of `boots` boots (retries and retakes included) writes."""
    return RESULTS_BASE + boots * PER_BOOT


def check(path: Path, need: int, what: str) -> None:
    """`path` is a usable, writable directory (`writable`) that can take `need` more
    bytes, else one line (UnusableDir) naming `what`."""
    existing = writable(path, what, UnusableDir)
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
