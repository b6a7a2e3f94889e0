"""Debian's PostgreSQL source package as a tree: `--pg-build debian:18` is Debian's
postgresql-18 source package (upstream's release with Debian's patches), fetched once from
the suite that carries that major (scenario/server.py SUITES) and imported into its own git
repository in the cache, tagged with the exact Debian version; patches then apply on top
of it as on any PostgreSQL tree (source/patches.py), and it builds like one.

apt fetches it through a private sources list, state and cache under
`<cache>/apt/postgresql-<major>/` (the mirror and keyring of source/releases/debian.toml,
or the file `KBISECT_DEBIAN_REGISTRY` names): `apt-get source --download-only` checks each
file against the signed Sources index, and `dpkg-source -x` unpacks the package with
Debian's patch series applied. The system's apt configuration is neither read for sources
nor written. Once imported, the tree is used as it is, offline.
"""

from __future__ import annotations

import re
from pathlib import Path

from kbisect.core import lock, once, paths, proc, progress
from kbisect.core.exceptions import InfraError
from kbisect.scenario import server
from kbisect.source import git, release, tarball


class SourceUnavailable(InfraError):
    """The suite lists the source package but the mirror does not serve its files (an
    index apt cannot fetch is release.SuiteUnreachable)."""


def package(major: int) -> str:
    return f"postgresql-{major}"


def tree_dir(major: int) -> Path:
    return paths.cache_dir() / "pg-sources" / f"debian-{major}"


def apt_dir(major: int) -> Path:
    return paths.cache_dir() / "apt" / package(major)


def sources_list(reg: release.Registry, suite: str) -> str:
    """The private deb-src line for one suite (pure)."""
    return reg.line("deb-src", suite)


def source_command(state: Path, name: str) -> list[str]:
    """Download (only) a source package's files, each checked against the index (pure)."""
    return ["apt-get", *release.apt_options(state), "-q", "source", "--download-only", name]


def unpack_command(dsc: Path, dest: Path) -> list[str]:
    """Unpack a source package with its patch series applied (pure)."""
    return ["dpkg-source", "--no-copy", "-x", str(dsc), str(dest)]


def imported(major: int) -> tuple[Path, str] | None:
    """The imported tree and its tag, or None."""
    d = tree_dir(major)
    if (d / ".git").is_dir() and (tag := release.imported_tag(d)):
        return d, tag
    return None


def ensure(major: int, suite: str | None = None) -> tuple[Path, str]:
    """The tree of Debian's postgresql-<major> source and its tag, imported now on first use."""
    if found := imported(major):
        return found
    dest = tree_dir(major)
    with lock.hold(
        dest.parent / f".{dest.name}.lock",
        wait=True,
        busy=lambda holder: f"debian:{major}: another kbisect ({holder}) imports it; waiting",
    ):
        if found := imported(major):
            return found
        _import(major, suite or server.SUITES[major], release.registry(), dest)
    found = imported(major)
    assert found is not None
    return found


def _import(major: int, suite: str, reg: release.Registry, dest: Path) -> None:
    spec = f"debian:{major}"
    name = package(major)
    log = dest.parent / f"{dest.name}.import.log"
    log.write_text(progress.log_header(["pg-build", spec]))
    release.read_index(apt_dir(major), sources_list(reg, suite), log, spec, suite, reg.mirror)

    def make(src: Path) -> str:
        tmp = src.parent  # the downloads, removed with it
        progress.step(f"{spec}: downloading the {name} source package (checked against the index)")
        fetched = proc.run(
            source_command(apt_dir(major), name), log=log, cwd=tmp, timeout=3600, check=False
        )
        if fetched.returncode != 0:
            raise SourceUnavailable(_why_not(spec, name, suite, reg.mirror, log))
        dscs = sorted(tmp.glob(f"{name}_*.dsc"))
        if len(dscs) != 1:
            raise InfraError(f"{spec}: apt-get source left {len(dscs)} .dsc files in {tmp}")
        version = release.field(dscs[0].read_text(errors="replace"), "Version")
        if version is None:
            raise InfraError(f"{spec}: {dscs[0].name} names no Version")
        progress.step(f"{spec}: unpacking {dscs[0].name} with Debian's patches")
        proc.run(unpack_command(dscs[0], src), log=log, timeout=1800)
        tag = release.tag_for(version)
        message = f"Import Debian {name} {version} (dpkg-source -x, patches applied)"
        for cmd in tarball.commit_commands(src, tag, message):
            proc.run(cmd, log=log, env=tarball.FIXED_IDENTITY)
        return tag

    tag = once.build(dest, make)
    progress.step(f"{spec}: ready: {dest} ({tag}, {git.rev_parse(dest, tag)[:12]})")


def _why_not(spec: str, name: str, suite: str, mirror: str, log: Path) -> str:
    text = log.read_text(errors="replace")
    if re.search(r"Unable to find a source package|No source package|Can't find a source", text):
        return f"{spec}: {suite} at {mirror} carries no {name} source package (see {log})"
    if re.search(r"\b404\b|File not found", text):
        return (
            f"{spec}: {mirror} lists the {name} source package in {suite} but does not serve "
            f"its files (see {log}); build from a PostgreSQL git tree: --pg-build PATH@REV"
        )
    return f"{spec}: apt-get source {name} failed (see {log})"
