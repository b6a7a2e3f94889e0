"""Kernel trees: the check, the import commands, the embedded default from a tiny tarball."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core.exceptions import EXIT_USER, MissingTool, UserError
from kbisect.source import git, tree
from tests.fakes import make_fake_kernel_repo

TOP = "linux-source-6.12"
FILES = {
    ".gitignore": "/*\n",
    "Makefile": "all:\n",
    "Kconfig": 'mainmenu "tiny"\n',
    "scripts/kconfig/x": "kconfig helper\n",
}


def tiny_tarball(where: Path) -> Path:
    """A .tar.xz shaped like Debian's linux-source: one top dir, a .gitignore of `/*`."""
    src = where / "src" / TOP
    for rel, text in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    (src / "scripts/kconfig/x").chmod(0o755)
    tarball = where / f"{TOP}.tar.xz"
    with tarfile.open(tarball, "w:xz") as tar:
        tar.add(src, arcname=TOP)
    return tarball


# -- check_kernel_tree -----------------------------------------------------------------


def test_check_kernel_tree_accepts_a_subdir_and_returns_the_top(tmp_path: Path) -> None:
    make_fake_kernel_repo(tmp_path / "linux")
    assert tree.check_kernel_tree(tmp_path / "linux" / "scripts") == tmp_path / "linux"


def test_check_kernel_tree_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(tree.NotAKernelTree, match="no such directory"):
        tree.check_kernel_tree(tmp_path / "nope")


def test_check_kernel_tree_git_repo_that_is_not_a_kernel(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "Makefile").write_text("all:\n")
    git.git(repo, "init", "-q")
    with pytest.raises(tree.NotAKernelTree, match="not a kernel tree"):
        tree.check_kernel_tree(repo)


def test_check_kernel_tree_plain_dir_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a git repository"):
        tree.check_kernel_tree(tmp_path)


def test_tree_check_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_fake_kernel_repo(tmp_path / "linux")
    assert cli.main(["tree", "check", str(tmp_path / "linux")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "linux")
    assert cli.main(["tree", "check", str(tmp_path / "nope")]) == EXIT_USER


# -- import ----------------------------------------------------------------------------


def test_import_commands_shape() -> None:
    cmds = tree.import_commands(Path("/t/linux-source-6.12.tar.xz"), Path("/d"))
    assert cmds[0] == [
        "tar",
        "-xf",
        "/t/linux-source-6.12.tar.xz",
        "-C",
        "/d",
        "--strip-components=1",
    ]
    assert all(c[:3] == ["git", "-C", "/d"] for c in cmds[1:])
    verbs = [c[3] for c in cmds[1:]]
    assert verbs[0] == "init" and verbs.index("add") < verbs.index("commit") < verbs.index("tag")
    add = next(c for c in cmds if c[3:4] == ["add"])
    assert "-f" in add  # the tarball's .gitignore ignores everything
    commit = next(c for c in cmds if c[3:4] == ["commit"])
    assert "--no-verify" in commit and "linux-source-6.12.tar.xz" in commit[-1]
    assert cmds[-1][-1] == tree.DEFAULT_TAG


def test_default_tree_imports_ignored_files_reproducibly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = tiny_tarball(tmp_path)
    ids = []
    for cache in ("cache1", "cache2"):
        monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / cache))
        dest = tree.default_tree(tarball)
        assert dest == tmp_path / cache / "trees" / tree.DEFAULT_NAME
        assert set(git.git(dest, "ls-files").splitlines()) == set(FILES)
        assert git.git(dest, "status", "--porcelain", "--ignored") == ""
        assert git.git(dest, "log", "-1", "--format=%an <%ae> %ad %cn", "--date=iso-strict") == (
            "kbisect <kbisect@localhost> 2025-01-01T00:00:00+00:00 kbisect"
        )
        assert git.git(dest, "ls-files", "-s", "scripts/kconfig/x").startswith("100755")
        ids.append(git.rev_parse(dest, tree.DEFAULT_TAG))
        assert not list(dest.parent.glob(f".{dest.name}.*"))  # the temp dir is gone
    assert ids[0] == ids[1]
    assert tree.default_tree(tarball) == dest  # already there: no re-import


def test_default_tree_is_a_kernel_tree_for_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tree, "DEFAULT_TARBALL", tiny_tarball(tmp_path))
    monkeypatch.setattr(tree.default_tree, "__defaults__", (tree.DEFAULT_TARBALL,))
    assert tree.resolve(None) == tree.resolve("default") == tree.default_path()
    assert tree.check_kernel_tree(tree.default_path()) == tree.default_path()


def test_default_tree_without_tarball_is_missing_tool(tmp_path: Path) -> None:
    with pytest.raises(MissingTool, match=r"linux-source-6\.12"):
        tree.default_tree(tmp_path / "linux-source-6.12.tar.xz")


def test_default_tree_import_ignores_the_users_commit_signing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path
) -> None:
    with (isolated_env / ".gitconfig").open("a") as f:
        f.write("[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = false\n")
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    dest = tree.default_tree(tiny_tarball(tmp_path))
    assert git.git(dest, "log", "-1", "--format=%G?") == "N"
