"""`kbisect image`: a root file system for guests of a foreign architecture.

virtme-ng shares the host's own root with a native guest. A foreign guest (an arm64
kernel on an x86_64 host) cannot run the host's binaries, so it gets a Debian root of
its own architecture, made once into the cache with mmdebstrap's `extract` variant:
the packages are unpacked and no maintainer script runs, so no foreign binary ever runs
on the host (no qemu-user, no binfmt_misc). What the maintainer scripts would have done
and the guest needs (accounts, /sbin/poweroff, mount points) is done by `finish()`.

Inside the guest the host's directories appear under GUEST_DIR (vng --rodir/--rwdir
GUEST=HOST), since the host's paths do not exist in this root.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from kbisect.core import arch as arch_mod
from kbisect.core import clock, paths, proc, progress
from kbisect.core.exceptions import UserError
from kbisect.targets import debian

SUITE = debian.SUITE
PG_MAJOR = 15  # what SUITE ships; a scenario pinning another major fails in the guest
GUEST_DIR = Path("/kbisect")
GUEST_HARNESS = GUEST_DIR / "harness"
GUEST_OUT = GUEST_DIR / "out"
GUEST_TEMPLATES = GUEST_DIR / "templates"
# What virtme-ng's shell init (virtme-init) and the harness run. The extract variant
# installs no Essential:yes package by itself, so the base tools are named too; apt adds
# the dependencies. udev: virtme-init finds its console ports through it.
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
    "udev",
    "util-linux",
    "zstd",
)
# Accounts from base-passwd's masters (its postinst does not run), plus PostgreSQL's.
POSTGRES_USER = "postgres:x:101:101:PostgreSQL administrator:/var/lib/postgresql:/bin/sh\n"
POSTGRES_GROUP = "postgres:x:101:\n"
MANIFEST = "image.json"


class NoImage(UserError):
    """A foreign-arch guest was asked for and its root fs was never made."""


def root_for(a: arch_mod.Arch) -> Path:
    return paths.cache_dir() / "images" / f"{a.name}-debian-{SUITE}" / "root"


def packages(pg_major: int = PG_MAJOR) -> list[str]:
    return [*PACKAGES, f"postgresql-{pg_major}"]


def mmdebstrap_command(
    a: arch_mod.Arch, target: Path, pg_major: int = PG_MAJOR, mirror: str | None = None
) -> list[str]:
    """The mmdebstrap command line that unpacks the root into target (pure)."""
    return debian.mmdebstrap_command(
        arch=a.debian_arch,
        variant="extract",
        packages=packages(pg_major),
        output=target,
        mirror=mirror,
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
    for d in (GUEST_HARNESS, GUEST_OUT, GUEST_TEMPLATES, Path("/tmp/kbisect-pg")):
        (root / d.relative_to("/")).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (etc / "hostname").write_text("kbisect\n")


def find(a: arch_mod.Arch) -> Path:
    """The finished root fs for a, or a one-line error saying how to make it."""
    root = root_for(a)
    if not (root.parent / MANIFEST).exists():
        raise NoImage(
            f"no {a.name} root fs for a foreign-arch guest: run `kbisect image --arch {a.name}`"
        )
    return root


def build(a: arch_mod.Arch, pg_major: int = PG_MAJOR, mirror: str | None = None) -> Path:
    """Make the root fs (into a scratch dir, renamed when finished) and its manifest."""
    if a.is_native():
        raise UserError(f"{a.name} is this host's arch: its guests use the host's own root")
    debian.require("kbisect image", ["mmdebstrap"], "mmdebstrap --mode=root keeps file owners")
    root = root_for(a)
    unpack = functools.partial(_unpack, a, pg_major, mirror, root.parent / "mmdebstrap.log")
    debian.build_once(root, root.parent / MANIFEST, unpack)
    progress.step(f"root fs for {a.name} guests: {root}")
    return root


def _unpack(
    a: arch_mod.Arch, pg_major: int, mirror: str | None, log: Path, scratch: Path
) -> dict[str, Any]:
    """Unpack and finish the root in `scratch`; its manifest."""
    log.write_text(progress.log_header())
    command = mmdebstrap_command(a, scratch, pg_major, mirror)
    progress.step(f"unpacking Debian {SUITE} {a.debian_arch} into {scratch} (log: {log})")
    proc.run(command, log=log, timeout=3600, idle_timeout=900)
    finish(scratch)
    return {
        "arch": a.name,
        "suite": SUITE,
        "packages": packages(pg_major),
        "command": command,
        "created": clock.utc_now(),
    }
