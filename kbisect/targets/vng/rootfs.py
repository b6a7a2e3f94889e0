"""`kbisect image`: the root file system a guest runs the harness on, pinned to the
PostgreSQL its scenario names.

virtme-ng shares the host's own root with a native guest, so that guest would run
whatever PostgreSQL the host has. A scenario pins a major (`postgres.major`, optionally
an exact Debian version); unless it says `postgres.source = "host"`, the guest boots a
Debian root that carries that server, made once into the cache with mmdebstrap's
`extract` variant from the suite that ships the major (scenario/server.py SUITES). The packages are
unpacked and no maintainer script runs, so no foreign binary ever runs on the host (an
arm64 root on an x86_64 host needs no qemu-user, no binfmt_misc). What the maintainer
scripts would have done and the guest needs (accounts, /sbin/poweroff, mount points) is
done by `finish()`. A foreign arch's guest always boots such a root.

A root is cached by its inputs (arch, suite, packages, this recipe's version: `key()`);
its manifest carries the .deb files unpacked and a hash of the whole tree, which every
sample records (`userland()`). Inside the guest the host's directories appear under
GUEST_DIR (vng --rodir/--rwdir GUEST=HOST), since the host's paths do not exist there.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import shlex
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbisect.core import arch as arch_mod
from kbisect.core import clock, debroot, digest, lock, once, paths, proc, progress, reading
from kbisect.core.exceptions import UserError
from kbisect.pgbuild import store
from kbisect.scenario import profile, server
from kbisect.scenario.server import Pin

BUILD_S = 20  # a root's making, measured: 18-20 s for x86_64 trixie on this project's host
RECIPE = 4  # bump when PACKAGES or finish() change what a root holds
GUEST_DIR = Path("/kbisect")
GUEST_HARNESS = GUEST_DIR / "harness"
GUEST_OUT = GUEST_DIR / "out"
GUEST_TEMPLATES = GUEST_DIR / "templates"
GUEST_PG = GUEST_DIR / "pg"  # a PostgreSQL build (kbisect/pgbuild/store.py PREFIX)
# Python's compiled modules (python3 -X pycache_prefix): the root's own Python files come
# without them (no maintainer script runs) and the harness is shared read-only, so a
# guest compiled every module it imports at every boot: 10-15 s under TCG. The first boot
# of a root writes them into the cache (pycache_dir()); later boots read them.
GUEST_PYCACHE = GUEST_DIR / "pycache"
# What virtme-ng's init and the harness run. The extract variant installs no
# Essential:yes package by itself, so the base tools are named too; apt adds the
# dependencies. No udev: virtme-ng's init skips udev when the root has none, and its
# coldplug took 12-20 s of a 28 s boot under TCG; the harness's lines reach the host on
# the console (targets/console.py), and the harness finds its disk through sysfs.
PACKAGES = (
    "base-files",
    "base-passwd",
    "bash",
    "busybox-static",
    "coreutils",
    "dash",
    "findutils",
    "grep",
    "gzip",
    "iproute2",
    "kmod",
    "mount",
    "procps",
    "python3",
    "sed",
    "tar",
    "util-linux",
    "zstd",
)
# Accounts from base-passwd's masters (its postinst does not run), plus PostgreSQL's.
POSTGRES_USER = "postgres:x:101:101:PostgreSQL administrator:/var/lib/postgresql:/bin/sh\n"
POSTGRES_GROUP = "postgres:x:101:\n"
MANIFEST = "image.json"
DEBS = "debs.txt"  # the .deb files unpacked, written by mmdebstrap's extract hook


class NoImage(UserError):
    """A guest needs a root fs that was never made, and this process cannot make it."""


def pin_for(data: dict[str, Any]) -> Pin:
    """The packaged server whose root a scenario's guest boots: the scenario's own, or,
    for a scenario running a PostgreSQL build (postgres.build), the one the build was
    made for (whose root has the libraries it links against). A profiled scenario's root
    also carries perf (scenario/profile.py PACKAGES), under its own key."""
    build = data["postgres"].get("build")
    pin = Pin(int(store.find(build)["runs_on"]["major"])) if build is not None else Pin.of(data)
    return dataclasses.replace(pin, extras=profile.packages(data))


def key(a: arch_mod.Arch, pin: Pin) -> str:
    """The cache directory's name: readable, plus a hash of every input."""
    inputs = {"recipe": RECIPE, "arch": a.debian_arch, "suite": pin.suite}
    inputs["packages"] = packages(pin)  # type: ignore[assignment]
    exact = f"-{pin.version.replace(':', '_')}" if pin.version else ""
    return f"{a.name}-{pin.suite}-pg{pin.major}{exact}-{digest.key(inputs, 10)}"


