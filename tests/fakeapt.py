"""A local apt repository shaped like Debian's, for `kbisect tree add` without a network:
one suite, one component, a Packages index and a Release file with its hashes, a
`linux-source-X` package that holds a tiny kernel tarball (with Debian's `.gitignore` of
`/*`). apt reads it as it reads deb.debian.org; the registry marks it `trusted`, since it
has no signature."""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
from pathlib import Path

FILES = {
    ".gitignore": "/*\n",
    "Makefile": "VERSION = 9\nPATCHLEVEL = 9\nall:\n",
    "Kconfig": 'mainmenu "tiny"\n',
    "scripts/kconfig/x": "kconfig helper\n",
    "kernel/sched/core.c": "int preempt_none = 1;\n",
}


def host_arch() -> str:
    out = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True)
    return out.stdout.strip()


def package(where: Path, release: str, version: str) -> Path:
    """linux-source-<release>_<version>_all.deb holding usr/src/linux-source-<release>.tar.xz."""
    top = f"linux-source-{release}"
    root = where / f"pkg-{release}"
    src = where / f"src-{release}" / top
    for rel, text in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    (root / "usr/src").mkdir(parents=True)
    with tarfile.open(root / "usr/src" / f"{top}.tar.xz", "w:xz") as tar:
        tar.add(src, arcname=top)
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN/control").write_text(
        f"Package: {top}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: kbisect tests <tests@localhost>\nDescription: tiny kernel source\n"
    )
    deb = where / f"{top}_{version}_all.deb"
    build = ["dpkg-deb", "-Zxz", "--build", str(root), str(deb)]
    subprocess.run(build, check=True, capture_output=True)
    return deb


def repository(where: Path, packages: dict[str, str], suite: str = "fake") -> Path:
    """A repository at `where/repo` with `packages` ({release: version}) in `suite`."""
    repo = where / "repo"
    pool = repo / "pool"
    pool.mkdir(parents=True)
    stanzas = []
    for release, version in packages.items():
        deb = package(where, release, version)
        target = pool / deb.name
        deb.rename(target)
        data = target.read_bytes()
        control = (where / f"pkg-{release}" / "DEBIAN/control").read_text()
        stanzas.append(
            control
            + f"Filename: pool/{target.name}\nSize: {len(data)}\n"
            + f"SHA256: {hashlib.sha256(data).hexdigest()}\n"
        )
    arch = host_arch()
    index(repo, suite, f"main/binary-{arch}/Packages", "\n".join(stanzas), f"{arch} all")
    return repo


def index(repo: Path, suite: str, rel_path: str, text: str, archs: str) -> None:
    """`suite`'s one index file (`text` at `rel_path`) and the Release file that names its
    hash, as apt checks them."""
    path = repo / "dists" / suite / rel_path
    path.parent.mkdir(parents=True)
    path.write_text(text)
    body = path.read_bytes()
    (repo / "dists" / suite / "Release").write_text(
        f"Suite: {suite}\nCodename: {suite}\nDate: Thu, 01 Jan 2026 00:00:00 UTC\n"
        f"Architectures: {archs}\nComponents: main\nSHA256:\n"
        f" {hashlib.sha256(body).hexdigest()} {len(body)} {rel_path}\n"
    )


def registry(where: Path, mirror: str, releases: dict[str, str], suite: str = "fake") -> Path:
    """A registry file naming `releases` ({release: package}) in `suite` of `mirror`."""
    lines = [f'mirror = "{mirror}"', "trusted = true", ""]
    for release, pkg in releases.items():
        lines += [f'[releases."{release}"]', f'package = "{pkg}"', f'suites = ["{suite}"]', ""]
    path = where / "registry.toml"
    path.write_text("\n".join(lines))
    return path


# -- a PostgreSQL source package ---------------------------------------------------------

PG_FILES = {
    "configure.ac": "AC_INIT([PostgreSQL], [{upstream}], [bugs@localhost])\n",
    "configure": "#!/bin/sh\necho configured\n",
    "src/backend/storage/buffer/freelist.c": "int clock_sweep = 1;\n",
}
DEBIAN_PATCH = """\
Description: Debian's change to the buffer manager (a fake one)
--- a/src/backend/storage/buffer/freelist.c
+++ b/src/backend/storage/buffer/freelist.c
@@ -1 +1,2 @@
 int clock_sweep = 1;
+int debian_patched = 1;
"""


def source_package(where: Path, name: str, version: str) -> Path:
    """`name`_`version`.dsc (3.0 quilt: an orig tarball and a debian/ dir with one patch in
    debian/patches/series) in `where`; its upstream version is `version` up to its last -."""
    upstream = version.rsplit("-", 1)[0]
    top = where / f"{name}-{upstream}"
    for rel, text in PG_FILES.items():
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text(text.format(upstream=upstream))
    with tarfile.open(where / f"{name}_{upstream}.orig.tar.xz", "w:xz") as tar:
        tar.add(top, arcname=top.name)
    deb = top / "debian"
    (deb / "source").mkdir(parents=True)
    (deb / "patches").mkdir()
    (deb / "source/format").write_text("3.0 (quilt)\n")
    (deb / "patches/series").write_text("10-buffers.patch\n")
    (deb / "patches/10-buffers.patch").write_text(DEBIAN_PATCH)
    (deb / "control").write_text(
        f"Source: {name}\nMaintainer: kbisect tests <tests@localhost>\n\n"
        f"Package: {name}\nArchitecture: any\nDescription: tiny PostgreSQL source\n"
    )
    (deb / "changelog").write_text(
        f"{name} ({version}) unstable; urgency=medium\n\n  * Fake.\n\n"
        " -- kbisect tests <tests@localhost>  Thu, 01 Jan 2026 00:00:00 +0000\n"
    )
    (deb / "rules").write_text("#!/usr/bin/make -f\n%:\n\tdh $@\n")
    subprocess.run(
        ["dpkg-source", "-b", top.name], cwd=where, check=True, capture_output=True, text=True
    )
    return where / f"{name}_{version}.dsc"


def source_repository(where: Path, packages: dict[str, str], suite: str = "fake") -> Path:
    """A repository at `where/srcrepo` serving the source `packages` ({name: version})
    in `suite` (a Sources index and a Release file with its hash)."""
    repo = where / "srcrepo"
    pool = repo / "pool"
    pool.mkdir(parents=True)
    for name, version in packages.items():
        source_package(pool, name, version)
        for made in pool.iterdir():  # keep the package's files only
            if made.is_dir():
                subprocess.run(["rm", "-rf", str(made)], check=True)
    scanned = subprocess.run(
        ["dpkg-scansources", "pool"], cwd=repo, check=True, capture_output=True, text=True
    )
    index(repo, suite, "main/source/Sources", scanned.stdout, f"{host_arch()} all source")
    return repo
