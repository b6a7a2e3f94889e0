"""The candidate set of a bisection on the commit graph (kbisect/bisect/graph.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kbisect.bisect.posterior import graph as graph_mod
from kbisect.bisect.posterior.graph import EmptyRange, Graph
from kbisect.simulate import histories
from tests.fakes import git


def diamond() -> Graph:
    """good - a - m - c, good - b - m: a merge of two one-commit branches."""
    parents = {"good": [], "a": ["good"], "b": ["good"], "m": ["a", "b"], "c": ["m"]}
    return Graph.from_parents(parents, "c", ["good"])


def test_linear_range_ancestors_and_verdicts():
    g = Graph.from_parents(histories.linear(10), "c9", ["good"])
    assert g.commits == tuple(f"c{i}" for i in range(10))
    assert g.bad == "c9"
    for r in range(10):
        for c in range(10):
            assert g.is_bad(f"c{r}", f"c{c}") == (c <= r)
    assert not g.is_bad("good", "c0")
    assert g.first_parent("c0") == "good"
    assert g.first_parent("c5") == "c4"


def test_a_merge_is_bad_when_either_side_brought_the_culprit():
    g = diamond()
    assert g.commits.index("m") > max(g.commits.index("a"), g.commits.index("b"))
    assert g.is_bad("m", "a") and g.is_bad("m", "b") and g.is_bad("c", "b")
    assert not g.is_bad("a", "b") and not g.is_bad("b", "a")
    assert g.first_parent("m") == "a"


def test_commits_reachable_from_good_are_not_candidates():
    """A branch forked before good: its base is good's ancestor, its commits are in range."""
    parents = {"old": [], "good": ["old"], "x": ["old"], "m": ["good", "x"]}
    g = Graph.from_parents(parents, "m", ["good"])
    assert set(g.commits) == {"x", "m"}
    assert g.parents[g.index["m"]] == (g.index["x"],)
    assert g.is_bad("m", "x")


def test_descendants_are_the_transpose_of_ancestors():
    rng = random.Random(5)
    parents = histories.merges(200, rng)
    g = Graph.from_parents(parents, next(reversed(parents)), ["good"])
    desc = g.desc
    for _ in range(300):
        i, j = rng.randrange(g.n), rng.randrange(g.n)
        assert bool(g.anc[i] >> j & 1) == bool(desc[j] >> i & 1)
    assert all(g.anc[-1] >> j & 1 for j in range(g.n))  # bad holds every candidate


def test_parents_come_before_children_in_a_merge_heavy_history():
    parents = histories.merges(500, random.Random(2))
    g = Graph.from_parents(parents, next(reversed(parents)), ["good"])
    assert g.n == 500
    assert sum(len(p) == 2 for p in g.parents) > 20
    for i, ps in enumerate(g.parents):
        assert all(p < i for p in ps)


def test_round_trip_through_json():
    g = diamond()
    again = Graph.from_dict(g.as_dict())
    assert again.commits == g.commits and again.anc == g.anc and again.goods == g.goods


def test_empty_range_is_a_user_error():
    with pytest.raises(EmptyRange):
        Graph.from_parents({"good": []}, "good", ["good"])


def test_rev_list_command_and_parser_are_pure():
    cmd = graph_mod.rev_list_command(Path("/t"), ["g1", "g2"], "b")
    assert cmd == [
        "git",
        "-C",
        "/t",
        "rev-list",
        "--parents",
        "--topo-order",
        "--reverse",
        "b",
        "^g1",
        "^g2",
    ]
    assert graph_mod.parse_rev_list("a p\nb a\n\nm b x\n") == {
        "a": ["p"],
        "b": ["a"],
        "m": ["b", "x"],
    }


def test_read_from_git_with_a_merge(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")

    def commit(msg: str) -> str:
        git(repo, "commit", "-q", "--allow-empty", "-m", msg)
        return git(repo, "rev-parse", "HEAD")

    good = commit("good")
    a = commit("a")
    git(repo, "checkout", "-q", "-b", "topic", good)
    b = commit("b")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    m = git(repo, "rev-parse", "HEAD")
    bad = commit("bad")
    g = graph_mod.read(repo, [good], bad)
    assert set(g.commits) == {a, b, m, bad}
    assert g.bad == bad
    assert g.is_bad(m, b) and not g.is_bad(a, b)
    assert g.first_parent(a) == good
