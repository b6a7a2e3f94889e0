"""kbisect's own git repository for each repository it works on, in the cache:

    $cache/repos/<repo id>.git    bare; objects/info/alternates names the user's objects

Everything kbisect writes with git (its scratch worktrees with their HEAD, index and
bisect state, revert commits) goes there; the user's repository is only read (rev-parse,
log, describe, merge-base, status without optional locks), so its refs, index, worktree
list and object store stay byte-identical.

The user's objects are borrowed through alternates, not copied: creating the repository
takes milliseconds and no disk. A `git gc` in the user's repository may prune objects
that this repository still points at (a revert made on a branch since deleted): user
revisions are resolved in the user's repository first, a worktree whose HEAD lost its
objects is checked out afresh (worktree.checkout), and a revert is made again with the
same id (fixed identity and dates). See docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from kbisect.core import paths
from kbisect.source import git

FULL_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
ALTERNATES = Path("objects") / "info" / "alternates"


def repos_dir() -> Path:
    return paths.cache_dir() / "repos"


def _own(common: Path) -> bool:
    """Is this common git dir one of kbisect's scratch repositories?"""
    return common.parent == repos_dir().resolve() and common.suffix == ".git"


def repo_id(repo: Path) -> str:
    """A short stable id for a repository: its common git dir's path, so that a linked
    worktree (the user's) shares builds with the main checkout. A scratch repository,
    or one of its worktrees, has the id of the repository it serves."""
    common = git.common_dir(repo).resolve()
    if _own(common):
        return common.stem
    gd = str(common)
    name = common.parent.name if gd.endswith("/.git") else common.name
    return f"{name}-{hashlib.sha256(gd.encode()).hexdigest()[:8]}"


def path_for(repo: Path) -> Path:
    """Where the scratch repository of `repo` (or of its scratch worktree) lives."""
    return repos_dir() / f"{repo_id(repo)}.git"


def source(repo: Path) -> Path:
    """The common git dir of the repository the user named: for a scratch repository or
    one of its worktrees, the one it borrows from; else the repository's own."""
    common = git.common_dir(repo).resolve()
    if not _own(common):
        return common
    alternates = (common / ALTERNATES).read_text().split("\n")[0]
    return Path(alternates).parent


def init_commands(where: Path, objects: Path, object_format: str) -> list[list[str]]:
    """Make `where` a bare repository reading `objects` as alternates (pure)."""
    g = ["git", "-C", str(where)]
    return [
        ["git", "init", "-q", "--bare", f"--object-format={object_format}", str(where)],
        # Never gc here: kbisect's objects (revert commits) live only as loose objects.
        [*g, "config", "gc.auto", "0"],
        [*g, "config", "core.logAllRefUpdates", "false"],
        [*g, "config", "advice.detachedHead", "false"],
    ]


def is_ready(where: Path, objects: Path) -> bool:
    alternates = where / ALTERNATES
    return alternates.is_file() and alternates.read_text().strip() == str(objects)


def rev_parse(repo: Path, rev: str) -> str:
    """`rev` as the user sees it (read in their repository), or a full commit id that
    only kbisect's scratch repository holds (a revert commit it made)."""
    try:
        return git.rev_parse(repo, rev)
    except git.UnknownRevision:
        where = path_for(repo)
        if FULL_ID.fullmatch(rev) and where.is_dir() and git.has_commit(where, rev):
            return rev
        raise


def reader(repo: Path, commit: str) -> Path:
    """Where to read commit's subject and description: the user's repository (its tags),
    else the scratch repository (a commit kbisect made)."""
    user = source(repo)
    return user if git.has_commit(user, commit) else path_for(repo)
