"""The posterior method's git-bisect-compatible log, replayed by plain git on generated
histories (linear and with merges): git names the same first bad commit, or the range."""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from kbisect.bisect.git import log as bisect_log
from kbisect.bisect.posterior import graph as graph_mod
from kbisect.bisect.posterior import replay
from kbisect.bisect.posterior.posterior import Posterior
from tests.fakes import git


def commit(repo: Path, name: str) -> str:
    git(repo, "commit", "-q", "--allow-empty", "-m", name)
    return git(repo, "rev-parse", "HEAD")


def linear_repo(repo: Path, n: int) -> list[str]:
    """good, then c1..cn on one line."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    return [commit(repo, "good")] + [commit(repo, f"c{i}") for i in range(1, n + 1)]


def merge_repo(repo: Path) -> tuple[list[str], str]:
    """old <- good <- m1 <- m2 <- M (merge of topic) <- m3, topic forked at `old`, before
    good: t1 <- t2 <- t3. Returns (commits by name order, the merge)."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    old = commit(repo, "old")
    good = commit(repo, "good")
    m1, m2 = commit(repo, "m1"), commit(repo, "m2")
    git(repo, "checkout", "-q", "-b", "topic", old)
    t = [commit(repo, f"t{i}") for i in (1, 2, 3)]
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    merge = git(repo, "rev-parse", "HEAD")
    m3 = commit(repo, "m3")
    return [good, m1, m2, *t, m3], merge


def decided(
    g: graph_mod.Graph, culprit: str, tested: list[str], broken: frozenset[str] = frozenset()
) -> Posterior:
    """A posterior that has seen clear samples of the endpoints and `tested`."""
    rng = random.Random(1)
    p = Posterior(g)
    for c in [g.goods[0], g.bad, *tested] * 4:
        if c in broken:
            p.failed(c)
            continue
        level = 750.0 if g.is_bad(c, culprit) else 1000.0
        p.update(c, level * (1 + 0.02 * rng.gauss(0, 1)))
    return p


def replayed(repo: Path, text: str, tmp_path: Path) -> str:
    log = tmp_path / "git-bisect.log"
    log.write_text(text)
    out = subprocess.run(
        ["git", "-C", str(repo), "bisect", "replay", str(log)],
        capture_output=True,
        text=True,
        check=False,
    )
    git(repo, "bisect", "reset")
    return out.stdout + out.stderr


def parents_of(repo: Path) -> Callable[[str], list[str]]:
    return lambda c: git(repo, "rev-parse", f"{c}^@").split()


def test_replay_names_the_culprit_on_a_linear_history(tmp_path):
    repo = tmp_path / "linux"
    shas = linear_repo(repo, 12)
    g = graph_mod.read(repo, [shas[0]], shas[-1])
    post = decided(g, shas[7], [shas[6], shas[7], shas[4], shas[9]])
    answer = post.stop(0.95)
    assert answer is not None and answer.kind == "culprit"
    assert answer.candidates[0][0] == shas[7]
    text = replay.log(
        post, answer, 0.95, lambda c: "s", parents_of(repo), [shas[6], shas[7], shas[4], shas[9]]
    )
    assert f"{shas[7]} is the first bad commit" in replayed(repo, text, tmp_path)
    assert bisect_log.parse(text).first_bad == shas[7]


def test_replay_names_the_range_that_skips_leave(tmp_path):
    repo = tmp_path / "linux"
    shas = linear_repo(repo, 10)
    g = graph_mod.read(repo, [shas[0]], shas[-1])
    broken = frozenset({shas[5], shas[6]})
    post = decided(g, shas[6], [shas[4], shas[5], shas[6], shas[7], shas[2]], broken)
    answer = post.stop(0.95)
    assert answer is not None and answer.kind == "range"
    assert {c for c, _ in answer.candidates} == {shas[5], shas[6], shas[7]}
    text = replay.log(post, answer, 0.95, lambda c: "s", parents_of(repo), [shas[4], shas[7]])
    out = replayed(repo, text, tmp_path)
    assert "could be any of" in out
    assert all(c in out for c in (shas[5], shas[6], shas[7])) and shas[4] not in out.split("of")[1]
    assert set(bisect_log.parse(text).candidates) == {shas[5], shas[6], shas[7]}


@pytest.mark.parametrize("name", ["t2", "m2", "merge"])
def test_replay_names_the_culprit_across_a_merge(tmp_path, name):
    repo = tmp_path / "linux"
    (good, m1, m2, t1, t2, t3, m3), merge = merge_repo(repo)
    culprit = {"t2": t2, "m2": m2, "merge": merge}[name]
    g = graph_mod.read(repo, [good], m3)
    assert set(g.commits) == {m1, m2, t1, t2, t3, merge, m3}
    post = decided(g, culprit, [m1, m2, t1, t2, t3, merge])
    answer = post.stop(0.95)
    assert answer is not None and answer.candidates[0][0] == culprit
    text = replay.log(post, answer, 0.95, lambda c: "s", parents_of(repo), [m2, t2, merge])
    assert f"{culprit} is the first bad commit" in replayed(repo, text, tmp_path)
