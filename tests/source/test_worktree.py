"""Scratch worktrees: checkouts that never touch the user's, and base + revert."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.core import paths, proc
from kbisect.core.exceptions import EXIT_USER
from kbisect.source import git as gitmod
from kbisect.source import scratch, worktree
from tests.fakes import git, make_fake_kernel_repo, repo_snapshot


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
    own = scratch.path_for(tree)  # the revert lives in kbisect's repository only
    assert not gitmod.has_commit(tree, reverted) and gitmod.has_commit(own, reverted)
    assert git(own, "rev-parse", f"{reverted}^") == shas[2]
    assert git(own, "rev-parse", f"{reverted}^{{tree}}") == git(tree, "rev-parse", "HEAD~2^{tree}")
    assert git(own, "diff", "--name-status", shas[2], reverted) == "D\tkernel/fair.c"
    # An older commit under a newer base: base + revert keeps the later work.
    reverted = worktree.revert_onto(tree, shas[3], shas[2])
    assert git(own, "diff", "--name-status", shas[3], reverted) == "D\tkernel/fair.c"
    assert git(own, "show", f"{reverted}:kernel/knob.c") == "int knob = 2;"
    assert git(tree, "rev-parse", "HEAD") == shas[3]  # the user's checkout did not move
    assert scratch.rev_parse(tree, reverted) == reverted  # what build() resolves it with
    assert scratch.reader(tree, reverted) == own and scratch.reader(tree, shas[2]) != own


def test_a_revert_cut_short_by_a_kill_does_not_block_the_next(
    repo: tuple[Path, list[str]],
) -> None:
    """Ctrl-C while `git revert` ran left MERGE_MSG.lock in the scratch worktree's admin
    dir; the next compare --revert failed and called it a conflict (the fault-injection
    suite found it)."""
    tree, shas = repo
    where = worktree.checkout(tree, shas[3], slot="revert")
    (_gitfile(where) / "MERGE_MSG.lock").write_text("")  # what the killed git left
    reverted = worktree.revert_onto(tree, shas[3], shas[2])
    assert git(scratch.path_for(tree), "diff", "--name-status", shas[3], reverted) == (
        "D\tkernel/fair.c"
    )


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
    reverted = worktree.revert_onto(tree, shas[3], shas[2])
    assert git(scratch.path_for(tree), "rev-parse", f"{reverted}^") == shas[3]


def test_add_command_is_pure() -> None:
    assert worktree.add_command(Path("/r"), Path("/w"), "abc") == [
        "git",
        "--no-optional-locks",
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


def test_a_busy_slot_says_who_holds_it_and_waits(tmp_path: Path, capsys) -> None:
    import subprocess
    import sys
    import time

    slot = tmp_path / "build"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from kbisect.source import worktree\n"
            "with worktree.locked(Path(sys.argv[1])):\n    print('held', flush=True); "
            "import time; time.sleep(2)",
            str(slot),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=paths.CHECKOUT,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    start = time.monotonic()
    with worktree.locked(slot):
        waited = time.monotonic() - start
    holder.wait()
    assert waited > 0.5
    assert f"waiting for build: another kbisect (pid {holder.pid}) works there" in (
        capsys.readouterr().err
    )


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


# -- the user's repository is only read ------------------------------------------------


def users_linked_worktree_gone_for_now(tree: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A linked worktree of the user's whose directory is absent (an unmounted disk)."""
    linked = tmp_path / "mnt" / "linked"
    git(tree, "worktree", "add", "-q", "-b", "feature", str(linked))
    away = tmp_path / "away"
    linked.rename(away)
    return linked, away


