"""Scratch `git worktree`s, so that the user's checkout, branches, index and bisect
state are never touched. One persistent worktree per (repository, slot): checking out
another revision there only rewrites the files that differ, which keeps incremental
kernel builds incremental.
"""

from __future__ import annotations

import fcntl
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kbisect import git, paths, proc, tree
from kbisect.exceptions import CommandFailed, UserError


class RevertConflict(UserError):
    """`git revert` of the commit does not apply cleanly on the base."""


def repo_id(repo: Path) -> str:
    """A short stable id for a repository: its common git dir's path, so that a linked
    worktree (kbisect's own, or the user's) shares builds with the main checkout."""
    gd = str(git.common_dir(repo).resolve())
    name = Path(gd).parent.name if gd.endswith("/.git") else Path(gd).name
    return f"{name}-{hashlib.sha256(gd.encode()).hexdigest()[:8]}"


def path_for(repo: Path, slot: str) -> Path:
    return paths.cache_dir() / "worktrees" / repo_id(repo) / slot


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path`.lock for the duration."""
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def add_command(repo: Path, where: Path, commit: str) -> list[str]:
    return ["git", "-C", str(repo), "worktree", "add", "--detach", "--force", str(where), commit]


def checkout(repo: Path, commit: str, slot: str = "build") -> Path:
    """Detached checkout of `commit` in the slot's worktree (created on first use)."""
    where = path_for(repo, slot)
    if (where / ".git").exists():
        try:
            git.git(where, "checkout", "-q", "--detach", "--force", commit)
            git.git(where, "clean", "-q", "-fdx")
            return where
        except CommandFailed:
            proc.run(
                ["git", "-C", str(repo), "worktree", "remove", "--force", str(where)], check=False
            )
    git.git(repo, "worktree", "prune")
    where.parent.mkdir(parents=True, exist_ok=True)
    proc.capture(add_command(repo, where, commit))
    return where


def revert_onto(repo: Path, base: str, commit: str) -> str:
    """Create (detached, in a scratch worktree) base + revert of commit; return its id."""
    with locked(path_for(repo, "revert")):
        where = checkout(repo, base, slot="revert")
        # A fixed identity and dates: the same revert on every machine, even one whose git
        # has no user.email (else the commit fails and would be reported as a conflict).
        result = proc.run(
            ["git", "-C", str(where), "revert", "--no-edit", "--no-gpg-sign", commit],
            env=tree.FIXED_IDENTITY,
            check=False,
            capture=True,
        )
        if result.returncode != 0:
            proc.run(["git", "-C", str(where), "revert", "--abort"], check=False)
            raise RevertConflict(
                f"reverting {commit[:12]} on {base[:12]} conflicts; "
                "resolve it in a branch and compare against that"
            )
        return git.rev_parse(where, "HEAD")
