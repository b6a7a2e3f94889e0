"""Scratch worktrees of kbisect's own repository (scratch.py), so that the user's
checkout, branches, index, worktree list and bisect state are never touched. One
persistent worktree per (repository, slot): checking out another revision there only
rewrites the files that differ, which keeps incremental kernel builds incremental.

Caches made before the scratch repositories had their worktrees registered in the
user's repository (`.git/worktrees/<slot>`); `retire_old` moves each one over to the
scratch repository, keeping its files (and so its builds), and removes the admin entry
kbisect had made in the user's repository, and nothing else there.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kbisect.core import lock, once, paths, proc
from kbisect.core.exceptions import CommandFailed, UserError
from kbisect.source import git, scratch, tarball

repo_id = scratch.repo_id


class RevertConflict(UserError):
    """`git revert` of the commit does not apply cleanly on the base."""


def path_for(repo: Path, slot: str) -> Path:
    return paths.cache_dir() / "worktrees" / repo_id(repo) / slot


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path`.lock for the duration (saying so when another
    kbisect holds it: a build of another command in the same slot waits its turn)."""
    with lock.hold(
        path.with_name(path.name + ".lock"),
        wait=True,
        busy=lambda pid: f"waiting for {path.name}: another kbisect (pid {pid}) works there",
    ):
        yield


def add_command(repo: Path, where: Path, commit: str) -> list[str]:
    return git.command(repo, "worktree", "add", "--detach", "--force", str(where), commit)


def scratch_repo(repo: Path) -> Path:
    """kbisect's repository for `repo`, created (and old worktrees retired) on first use."""
    where = scratch.path_for(repo)
    objects = scratch.source(repo) / "objects"
    if scratch.is_ready(where, objects) and not _old_admins(repo):
        return where
    with locked(where):
        if not scratch.is_ready(where, objects):
            _create(where, objects, git.git(repo, "rev-parse", "--show-object-format"))
        retire_old(repo, where)  # also what a kill cut short last time
    return where


def _create(where: Path, objects: Path, object_format: str) -> None:
    def make(tmp: Path) -> None:
        for cmd in scratch.init_commands(tmp, objects, object_format):
            proc.capture(cmd)
        (tmp / scratch.ALTERNATES).write_bytes(scratch.alternates_line(objects))

    once.build(where, make)


def _linked_to(where: Path) -> Path | None:
    """The admin dir a worktree's .git file points to, if it is one."""
    dotgit = where / ".git"
    if not dotgit.is_file():
        return None
    text = dotgit.read_text().strip()
    return Path(text.removeprefix("gitdir: ")) if text.startswith("gitdir: ") else None


def _is_ours(where: Path, repo: Path) -> bool:
    admin = _linked_to(where)
    return admin is not None and admin.parent.parent == scratch.path_for(repo)


def checkout(repo: Path, commit: str, slot: str = "build") -> Path:
    """Detached checkout of `commit` (as `repo` names it) in the slot's worktree, a
    worktree of kbisect's repository (created on first use)."""
    own = scratch_repo(repo)
    commit = scratch.rev_parse(repo, commit)
    where = path_for(repo, slot)
    if _is_ours(where, repo):
        try:
            git.git(where, "checkout", "-q", "--detach", "--force", commit)
            # keep the O= dirs kbisect builds in (build.OBJ_PREFIX), drop everything else
            git.git(where, "clean", "-q", "-fdx", "-e", "/.kbisect-o-*")
            return where
        except CommandFailed:
            pass
    shutil.rmtree(where, ignore_errors=True)
    git.git(own, "worktree", "prune")  # kbisect's own repository: only its own worktrees
    where.parent.mkdir(parents=True, exist_ok=True)
    proc.capture(add_command(own, where, commit))
    return where


