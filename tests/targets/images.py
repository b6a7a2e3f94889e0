"""Stand-ins for the root file systems `kbisect image` makes (kbisect/targets/vng/rootfs.py):
what mmdebstrap's extract variant leaves, finished as rootfs.finish() does, with a manifest,
so the fake vng finds the mount points a guest root needs."""

from __future__ import annotations

import json
from pathlib import Path

from kbisect.core import arch
from kbisect.scenario import server
from kbisect.targets.vng import rootfs


def fake_root(where: Path) -> Path:
    """What mmdebstrap's extract variant leaves: base-passwd's masters, busybox, /tmp."""
    masters = where / "usr/share/base-passwd"
    masters.mkdir(parents=True)
    (masters / "passwd.master").write_text("root:*:0:0:root:/root:/bin/sh\n")
    (masters / "group.master").write_text("root:*:0:\n")
    (where / "usr/bin").mkdir(parents=True)
    (where / "usr/sbin").mkdir(parents=True)
    (where / "bin").symlink_to("usr/bin")
    (where / "sbin").symlink_to("usr/sbin")
    (where / "usr/bin/busybox").write_text("")
    for d in ("etc", "tmp"):
        (where / d).mkdir()
    return where


def installed(a: arch.Arch, pin: server.Pin = server.DEFAULT_PIN) -> Path:
    """A finished root fs in the cache, as `kbisect image` leaves it."""
    root = rootfs.root_for(a, pin)
    if (root.parent / rootfs.MANIFEST).exists():
        return root
    fake_root(root)
    rootfs.finish(root)
    manifest = {
        "arch": a.name,
        "suite": pin.suite,
        "postgres_major": pin.major,
        "postgres_debian_version": f"{pin.major}.0-1",
        "content_hash": rootfs.tree_hash(root),
    }
    (root.parent / rootfs.MANIFEST).write_text(json.dumps(manifest))
    return root


def install_defaults() -> None:
    """The roots the shipped scenarios boot (smoke pins 15, the others 17), every arch."""
    for name in arch.names():
        for major in (15, 17):
            installed(arch.get(name), server.Pin(major))
