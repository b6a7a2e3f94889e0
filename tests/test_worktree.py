"""Scratch worktrees: checkouts that never touch the user's, and base + revert."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect import git as gitmod
from kbisect import paths, proc, worktree
from kbisect.exceptions import EXIT_USER
from tests.fakes import git, make_fake_kernel_repo


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "linux"
    shas = make_fake_kernel_repo(
        path,
        [
            {"subject": "add the sched knob", "files": {"kernel/knob.c": "int knob = 1;\n"}},
            {"subject": "touch fair.c", "files": {"kernel/fair.c": "int fair;\n"}},
            {"subject": "change the knob", "files": {"kernel/knob.c": "int knob = 2;\n"}},
        ],
    )
    return path, shas


def test_checkout_is_a_detached_worktree_in_the_cache(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    where = worktree.checkout(tree, shas[1])
    assert where == paths.cache_dir() / "worktrees" / worktree.repo_id(tree) / "build"
    assert git(where, "rev-parse", "HEAD") == shas[1]
    assert (where / "kernel/knob.c").is_file() and not (where / "kernel/fair.c").exists()
    (where / "stray.o").write_text("x")
    assert worktree.checkout(tree, shas[2]) == where  # reused, cleaned
    assert (where / "kernel/fair.c").is_file() and not (where / "stray.o").exists()
    assert git(tree, "rev-parse", "HEAD") == shas[3]
    assert git(tree, "status", "--porcelain") == ""


def test_checkout_recreates_a_deleted_worktree(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    where = worktree.checkout(tree, shas[1])
    proc.run(["rm", "-rf", str(where)])
    assert worktree.checkout(tree, shas[2]) == where
    assert git(where, "rev-parse", "HEAD") == shas[2]


def test_repo_id_is_stable_and_distinct(tmp_path: Path, repo: tuple[Path, list[str]]) -> None:
    tree, _ = repo
    other = tmp_path / "other" / "linux"
    make_fake_kernel_repo(other)
    assert worktree.repo_id(tree) == worktree.repo_id(tree / "kernel")
    assert worktree.repo_id(tree).startswith("linux-")
    assert worktree.repo_id(tree) != worktree.repo_id(other)


def test_revert_onto_gives_base_minus_the_change(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    reverted = worktree.revert_onto(tree, shas[2], shas[2])  # revert "touch fair.c" on itself
    assert git(tree, "rev-parse", f"{reverted}^") == shas[2]
    assert git(tree, "rev-parse", f"{reverted}^{{tree}}") == git(tree, "rev-parse", "HEAD~2^{tree}")
    assert git(tree, "diff", "--name-status", shas[2], reverted) == "D\tkernel/fair.c"
    # An older commit under a newer base: base + revert keeps the later work.
    reverted = worktree.revert_onto(tree, shas[3], shas[2])
    assert git(tree, "diff", "--name-status", shas[3], reverted) == "D\tkernel/fair.c"
    assert git(tree, "show", f"{reverted}:kernel/knob.c") == "int knob = 2;"
    assert git(tree, "rev-parse", "HEAD") == shas[3]  # the user's checkout did not move


def test_revert_onto_is_reproducible_without_a_user_identity(
    repo: tuple[Path, list[str]], isolated_env: Path
) -> None:
    tree, shas = repo
    first = worktree.revert_onto(tree, shas[3], shas[2])
    (isolated_env / ".gitconfig").write_text(
        "[user]\n\tuseConfigOnly = true\n[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = false\n"
    )
    assert worktree.revert_onto(tree, shas[3], shas[2]) == first


def test_conflicting_revert_raises_and_leaves_no_revert_in_progress(
    repo: tuple[Path, list[str]],
) -> None:
    tree, shas = repo
    with pytest.raises(worktree.RevertConflict, match="conflicts") as info:
        worktree.revert_onto(tree, shas[3], shas[1])  # knob.c changed since
    assert info.value.exit_code == EXIT_USER
    where = worktree.path_for(tree, "revert")
    assert (
        proc.run(
            ["git", "-C", str(where), "rev-parse", "-q", "--verify", "REVERT_HEAD"], check=False
        ).returncode
        != 0
    )
    assert git(where, "status", "--porcelain") == ""
    assert git(where, "rev-parse", "HEAD") == shas[3]
    assert git(tree, "status", "--porcelain") == ""
    # The slot still works afterwards.
    assert git(tree, "rev-parse", f"{worktree.revert_onto(tree, shas[3], shas[2])}^") == shas[3]


def test_add_command_is_pure() -> None:
    assert worktree.add_command(Path("/r"), Path("/w"), "abc") == [
        "git",
        "-C",
        "/r",
        "worktree",
        "add",
        "--detach",
        "--force",
        "/w",
        "abc",
    ]


def test_locked_creates_the_lock_beside(tmp_path: Path) -> None:
    with worktree.locked(tmp_path / "a" / "slot"):
        assert (tmp_path / "a" / "slot.lock").exists()


# -- git plumbing ------------------------------------------------------------------------


def test_git_plumbing(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    assert gitmod.rev_parse(tree, "HEAD~1") == shas[2]
    with pytest.raises(gitmod.UnknownRevision, match="unknown revision 'nope'"):
        gitmod.rev_parse(tree, "nope")
    assert gitmod.subject(tree, shas[1]) == "add the sched knob"
    git(tree, "tag", "v6.12-fake", shas[1])
    assert gitmod.describe(tree, shas[1]) == "v6.12-fake"
    assert gitmod.describe(tree, shas[2]).startswith("v6.12-fake-1-g")
    assert gitmod.is_ancestor(tree, shas[1], shas[3])
    assert not gitmod.is_ancestor(tree, shas[3], shas[1])
    assert not gitmod.is_dirty(tree)
    (tree / "untracked").write_text("x")
    assert not gitmod.is_dirty(tree)  # untracked files do not count
    (tree / "VERSION").write_text("dirty\n")
    assert gitmod.is_dirty(tree)
    assert not gitmod.bisect_in_progress(tree)
    git(tree, "bisect", "start")
    assert gitmod.bisect_in_progress(tree)
    assert gitmod.git_dir(tree) == tree / ".git"
    assert gitmod.toplevel(tree / "kernel") == tree
