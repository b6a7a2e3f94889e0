"""A user's tree at a path with a space, unicode and a newline works end to end on the
fake target (compare with a revert, bisect by both methods), and every name kbisect
derives from it in the cache is a slug plus a hash: no space, newline or shell-special
character reaches the kernel's make."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core import paths
from kbisect.source import scratch
from tests.bisect.test_bisect import bisect_argv, history
from tests.bisect.test_step import fake, fixed_dates, write_scenario
from tests.fakes import fake_target

ODD = "my linux ü\nnew"
SAFE = re.compile(r"[A-Za-z0-9._-]+")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    fixed_dates(monkeypatch)
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    return {
        "scenario": write_scenario(tmp_path),
        "log": fake(tmp_path, cv=0.05),
        "results": tmp_path / "results",
        "repo": tmp_path / "odd dir $x;" / ODD,
    }


def derived_names() -> list[str]:
    """The names kbisect gave its own folders for the tree: worktrees/, builds/, repos/."""
    cache = paths.cache_dir()
    return [p.name for kind in ("worktrees", "builds") for p in (cache / kind).glob("*")] + [
        p.name for p in scratch.repos_dir().glob("*")
    ]


def test_the_slug_keeps_safe_names_and_replaces_the_rest() -> None:
    assert scratch.slug("linux-6.12") == "linux-6.12"
    assert scratch.slug(ODD) == "my-linux-new"
    assert scratch.slug("ü\n") == "tree"


@pytest.mark.parametrize("method", ["git", "posterior"])
def test_a_bisect_of_a_tree_at_an_odd_path(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], method: str
) -> None:
    env["repo"].parent.mkdir(parents=True)
    shas = history(env["repo"], 8, 5)
    argv = bisect_argv(env, shas[1], shas[-1], "--method", method, "--references", "0")
    assert cli.main(["bisect", *argv]) == 0
    assert f"first bad commit: {shas[5]}" in capsys.readouterr().out
    names = derived_names()
    assert names and all(SAFE.fullmatch(n) for n in names), names


def test_a_compare_with_a_revert_of_a_tree_at_an_odd_path(
    env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env["repo"].parent.mkdir(parents=True)
    shas = history(env["repo"], 3, 2)  # commit 2 is the slow one
    target = fake_target(tmp_path / "t", cv=0.01)
    out = tmp_path / "cmp"
    argv = ["compare", "--tree", str(env["repo"]), "--base", shas[3], "--revert", shas[2]]
    argv += ["--scenario", "smoke", "--boots", "3", "--target", str(target), "--out", str(out)]
    assert cli.main(argv) == 0  # B (reverted) is faster: an improvement, exit 0
    assert (out / "summary.json").is_file()
    names = derived_names()
    assert names and all(SAFE.fullmatch(n) for n in names), names


def test_a_cache_the_kernels_make_cannot_take_is_one_line_before_any_work(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env["repo"].parent.mkdir(parents=True)
    shas = history(env["repo"], 4, 3)
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "my cache"))
    argv = bisect_argv(env, shas[1], shas[-1], "--method", "git", "--references", "0")
    assert cli.main(["bisect", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the kernel's make cannot build under a path with a space" in err[0]
    assert not env["results"].exists() and not (tmp_path / "my cache").exists()
