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
import os
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
    return f"{slug(name)}-{hashlib.sha256(gd.encode()).hexdigest()[:8]}"


def slug(name: str) -> str:
    """`name` with anything but ASCII letters, digits, `.`, `_` and `-` made `-`: the
    cache's names never carry a space, a newline or a shell-special character of the
    user's paths (the kernel's make cannot take a space); the hash keeps them apart."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "tree"


def path_for(repo: Path) -> Path:
    """Where the scratch repository of `repo` (or of its scratch worktree) lives."""
    return repos_dir() / f"{repo_id(repo)}.git"


def source(repo: Path) -> Path:
    """The common git dir of the repository the user named: for a scratch repository or
    one of its worktrees, the one it borrows from; else the repository's own."""
    common = git.common_dir(repo).resolve()
    if not _own(common):
        return common
    return alternate(common).parent


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
    return (where / ALTERNATES).is_file() and alternate(where) == objects


# git reads objects/info/alternates one path a line; a line that starts with `"` is
# C-quoted, so that a path with a newline (or a leading quote) can be named at all
_QUOTED = {b"\\": b"\\\\", b'"': b'\\"', b"\n": b"\\n", b"\t": b"\\t"}
_UNQUOTED = {v[1:]: k for k, v in _QUOTED.items()}


def alternates_line(objects: Path) -> bytes:
    """The alternates file's line for `objects`: as it is, or C-quoted when it must be."""
    raw = os.fsencode(objects)
    if not re.search(rb'[\x00-\x1f"\\]', raw):
        return raw + b"\n"
    quoted = re.sub(rb'[\x00-\x1f"\\]', lambda m: _QUOTED.get(m[0]) or b"\\%03o" % m[0][0], raw)
    return b'"' + quoted + b'"\n'


def alternate(git_dir: Path) -> Path:
    """The first path `git_dir`'s alternates file names (unquoted, as alternates_line
    quotes it)."""
    line = (git_dir / ALTERNATES).read_bytes().split(b"\n")[0]
    if line.startswith(b'"') and line.endswith(b'"'):
        line = re.sub(
            rb"\\([0-7]{3}|.)",
            lambda m: _UNQUOTED.get(m[1]) or bytes([int(m[1], 8)]),
            line[1:-1],
        )
    return Path(os.fsdecode(line))


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
