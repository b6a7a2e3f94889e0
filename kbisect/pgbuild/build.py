"""Build a PostgreSQL server from a source and patches, once per inputs.

The source is a commit in kbisect's own repository for the tree (patches become commits
there, never in the user's: source/patches.py), checked out in a scratch worktree; the
build runs out of tree in the build root (buildroot.py) through a private mount namespace
(`unshare --mount`: the bind mounts vanish with the process, whatever kills it), with the
source at /src, the build dir at /build, the install at /out and ccache at /ccache, so
every build sees the same paths and ccache hits across revisions and patches.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import arch as arch_mod
from kbisect.core import clock, debroot, digest, lock, once, paths, proc, progress
from kbisect.core.exceptions import BuildError, InfraError
from kbisect.pgbuild import buildroot, debsrc, store
from kbisect.pgbuild.spec import Spec
from kbisect.scenario import server
from kbisect.source import git, scratch, worktree
from kbisect.source import patches as patches_mod

RECIPE = 1  # bump when SCRIPT or CONFIGURE change what a build holds
# Debian's configure choices that matter to a server under pgbench (postgresql-common's
# server/postgresql.mk), without the ones that need what a guest root lacks (LLVM, Tcl,
# Perl and Python procedural languages, GSSAPI, LDAP, PAM, SELinux, systemd, readline).
CONFIGURE = (
    f"--prefix={store.PREFIX}",
    "--with-icu",
    "--with-openssl",
    "--with-libxml",
    "--with-lz4",
    "--with-zstd",
    "--without-readline",
    "--enable-debug",
)
SCRIPT = """set -eu
export PATH=/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin CCACHE_DIR=/ccache
cd /build
if [ ! -f config.status ]; then
  /src/configure {configure} \\
    CFLAGS="$(dpkg-buildflags --get CFLAGS) -fno-omit-frame-pointer" \\
    LDFLAGS="$(dpkg-buildflags --get LDFLAGS)"
