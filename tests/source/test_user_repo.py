"""The user's repository is only ever read. `kbisect build`, `compare --revert` and
`bisect` (on the fake tree, with the fake target) leave every file
of it as it was: refs, packed-refs, the index and its mtime, the worktree list with a
linked worktree whose directory is away, the user's own bisect, config, objects."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.source import scratch
from tests.bisect.test_step import fake, fixed_dates, write_scenario
from tests.fakes import fake_calls, git, repo_snapshot, users_repo_at_work


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """A user's repository in the middle of their own work."""
    fixed_dates(monkeypatch)
    specs = [{"subject": f"commit {i}", "tps": 1000 if i < 5 else 750} for i in range(1, 9)]
    return users_repo_at_work(tmp_path, specs)


def back_again(tmp_path: Path) -> None:
    """The linked worktree's disk is mounted again: it must still work."""
    (tmp_path / "away").rename(tmp_path / "mnt" / "linked")
    assert git(tmp_path / "mnt" / "linked", "status", "--porcelain") == ""


def test_build(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, _ = repo
    before = repo_snapshot(path)
    for rev in ("v6.12-user", "HEAD~3", "feature"):
        assert cli.main(["build", "--tree", str(path), "--rev", rev]) == 0
    assert repo_snapshot(path) == before
    back_again(tmp_path)


def test_compare_with_a_revert(
    repo: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, shas = repo
    target = fake(tmp_path)
    before = repo_snapshot(path)
    argv = [
        "compare",
        "--tree",
        str(path),
        "--base",
        shas[-1],
        "--revert",
        shas[5],
        "--scenario",
        "smoke",
        "--boots",
        "2",
        "--target",
        str(target),
        "--out",
        str(tmp_path / "cmp"),
    ]
    assert cli.main(argv) == 0
    assert len(fake_calls(target)) == 4
    assert repo_snapshot(path) == before
    assert (scratch.path_for(path) / "worktrees" / "revert").is_dir()
    back_again(tmp_path)


def test_bisect(
    repo: tuple[Path, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, shas = repo
    target = fake(tmp_path, cv=0.05)
    before = repo_snapshot(path)
    argv = [
        "bisect",
        "--tree",
        str(path),
        "--good",
        shas[1],
        "--bad",
        shas[-1],
        "--scenario",
        str(write_scenario(tmp_path)),
        "--target",
        str(target),
        "--recheck-samples",
        "3",
    ]
    assert cli.main(argv) == 0
    assert f"first bad commit: {shas[5]}" in capsys.readouterr().out
    assert repo_snapshot(path) == before
    back_again(tmp_path)


def test_build_and_compare_with_patches(
    repo: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, shas = repo
    target = fake(tmp_path)
    diff = tmp_path / "fast.diff"
    diff.write_text("--- a/TPS\n+++ b/TPS\n@@ -1 +1 @@\n-750\n+1000\n")
    before = repo_snapshot(path)
    build = ["build", "--tree", str(path), "--rev", shas[-1], "--patch", str(diff), "--json"]
    assert cli.main(build) == 0
    assert '"subject": "Apply fast.diff"' in capsys.readouterr().out
    compare = ["compare", "--tree", str(path), "--base", shas[-1], "--patch-b", str(diff)]
    fixed = ["--scenario", "smoke", "--boots", "2", "--target", str(target)]
    assert cli.main([*compare, *fixed, "--out", str(tmp_path / "cmp")]) == 0
    assert repo_snapshot(path) == before
    back_again(tmp_path)
