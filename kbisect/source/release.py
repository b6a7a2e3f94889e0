"""Real releases as trees: `--tree debian:7.2` is Debian's linux-source-7.2, fetched once
from the suite that carries it and imported into its own git repository in the cache.

apt does the fetching, through a private sources list, state and cache under
`<cache>/apt/<release>/`: the system's apt configuration is never read for sources nor
written. The index is signed (the Debian archive keyring), and `apt-get download` checks
the package against it, so what is imported is what Debian published. The import is one
commit with a fixed identity and date (as the embedded default), tagged with the exact
Debian version (`debian/7.2.13-1`, DEP-14 spelling), so a report names what it ran.

Which suites carry which release is data: kbisect/source/releases/debian.toml, or the file
`KBISECT_DEBIAN_REGISTRY` names (tests point it at a local repository). An imported tree
is used as it is, offline; `kbisect tree add` on it says which version it holds.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from kbisect.core import atomic, lock, paths, proc, progress, reading
from kbisect.core.exceptions import CommandFailed, InfraError, UserError
from kbisect.source import git, tarball

PREFIX = "debian:"
REGISTRY = Path(__file__).parent / "releases" / "debian.toml"
REGISTRY_ENV = "KBISECT_DEBIAN_REGISTRY"


class UnknownRelease(UserError):
    """`debian:X` names a release kbisect's registry does not list, or none at all."""


class NotCarried(UserError):
    """The release's suites are reachable but none carries its source package."""


class SuiteUnreachable(InfraError):
    """apt could not fetch a suite's signed index (network, mirror, signature)."""


@dataclass(frozen=True)
class Release:
    name: str
    package: str
    suites: tuple[str, ...]


@dataclass(frozen=True)
class Registry:
    mirror: str
    keyring: str
    component: str
    releases: dict[str, Release]
    trusted: bool = False
    source: Path = REGISTRY

    def line(self, kind: str, suite: str) -> str:
        """One sources-list line (`deb` or `deb-src`) for `suite`: signed by the keyring,
        or trusted (a local repository without a signature) (pure)."""
        option = "trusted=yes" if self.trusted else f"signed-by={self.keyring}"
        return f"{kind} [{option}] {self.mirror} {suite} {self.component}\n"

    def get(self, name: str) -> Release:
        if name not in self.releases:
            known = ", ".join(sorted(self.releases, key=version_key))
            raise UnknownRelease(
                f"{PREFIX}{name}: not a Debian release kbisect knows ({known}; {self.source})"
            )
        return self.releases[name]


def version_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in name.split("."))


def registry(path: Path | None = None) -> Registry:
    """The registry file, checked field by field (a bad one is one line, exit 2)."""
    if path is None:
        env = os.environ.get(REGISTRY_ENV)
        path = Path(env) if env else REGISTRY
    f = reading.Fields(reading.toml(path), str(path))
    table = f.table("releases", required=True)
    releases: dict[str, Release] = {}
    for name in table.data:
        e = table.table(name, required=True)
        suites = e.strings("suites")
        if not suites:
            e.fail("suites", "must name at least one suite")
        releases[name] = Release(name, e.string("package"), suites)
        e.done()
    if not releases:
        f.fail("releases", "must list at least one release")
    reg = Registry(
        mirror=f.string("mirror"),
        keyring=f.string("keyring", ""),
        component=f.string("component", "main"),
        releases=releases,
        trusted=f.flag("trusted", False),
        source=path,
    )
    f.done()
    return reg


def is_release(name: str | None) -> bool:
    return name is not None and name.startswith(PREFIX)


def release_name(spec: str) -> str:
    """`debian:7.2` → "7.2"; anything else is one line, exit 2."""
    name = spec[len(PREFIX) :]
    if not is_release(spec) or not re.fullmatch(r"[0-9]+(\.[0-9]+)*", name):
        raise UnknownRelease(f"{spec}: expected debian:<release>, e.g. debian:7.2")
    return name


def tree_dir(name: str) -> Path:
    return paths.cache_dir() / "trees" / f"debian-{name}"


def apt_dir(name: str) -> Path:
    return paths.cache_dir() / "apt" / name


def sources_list(reg: Registry, rel: Release) -> str:
    """The private sources list for one release (pure)."""
    return "".join(reg.line("deb", s) for s in rel.suites)


def apt_options(state: Path) -> list[str]:
    """apt options that confine it to `state` (pure): no system sources, lists or cache."""
    return [
        "-o",
        f"Dir::Etc::SourceList={state / 'sources.list'}",
        "-o",
        "Dir::Etc::SourceParts=/dev/null",
        "-o",
        f"Dir::State::Lists={state / 'lists'}",
        "-o",
        f"Dir::Cache={state / 'cache'}",
        "-o",
        "APT::Update::Error-Mode=any",
        "-o",
        "Acquire::Languages=none",
        "-o",
        "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
        "-o",
        "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
        "-o",
        "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false",
        "-o",
        "Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false",
    ]