def needs_root(a: arch_mod.Arch, data: dict[str, Any]) -> bool:
    """Does a guest of arch `a` running this scenario boot an image (else the host's root)?"""
    return not a.is_native() or server.source(data) == server.IMAGE


def root_for(a: arch_mod.Arch, pin: Pin) -> Path:
    return paths.cache_dir() / "images" / key(a, pin) / "root"


def pycache_dir(root: Path) -> Path:
    """Where the guests of this root keep Python's compiled modules (GUEST_PYCACHE)."""
    path = paths.cache_dir() / "pycache" / root.parent.name
    path.mkdir(parents=True, exist_ok=True)
    return path


def packages(pin: Pin) -> list[str]:
    return [*PACKAGES, pin.package, *pin.extras]


def mmdebstrap_command(
    a: arch_mod.Arch,
    target: Path,
    pin: Pin,
    mirror: str | None = None,
    debs: Path | None = None,
    aptopts: Sequence[str] = (),
) -> list[str]:
    """The mmdebstrap command line that unpacks the root into target (pure). `debs`: a
    file the extract hook lists the unpacked .deb files in."""
    hooks = []
    if debs is not None:
        listing = f'ls "$1/var/cache/apt/archives" > {shlex.quote(str(debs))}'
        hooks.append(("extract", listing))
    return debroot.mmdebstrap_command(
        arch=a.debian_arch,
        variant="extract",
        packages=packages(pin),
        output=target,
        hooks=hooks,
        suite=pin.suite,
        mirror=mirror,
        aptopts=aptopts,
    )


def finish(root: Path) -> None:
    """Do, on the host, the little the guest needs from the skipped maintainer scripts."""
    etc = root / "etc"
    masters = root / "usr/share/base-passwd"
    for name, extra in (("passwd", POSTGRES_USER), ("group", POSTGRES_GROUP)):
        text = (masters / f"{name}.master").read_text()
        if not any(line.startswith("postgres:") for line in text.splitlines()):
            text += extra
        (etc / name).write_text(text)
    busybox = root / "bin/busybox"
    poweroff = root / "sbin/poweroff"
    if not poweroff.exists() and busybox.exists():
        poweroff.parent.mkdir(parents=True, exist_ok=True)
        poweroff.symlink_to("/bin/busybox")
    # The root is shared read-only: every mount point must exist beforehand (the last
    # is the harness's PGDATA tmpfs, harness/boot.py GUEST_WORKDIR).
    mounts = (GUEST_HARNESS, GUEST_OUT, GUEST_TEMPLATES, GUEST_PG, GUEST_PYCACHE)
    for d in (*mounts, Path("/tmp/kbisect-pg")):
        (root / d.relative_to("/")).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (etc / "hostname").write_text("kbisect\n")


def tree_hash(root: Path) -> str:
    """sha256 over every entry of the tree (path, type, mode, link target or content), in
    path order: two roots with one hash hold the same files."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted([*dirnames, *filenames]):
            path = Path(dirpath, name)
            st = path.lstat()
            kind, mode = stat.S_IFMT(st.st_mode), st.st_mode & 0o7777
            h.update(f"{path.relative_to(root)}\0{kind}\0{mode}\0".encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(path).encode())
            elif stat.S_ISREG(st.st_mode):
                with path.open("rb") as f:
                    h.update(hashlib.file_digest(f, "sha256").digest())
    return h.hexdigest()


def server_version(debs: list[str], major: int) -> str | None:
    """The Debian version of postgresql-<major> among the unpacked .deb file names."""
    prefix = f"postgresql-{major}_"
    for name in debs:
        if name.startswith(prefix):
            return name[len(prefix) :].rsplit("_", 1)[0].replace("%3a", ":")
    return None


def manifest(a: arch_mod.Arch, pin: Pin) -> dict[str, Any] | None:
    """A finished root's manifest, None when there is none (never made, or unfinished)."""
    path = root_for(a, pin).parent / MANIFEST
    if not path.exists():
        return None
    return reading.json_table(path, f"remove {path.parent} and run `kbisect image` again")


