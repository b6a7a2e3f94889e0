"""Kernel trees: checking that a path is one, and the embedded default tree.

The embedded default is Debian's linux-source-6.12 tarball imported once into a git
repository in the cache. Its .gitignore ignores everything (`/*`), hence `git add -f`.
The import commit has a fixed author, committer and date, so the same tarball gives
the same commit id on every machine.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from kbisect.core import atomic, paths, proc, progress
from kbisect.core.exceptions import MissingTool, UserError
from kbisect.source import git

DEFAULT_TARBALL = Path("/usr/src/linux-source-6.12.tar.xz")
DEFAULT_NAME = "linux-6.12-debian"
DEFAULT_TAG = "v6.12-debian"
FIXED_IDENTITY = {
    "GIT_AUTHOR_NAME": "kbisect",
    "GIT_AUTHOR_EMAIL": "kbisect@localhost",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "kbisect",
    "GIT_COMMITTER_EMAIL": "kbisect@localhost",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000",
}


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
    """The commands that turn the tarball into a git repo at dest (pure)."""
    g = ["git", "-C", str(dest)]
    message = f"Import {tarball.name} (Debian linux-source)"
    return [
        ["tar", "-xJf", str(tarball), "-C", str(dest), "--strip-components=1"],
        [*g, "init", "-q", "-b", "master"],
        [*g, "config", "core.autocrlf", "false"],
        [*g, "config", "gc.auto", "0"],
        [*g, "add", "-f", "-A", "."],
        # --no-gpg-sign: a user's commit.gpgsign would change (or fail) the fixed commit.
        [*g, "commit", "-q", "--no-verify", "--no-gpg-sign", "-m", message],
        [*g, "tag", DEFAULT_TAG],
    ]


def default_tree(tarball: Path = DEFAULT_TARBALL) -> Path:
    """The embedded default tree, imported on first use."""
    dest = default_path()
    if (dest / ".git").is_dir() and git.git(dest, "tag", "-l", DEFAULT_TAG):
        return dest
    if not tarball.exists():
        raise MissingTool(
            f"{tarball}: missing (apt-get install linux-source-6.12, or scripts/setup)"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".import-", dir=dest.parent))
    log = dest.parent / f"{DEFAULT_NAME}.import.log"
    log.write_text(progress.log_header(["tree", "default"]))
    progress.step(f"importing {tarball} into {dest} (once; a few minutes)")
    try:
        for cmd in import_commands(tarball, tmp):
            proc.run(cmd, log=log, env=FIXED_IDENTITY)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        atomic.fsync_dir(dest.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    progress.step(f"default tree ready: {dest} ({git.rev_parse(dest, DEFAULT_TAG)[:12]})")
    return dest


def resolve(tree: str | None) -> Path:
    """`None` or "default" → the embedded default tree; else a checked kernel tree."""
    if tree in (None, "default"):
        return default_tree()
    return check_kernel_tree(Path(tree).expanduser().resolve())