def update_command(state: Path) -> list[str]:
    return ["apt-get", *apt_options(state), "-q", "update"]


def show_command(state: Path, package: str) -> list[str]:
    return ["apt-cache", *apt_options(state), "show", "--no-all-versions", package]


def tag_for(version: str) -> str:
    """Debian version → git tag, DEP-14 spelling (`1:7.2~rc3-1` → `debian/1%7.2_rc3-1`)."""
    return "debian/" + version.replace(":", "%").replace("~", "_")


def imported_tag(repo: Path) -> str | None:
    tags = git.git(repo, "tag", "-l", "debian/*").split()
    return tags[-1] if tags else None


def is_imported(name: str) -> bool:
    d = tree_dir(name)
    return (d / ".git").is_dir() and imported_tag(d) is not None


def resolve(spec: str) -> Path:
    """`debian:7.2` → its imported tree, imported now on first use."""
    name = release_name(spec)
    if is_imported(name):
        return tree_dir(name)
    return add(spec)


def add(spec: str, reg: Registry | None = None) -> Path:
    """Fetch and import `debian:X` once; an imported one is returned as it is."""
    name = release_name(spec)
    reg = reg or registry()
    rel = reg.get(name)
    dest = tree_dir(name)
    with lock.hold(
        dest.parent / f".{dest.name}.lock",
        wait=True,
        busy=lambda holder: f"{spec}: another kbisect ({holder}) is importing it; waiting",
    ):
        if is_imported(name):
            return dest
        _import(spec, reg, rel, dest)
    return dest


def read_index(state: Path, sources: str, log: Path, spec: str, where: str, mirror: str) -> None:
    """Confine apt to `state` with the private sources list `sources` and fetch its
    signed index (SuiteUnreachable, one line, when apt cannot); `where` names the suites
    in the messages."""
    for sub in ("lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    atomic.write_text(state / "sources.list", sources)
    progress.step(f"{spec}: reading the index of {mirror} ({where})")
    try:
        proc.run(update_command(state), log=log, timeout=600)
    except CommandFailed as exc:
        raise SuiteUnreachable(
            f"{spec}: apt could not fetch the signed index of {where} from {mirror} (see {log})"
        ) from exc


def _import(spec: str, reg: Registry, rel: Release, dest: Path) -> None:
    state = apt_dir(rel.name)
    log = dest.parent / f"{dest.name}.import.log"
    log.write_text(progress.log_header(["tree", "add", spec]))
    where = ", ".join(rel.suites)
    read_index(state, sources_list(reg, rel), log, spec, where, reg.mirror)
    (state / "debs").mkdir(parents=True, exist_ok=True)
    shown = proc.run(show_command(state, rel.package), log=log, check=False, capture=True)
    version = field(shown.output if shown.returncode == 0 else "", "Version")
    if version is None:
        raise NotCarried(f"{spec}: {where} at {reg.mirror} does not carry {rel.package}")
    tag = tag_for(version)
    debs = state / "debs"
    for old in debs.glob("*.deb"):
        old.unlink()
    progress.step(f"{spec}: downloading {rel.package} {version} (checked against the index)")
    download = ["apt-get", *apt_options(state), "-q", "download", rel.package]
    proc.run(download, log=log, cwd=debs, timeout=3600)
    found = sorted(debs.glob("*.deb"))
    if len(found) != 1:
        raise InfraError(f"{spec}: apt-get download left {len(found)} packages in {debs}")
    pkg = state / "unpacked"
    try:
        shutil.rmtree(pkg, ignore_errors=True)
        proc.run(["dpkg-deb", "-x", str(found[0]), str(pkg)], log=log)
        tarballs = sorted((pkg / "usr" / "src").glob("linux-source-*.tar.*"))
        if len(tarballs) != 1:
            raise InfraError(f"{spec}: {found[0].name} has no single usr/src tarball")
        progress.step(f"{spec}: importing {tarballs[0].name} into {dest} (a few minutes)")
        message = f"Import {tarballs[0].name} from Debian {rel.package} {version}"
        tarball.import_into(tarballs[0], dest, tag, message, log)
    finally:
        shutil.rmtree(pkg, ignore_errors=True)
        found[0].unlink(missing_ok=True)
    progress.step(f"{spec}: ready: {dest} ({tag}, {git.rev_parse(dest, tag)[:12]})")


def field(stanza: str, key: str) -> str | None:
    """A field of a Debian control stanza (apt-cache show, a .dsc), None when absent."""
    m = re.search(rf"^{re.escape(key)}: *(\S+)", stanza, re.M)
    return m.group(1) if m else None