def _old_admins(repo: Path) -> list[tuple[Path, Path]]:
    """(admin dir, worktree) of each worktree kbisect registered in the user's repository
    (before it had its own); the user's own worktrees are not listed."""
    admins = scratch.source(repo) / "worktrees"
    ours = (paths.cache_dir() / "worktrees" / repo_id(repo)).resolve()
    found = []
    for admin in sorted(admins.iterdir()) if admins.is_dir() else []:
        gitdir = admin / "gitdir"
        where = Path(gitdir.read_text().strip()).parent if gitdir.is_file() else None
        if where is not None and where.resolve().parent == ours:
            found.append((admin, where))
    return found


def retire_old(repo: Path, own: Path) -> None:
    """Move kbisect's worktrees registered in the user's repository over to `own`."""
    for admin, where in _old_admins(repo):
        linked = _linked_to(where)
        if linked is not None and linked.resolve() == admin.resolve():
            _adopt(own, where, admin)
        shutil.rmtree(admin)  # the entry kbisect made in the user's repository


def _adopt(own: Path, where: Path, old_admin: Path) -> None:
    """Re-register the worktree at `where` in `own`, keeping its files and their stat data
    (the old index is copied), so make finds nothing to rebuild; else remove it."""
    head = (old_admin / "HEAD").read_text().strip()
    tmp = where.with_name(f".{where.name}.adopt")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        proc.capture(
            git.command(own, "worktree", "add", "-q", "--no-checkout", "--detach", str(tmp), head)
        )
        admin = _linked_to(tmp)
        assert admin is not None
        if (old_admin / "index").is_file():
            shutil.copyfile(old_admin / "index", admin / "index")
        (tmp / ".git").replace(where / ".git")
        proc.capture(git.command(own, "worktree", "repair", str(where)))
        if not (admin / "index").is_file() or not _refresh(where):
            proc.capture(git.command(where, "read-tree", "HEAD"))
            _refresh(where)
    except (CommandFailed, AssertionError, OSError):
        shutil.rmtree(where, ignore_errors=True)  # checkout() makes a fresh one
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _refresh(where: Path) -> bool:
    """Update the index's stat data from the files (reads those whose stat differs);
    False if the index is unusable. Files that differ are left to checkout()."""
    result = proc.run(
        git.command(where, "update-index", "-q", "--refresh"), check=False, capture=True
    )
    return result.returncode in (0, 1)


def _drop_locks(where: Path) -> None:
    """Remove the lock files a git killed mid-command left in a scratch worktree's admin
    dir (a killed `git revert` leaves MERGE_MSG.lock, and the next one fails). Only
    kbisect uses its worktrees, and the caller holds the slot's lock."""
    admin = _linked_to(where)
    for left in admin.glob("*.lock") if admin is not None else []:
        left.unlink(missing_ok=True)


def revert_onto(repo: Path, base: str, commit: str) -> str:
    """Create base + revert of commit (in kbisect's repository, in a scratch worktree);
    return its id. A merge is reverted against its first parent (`-m 1`): what it brought
    in from its other parents goes."""
    with locked(path_for(repo, "revert")):
        where = checkout(repo, base, slot="revert")
        _drop_locks(where)
        commit = scratch.rev_parse(repo, commit)
        merge = len(git.git(where, "rev-list", "--parents", "-n", "1", commit).split()) > 2
        first_parent = ["-m", "1"] if merge else []
        # A fixed identity and dates: the same revert on every machine, even one whose git
        # has no user.email (else the commit fails and would be reported as a conflict).
        result = proc.run(
            git.command(where, "revert", "--no-edit", "--no-gpg-sign", *first_parent, commit),
            env=tarball.FIXED_IDENTITY,
            check=False,
            capture=True,
        )
        if result.returncode != 0:
            proc.run(git.command(where, "revert", "--abort"), check=False)
            raise RevertConflict(
                f"reverting {commit[:12]} on {base[:12]} conflicts; "
                "resolve it in a branch and compare against that"
            )
        return git.rev_parse(where, "HEAD")