fi
make -j{jobs} -s
rm -rf /out/*
make -s install DESTDIR=/out
"""
MOUNTS = ("src", "build", "out", "ccache")
_VERSION = re.compile(r'^#define PG_VERSION "([^"]+)"', re.MULTILINE)
_MAJOR = re.compile(r"^#define PG_MAJORVERSION_NUM (\d+)", re.MULTILINE)


class PgBuildFailed(BuildError):
    """configure or make failed: the log says why."""


@dataclass(frozen=True)
class Source:
    repo: Path  # the user's repository
    base: str  # the revision asked for
    commit: str  # with the patches applied
    described: str
    patches: tuple[patches_mod.Patch, ...]


def resolve(spec: Spec, patch_files: Sequence[str | Path]) -> Source:
    """The commit to build (patches applied in kbisect's repository): UserError, one line,
    for a revision that does not exist or a patch that does not apply, before any build."""
    files = patches_mod.read_all(patch_files)
    if spec.kind == "debian":
        assert spec.major is not None
        repo, tag = debsrc.ensure(spec.major)
        described = f"{spec.describe()} ({tag.removeprefix('debian/')})"
        base = scratch.rev_parse(repo, tag)
    else:
        assert spec.tree is not None
        repo, described = spec.tree, spec.describe()
        base = scratch.rev_parse(repo, spec.rev)
    commit = patches_mod.apply(repo, base, files)
    return Source(repo, base, commit, described, files)


def key(source: Source, major: int, root_key: str) -> str:
    inputs = {"commit": source.commit, "configure": CONFIGURE, "root": root_key, "recipe": RECIPE}
    return f"pg{major}-{digest.key(inputs, 12)}"


def major_of(repo: Path, commit: str) -> int:
    """The major a commit builds, from its configure.ac (AC_INIT's version)."""
    text = git.git(repo, "show", f"{commit}:configure.ac")
    m = re.search(r"AC_INIT\(\[PostgreSQL\], \[(\d+)", text)
    if not m:
        raise InfraError(f"{repo}: {commit[:12]} has no PostgreSQL configure.ac")
    return int(m.group(1))


def namespace_command(root: Path, binds: dict[str, Path], script: str) -> list[str]:
    """unshare + bind mounts + chroot running `script` (pure)."""
    mounts = [
        f"mount --bind {shlex.quote(str(binds[m]))} {shlex.quote(str(root / m))}" for m in MOUNTS
    ]
    mounts.append(f"mount -t proc proc {shlex.quote(str(root / 'proc'))}")
    inner = " && ".join(
        [*mounts, f"exec chroot {shlex.quote(str(root))} /bin/sh -c {shlex.quote(script)}"]
    )
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--fork",
        "--kill-child",
        "sh",
        "-c",
        inner,
    ]


def build(spec: Spec, patch_files: Sequence[str | Path] = ()) -> tuple[str, dict[str, Any]]:
    """The build's key and manifest, building it when the cache does not hold it."""
    source = resolve(spec, patch_files)
    major = major_of(source.repo, source.base)  # patched commits live in our repo
    runs_on = server.DEFAULT_PIN if spec.major is None else server.Pin(spec.major)
    arch = arch_mod.get(arch_mod.host_arch()).debian_arch  # builds run on this host
    root_key = buildroot.key(runs_on.suite, arch)
    k = key(source, major, root_key)
    where = store.dir_for(k)
    if (found := store.manifest(k)) is not None:
        progress.step(f"PostgreSQL build {k}: cached ({found['version']})")
        return k, found
    debroot.require("a PostgreSQL build", ["unshare", "chroot"], "unshare --mount, chroot")
    root = buildroot.ensure(runs_on.suite, arch)
    with lock.hold(
        where / ".lock",
        wait=True,
        busy=lambda holder: f"another kbisect ({holder}) builds {k}; waiting",
    ):
        if (found := store.manifest(k)) is not None:
            return k, found
        data = _build(source, root, where, runs_on, k)
    return k, data


def _build(source: Source, root: Path, where: Path, runs_on: server.Pin, k: str) -> dict[str, Any]:
    def make(out: Path) -> dict[str, Any]:
        _run(source, root, where, out, k)
        header = (where / "build/src/include/pg_config.h").read_text()
        postgres = out / store.PREFIX.relative_to("/") / "bin/postgres"
        return {
            "key": k,
            "source": source.described,
            "commit": source.commit,
            "base": source.base,
            "patches": patches_mod.describe(
                source.repo, source.base, source.patches, source.commit
            ),
            "version": _define(_VERSION, header),
            "major": int(_define(_MAJOR, header) or 0) or None,
            "configure": list(CONFIGURE),
            "runs_on": {"suite": runs_on.suite, "major": runs_on.major},
            "postgres_sha256": hashlib.sha256(postgres.read_bytes()).hexdigest(),
            "created": clock.utc_now(),
        }

    data = once.build_with_manifest(where / "install", where / store.MANIFEST, make)
    progress.step(f"PostgreSQL build {k}: {data['version']} in {store.install_dir(k)}")
    return data


def _run(source: Source, root: Path, where: Path, out: Path, k: str) -> None:
    """configure, make and make install into `out` (PgBuildFailed)."""
    with worktree.locked(worktree.path_for(source.repo, "pgbuild")):
        src = worktree.checkout(source.repo, source.commit, slot="pgbuild")
        binds = {
            "src": src,
            "build": where / "build",
            "out": out,
            "ccache": paths.cache_dir() / "pg-ccache",
        }
        for d in (*binds.values(), *(root / m for m in MOUNTS)):
            d.mkdir(parents=True, exist_ok=True)
        log = where / "build.log"
        log.write_text(progress.log_header())
        script = SCRIPT.format(configure=" ".join(CONFIGURE), jobs=os.cpu_count() or 1)
        progress.step(
            f"building PostgreSQL {source.described} ({source.commit[:12]}, "
            f"{len(source.patches)} patch(es)) as {k} (log: {log})"
        )
        done = proc.run(
            namespace_command(root, binds, script),
            log=log,
            timeout=4 * 3600,
            idle_timeout=1800,
            check=False,
        )
        if done.returncode != 0:
            raise PgBuildFailed(f"PostgreSQL build {k} failed (exit {done.returncode}; log: {log})")


def _define(pattern: re.Pattern[str], header: str) -> str | None:
    m = pattern.search(header)
    return m.group(1) if m else None