def userland(a: arch_mod.Arch, data: dict[str, Any]) -> dict[str, Any]:
    """What a sample records of the root its guest ran on (and the build it ran)."""
    if not needs_root(a, data):
        return {"source": server.HOST, "postgres_major": int(data["postgres"]["major"])}
    pin = pin_for(data)
    m = manifest(a, pin) or {}
    build = data["postgres"].get("build")
    made = store.manifest(build) if build else None
    return {
        **({"build": _build_facts(made)} if made else {}),
        "source": server.IMAGE,
        "image": key(a, pin),
        "suite": pin.suite,
        "postgres_major": pin.major,
        "postgres_debian_version": m.get("postgres_debian_version"),
        "content_hash": m.get("content_hash"),
    }


def _build_facts(made: dict[str, Any]) -> dict[str, Any]:
    names = ("key", "source", "commit", "base", "patches", "version", "postgres_sha256")
    return {n: made.get(n) for n in names}


def find(a: arch_mod.Arch, pin: Pin) -> Path:
    """The finished root for (a, pin), or a one-line error saying how to make it."""
    if problem := pin.problem():
        raise UserError(problem)
    root = root_for(a, pin)
    if manifest(a, pin) is None:
        exact = f" --pg-version {pin.version}" if pin.version else ""
        exact += " --with-perf" if pin.extras else ""
        raise NoImage(
            f"no {a.name} root fs with PostgreSQL {pin.major} ({pin.suite})"
            f"{' and perf' if pin.extras else ''}: run "
            f"`kbisect image --arch {a.name} --pg-major {pin.major}{exact}` as root"
        )
    return root


def ensure(a: arch_mod.Arch, pin: Pin) -> Path:
    """The root for (a, pin): made now when missing and this process may (root)."""
    if problem := pin.problem():  # before anything asks for the suite's name
        raise UserError(problem)
    if manifest(a, pin) is None and os.geteuid() == 0:
        return build(a, pin)
    return find(a, pin)


def build(a: arch_mod.Arch, pin: Pin, mirror: str | None = None) -> Path:
    """Make the root fs (into a scratch dir, renamed when finished) and its manifest."""
    if problem := pin.problem():
        raise UserError(problem)
    debroot.require("kbisect image", ["mmdebstrap"], "mmdebstrap --mode=root keeps file owners")
    root = root_for(a, pin)
    with lock.hold(
        root.parent / ".lock",
        wait=True,
        busy=lambda holder: f"another kbisect ({holder}) is making {root}; waiting",
    ):
        if manifest(a, pin) is None:
            unpack = functools.partial(_unpack, a, pin, mirror, root.parent)
            once.build_with_manifest(root, root.parent / MANIFEST, unpack)
    progress.step(f"root fs for {a.name} guests, PostgreSQL {pin.major} ({pin.suite}): {root}")
    return root


def _unpack(
    a: arch_mod.Arch, pin: Pin, mirror: str | None, where: Path, scratch: Path
) -> dict[str, Any]:
    """Unpack and finish the root in `scratch`; its manifest."""
    log, debs_file = where / "mmdebstrap.log", where / DEBS
    log.write_text(progress.log_header())
    command = mmdebstrap_command(a, scratch, pin, mirror, debs_file, debroot.host_aptopts())
    progress.step(
        f"unpacking Debian {pin.suite} {a.debian_arch} with postgresql-{pin.major} into "
        f"{scratch} (log: {log})"
    )
    proc.run(command, log=log, timeout=3600, idle_timeout=900)
    finish(scratch)
    debs = debs_file.read_text().split() if debs_file.exists() else []
    progress.step(f"hashing {scratch}")
    return {
        "arch": a.name,
        "suite": pin.suite,
        "recipe": RECIPE,
        "key": key(a, pin),
        "packages": packages(pin),
        "postgres_major": pin.major,
        "postgres_debian_version": server_version(debs, pin.major),
        "debs": sorted(d for d in debs if d.endswith(".deb")),
        "content_hash": tree_hash(scratch),
        "command": command,
        "created": clock.utc_now(),
    }
