"""The root PostgreSQL is built in: Debian's `buildd` variant of the suite whose guest root
the server runs on (so it links against the libraries that root has), plus PostgreSQL's
build dependencies, made once into the cache by mmdebstrap (the builder of
core/debroot.py, shared with the guest roots and the emulated machine)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbisect.core import clock, debroot, digest, lock, once, paths, proc, progress

# What configure (CONFIGURE in build.py) needs beyond buildd's build-essential: a git tree
# needs bison, flex and perl to generate what a release tarball ships.
PACKAGES = (
    "bison",
    "flex",
    "perl",
    "pkgconf",
    "ccache",
    "libicu-dev",
    "libssl-dev",
    "libxml2-dev",
    "liblz4-dev",
    "libzstd-dev",
    "zlib1g-dev",
    "dpkg-dev",
    "ca-certificates",
)
MANIFEST = "buildroot.json"
MADE_S = 60  # roughly: the making of one, for progress lines


def key(suite: str, arch: str) -> str:
    return f"{arch}-{suite}-{digest.key([suite, arch, PACKAGES], 10)}"


def root_for(suite: str, arch: str) -> Path:
    return paths.cache_dir() / "pg-buildroots" / key(suite, arch) / "root"


def mmdebstrap_command(
    suite: str, arch: str, target: Path, aptopts: Sequence[str] = ()
) -> list[str]:
    """The build root's mmdebstrap line (pure); deb-src too, for `debian:MAJOR` sources."""
    cmd = debroot.mmdebstrap_command(
        arch=arch,
        variant="buildd",
        packages=PACKAGES,
        output=target,
        suite=suite,
        aptopts=aptopts,
    )
    mirror = "http://deb.debian.org/debian"
    return [*cmd, f"deb {mirror} {suite} main", f"deb-src {mirror} {suite} main"]


def ensure(suite: str, arch: str) -> Path:
    """The build root for (suite, arch), made now when missing."""
    root = root_for(suite, arch)
    manifest = root.parent / MANIFEST
    if manifest.exists():
        return root
    debroot.require("a PostgreSQL build", ["mmdebstrap"], "mmdebstrap --mode=root, chroot")
    with lock.hold(
        root.parent / ".lock",
        wait=True,
        busy=lambda holder: f"another kbisect ({holder}) is making {root}; waiting",
    ):
        if not manifest.exists():
            make = functools.partial(_make, suite, arch, root.parent / "mmdebstrap.log")
            once.build_with_manifest(root, manifest, make)
    return root


def _make(suite: str, arch: str, log: Path, scratch: Path) -> dict[str, Any]:
    log.write_text(progress.log_header())
    command = mmdebstrap_command(suite, arch, scratch, debroot.host_aptopts())
    progress.step(
        f"making the PostgreSQL build root ({suite} {arch}, ~{MADE_S} s once; log: {log})"
    )
    proc.run(command, log=log, timeout=3600, idle_timeout=900)
    return {
        "suite": suite,
        "arch": arch,
        "packages": list(PACKAGES),
        "command": command,
        "created": clock.utc_now(),
    }
