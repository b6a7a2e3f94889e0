"""git plumbing, through the one command wrapper.

Every command runs with --no-optional-locks: on a user's repository kbisect only reads,
and a plain `git status` would refresh (rewrite) its index.
"""

from __future__ import annotations

from pathlib import Path

from kbisect.core import proc
from kbisect.core.exceptions import CommandFailed, UserError


class NotAGitRepo(UserError):
    """The path is not a git repository."""


class UnknownRevision(UserError):
    """The revision does not exist in the tree."""


def command(repo: Path, *args: str) -> list[str]:
    return ["git", "--no-optional-locks", "-C", str(repo), *args]


def git(repo: Path, *args: str, check: bool = True) -> str:
    return proc.capture(command(repo, *args), check=check)


def toplevel(path: Path) -> Path:
    try:
        return Path(git(path, "rev-parse", "--show-toplevel"))
    except CommandFailed:
        raise NotAGitRepo(f"{path}: not a git repository") from None


def rev_parse(repo: Path, rev: str) -> str:
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except CommandFailed:
        raise UnknownRevision(f"{repo}: unknown revision {rev!r}") from None


def subject(repo: Path, rev: str) -> str:
    return git(repo, "log", "-1", "--format=%s", rev)


def describe(repo: Path, rev: str) -> str:
    """The nearest tag and distance, else the abbreviated id (never git's error text)."""
    result = proc.run(
        command(repo, "describe", "--tags", "--always", "--abbrev=12", rev),
        check=False,
        capture=True,
    )
    return result.output.strip() if result.returncode == 0 else rev[:12]


def has_commit(repo: Path, commit: str) -> bool:
    """Does the repository hold this commit (its own objects or borrowed ones)?"""
    result = proc.run(
        command(repo, "cat-file", "-e", f"{commit}^{{commit}}"), check=False, capture=True
    )
    return result.returncode == 0


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    result = proc.run(
        command(repo, "merge-base", "--is-ancestor", ancestor, descendant),
        check=False,
        capture=True,
    )
    return result.returncode == 0


def is_dirty(repo: Path) -> bool:
    return bool(git(repo, "status", "--porcelain", "--untracked-files=no"))


def git_dir(repo: Path) -> Path:
    return Path(git(repo, "rev-parse", "--absolute-git-dir"))


def common_dir(repo: Path) -> Path:
    """The git dir shared by all worktrees of the repository."""
    path = Path(git(repo, "rev-parse", "--git-common-dir"))
    return path if path.is_absolute() else (repo / path).resolve()


def bisect_in_progress(repo: Path) -> bool:
    return (git_dir(repo) / "BISECT_LOG").exists()
