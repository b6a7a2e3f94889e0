"""Kernel trees: checking that a path is one, and the embedded default tree.

The embedded default is Debian's linux-source-6.12 tarball, as installed, imported once
into a git repository in the cache (kbisect/source/tarball.py). `debian:X` names another
Debian release, fetched and imported on first use (kbisect/source/release.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kbisect.core import paths, progress
from kbisect.core.exceptions import MissingTool, UserError
from kbisect.source import git, release
from kbisect.source import tarball as tarball_

DEFAULT_TARBALL = Path("/usr/src/linux-source-6.12.tar.xz")
DEFAULT_NAME = "linux-6.12-debian"
DEFAULT_TAG = "v6.12-debian"


class NotAKernelTree(UserError):
    """The path exists but does not look like a Linux source tree."""


def check_kernel_tree(path: Path) -> Path:
    """Return the tree's top level, or raise a one-line UserError."""
    if not path.is_dir():
        raise NotAKernelTree(f"{path}: no such directory")
    top = git.toplevel(path)
    if not all((top / p).exists() for p in ("Makefile", "Kconfig", "scripts/kconfig")):
        raise NotAKernelTree(f"{top}: not a kernel tree (no Makefile, Kconfig, scripts/kconfig)")
    return top


def default_path() -> Path:
    return paths.cache_dir() / "trees" / DEFAULT_NAME


def import_commands(tarball: Path, dest: Path) -> list[list[str]]:
    """The commands that import the default tarball at dest (pure)."""
    return tarball_.import_commands(tarball, dest, DEFAULT_TAG, _message(tarball))


def _message(tarball: Path) -> str:
    return f"Import {tarball.name} (Debian linux-source)"


def default_tree(tarball: Path = DEFAULT_TARBALL) -> Path:
    """The embedded default tree, imported on first use."""
    dest = default_path()
    if _default_imported(dest):
        return dest
    if not tarball.exists():
        raise MissingTool(
            f"{tarball}: missing (apt-get install linux-source-6.12, or scripts/setup)"
        )
    log = dest.parent / f"{DEFAULT_NAME}.import.log"
    dest.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(progress.log_header(["tree", "default"]))
    progress.step(f"importing {tarball} into {dest} (once; a few minutes)")
    tarball_.import_into(tarball, dest, DEFAULT_TAG, _message(tarball), log)
    progress.step(f"default tree ready: {dest} ({git.rev_parse(dest, DEFAULT_TAG)[:12]})")
    return dest


def _default_imported(dest: Path) -> bool:
    return (dest / ".git").is_dir() and bool(git.git(dest, "tag", "-l", DEFAULT_TAG))


def resolve(tree: str | None) -> Path:
    """`None` or "default" → the embedded default tree; `debian:X` → that Debian
    release, imported on first use (kbisect/source/release.py); else a checked kernel
    tree."""
    if tree in (None, "default"):
        return default_tree()
    if release.is_release(tree):
        return release.resolve(tree)
    return check_kernel_tree(Path(tree).expanduser().resolve())


@dataclass(frozen=True)
class Listed:
    name: str
    path: Path
    tag: str | None
    commit: str | None


def listed() -> list[Listed]:
    """The default tree and every release the registry knows, imported or not."""
    reg = release.registry()
    out = []
    d = default_path()
    imported = _default_imported(d)
    out.append(
        Listed(
            "default",
            d,
            DEFAULT_TAG if imported else None,
            git.rev_parse(d, DEFAULT_TAG)[:12] if imported else None,
        )
    )
    for name in sorted(reg.releases, key=release.version_key):
        path = release.tree_dir(name)
        tag = release.imported_tag(path) if (path / ".git").is_dir() else None
        commit = git.rev_parse(path, tag)[:12] if tag else None
        out.append(Listed(f"{release.PREFIX}{name}", path, tag, commit))
    return out