def test_nothing_is_written_into_the_users_repository(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    tree, shas = repo
    linked, away = users_linked_worktree_gone_for_now(tree, tmp_path)
    git(tree, "bisect", "start", shas[3], shas[1])
    before = repo_snapshot(tree)
    for slot in ("build", "bisect"):
        for commit in (shas[1], "HEAD~1", shas[2]):
            where = worktree.checkout(tree, commit, slot)
            assert _gitfile(where).parent == scratch.path_for(tree) / "worktrees"
    worktree.revert_onto(tree, shas[3], shas[2])
    with pytest.raises(worktree.RevertConflict):
        worktree.revert_onto(tree, shas[3], shas[1])
    assert repo_snapshot(tree) == before
    away.rename(linked)  # the disk is back: the user's worktree still works
    assert git(linked, "status", "--porcelain") == ""
    assert worktree.repo_id(where) == worktree.repo_id(tree)  # builds stay keyed alike


def _gitfile(where: Path) -> Path:
    return Path((where / ".git").read_text().strip().removeprefix("gitdir: "))


def test_old_worktrees_in_the_users_repository_are_moved_over(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """Caches from before the scratch repository: kbisect's worktrees were registered in
    the user's .git/worktrees. They move over with their files; only kbisect's entries
    are removed from the user's repository."""
    tree, shas = repo
    linked, away = users_linked_worktree_gone_for_now(tree, tmp_path)
    build, gone = worktree.path_for(tree, "build"), worktree.path_for(tree, "revert")
    for where in (build, gone):
        git(tree, "worktree", "add", "-q", "--detach", str(where), shas[2])
    proc.run(["rm", "-rf", str(gone)])
    knob = build / "kernel/knob.c"
    stamp = knob.stat().st_mtime_ns
    users = repo_snapshot(tree / ".git/worktrees/linked")
    assert sorted(p.name for p in (tree / ".git/worktrees").iterdir()) == [
        "build",
        "linked",
        "revert",
    ]
    assert worktree.checkout(tree, shas[2], "build") == build
    assert [p.name for p in (tree / ".git/worktrees").iterdir()] == ["linked"]
    assert _gitfile(build).parent == scratch.path_for(tree) / "worktrees"
    assert knob.stat().st_mtime_ns == stamp  # not rewritten: make has nothing to redo
    assert git(build, "status", "--porcelain") == "" and git(build, "rev-parse", "HEAD") == shas[2]
    assert repo_snapshot(tree / ".git/worktrees/linked") == users
    away.rename(linked)
    assert git(linked, "status", "--porcelain") == ""
    assert worktree.checkout(tree, shas[3], "build") == build  # and it works on
    assert knob.read_text() == "int knob = 2;\n"


def test_a_migration_cut_short_by_a_kill_is_finished_next_time(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """Killed after the scratch repository was made, before the old worktrees were moved
    over (the fault-injection suite found it): the next run moves them, and the user's
    repository loses kbisect's entries, not the next run's fast path."""
    tree, shas = repo
    users_linked_worktree_gone_for_now(tree, tmp_path)
    build = worktree.path_for(tree, "build")
    git(tree, "worktree", "add", "-q", "--detach", str(build), shas[2])
    where = scratch.path_for(tree)
    worktree._create(where, scratch.source(tree) / "objects", "sha1")  # then the kill
    assert worktree.checkout(tree, shas[3], "build") == build
    assert [p.name for p in (tree / ".git/worktrees").iterdir()] == ["linked"]
    assert _gitfile(build).parent == where / "worktrees"


def test_a_sha256_repository_gets_a_sha256_scratch_repository(tmp_path: Path) -> None:
    tree = tmp_path / "linux256"
    tree.mkdir()
    git(tree, "init", "-q", "--object-format=sha256")
    (tree / "f").write_text("x\n")
    git(tree, "add", "f")
    git(tree, "commit", "-q", "-m", "one")
    head = git(tree, "rev-parse", "HEAD")
    where = worktree.checkout(tree, "HEAD")
    assert len(head) == 64 and git(where, "rev-parse", "HEAD") == head
    assert (where / "f").read_text() == "x\n"


def test_a_worktree_whose_head_the_users_gc_pruned_is_made_afresh(
    repo: tuple[Path, list[str]],
) -> None:
    """The user reverts on a topic branch, deletes it and prunes: kbisect's revert slot
    points at a commit whose parent is gone, and recovers."""
    tree, shas = repo
    git(tree, "checkout", "-q", "-b", "topic")
    (tree / "topic.c").write_text("int topic;\n")
    git(tree, "add", "topic.c")
    git(tree, "commit", "-q", "-m", "topic work")
    topic = git(tree, "rev-parse", "HEAD")
    worktree.revert_onto(tree, topic, shas[2])
    git(tree, "checkout", "-q", "-")
    git(tree, "branch", "-q", "-D", "topic")
    git(tree, "reflog", "expire", "--expire=now", "--all")
    git(tree, "gc", "-q", "--prune=now")
    assert not gitmod.has_commit(tree, topic)
    with pytest.raises(gitmod.UnknownRevision):
        worktree.revert_onto(tree, topic, shas[2])
    reverted = worktree.revert_onto(tree, shas[3], shas[2])
    assert git(scratch.path_for(tree), "rev-parse", f"{reverted}^") == shas[3]


def test_revert_onto_reverts_a_merge_against_its_first_parent(tmp_path: Path) -> None:
    """A merge named as the culprit: what it brought in from its topic goes, the first
    parent's line stays."""
    tree = tmp_path / "linux"
    shas = make_fake_kernel_repo(tree, [{"subject": "base", "files": {"main.c": "m\n"}}])
    git(tree, "checkout", "-q", "-b", "topic")
    (tree / "kernel").mkdir(exist_ok=True)
    (tree / "kernel/topic.c").write_text("slow\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "topic: slow")
    git(tree, "checkout", "-q", "-")
    (tree / "main.c").write_text("m2\n")
    git(tree, "commit", "-q", "-am", "mainline")
    git(tree, "merge", "-q", "--no-ff", "-m", "Merge topic", "topic")
    merge = git(tree, "rev-parse", "HEAD")
    reverted = worktree.revert_onto(tree, merge, merge)
    where = worktree.path_for(tree, "revert")
    assert git(where, "rev-parse", "HEAD^") == merge
    assert not (where / "kernel/topic.c").exists() and (where / "main.c").read_text() == "m2\n"
    assert reverted != merge and shas[1] != reverted
