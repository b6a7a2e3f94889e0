"""The information bound of a round of k tests (kbisect/simulate/bound.py): its partition
against the graph's own good/bad rule, and the bound a linear history is known to have."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbisect.bisect.posterior.graph import Graph
from kbisect.simulate import bound, histories
from tests import scripts


def _linear(n: int) -> Graph:
    return Graph.from_parents(histories.linear(n), f"c{n - 1}", ["good"])


def _merges(n: int, seed: int) -> Graph:
    parents = histories.merges(n, random.Random(seed))
    return Graph.from_parents(parents, next(reversed(parents)), ["good"])


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 60), st.integers(0, 10_000), st.integers(1, 5))
def test_the_partition_is_the_graphs_own_good_and_bad(n, seed, k):
    g = _merges(n, seed)
    rng = random.Random(seed)
    picks = [rng.randrange(g.n) for _ in range(k)]
    bad = bound.cuts(g)
    cells: dict[tuple[bool, ...], int] = {}
    for culprit in g.commits:
        key = tuple(g.is_bad(g.commits[j], culprit) for j in picks)
        cells[key] = cells.get(key, 0) + 1
    want = -sum(c / g.n * math.log2(c / g.n) for c in cells.values())
    assert math.isclose(bound.entropy(bad, picks), want, abs_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 60), st.data())
def test_k_tests_on_a_linear_history_tell_at_most_log2_k_plus_1_bits(n, data):
    g = _linear(n)
    picks = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6))
    assert bound.entropy(bound.cuts(g), picks) <= math.log2(len(picks) + 1) + 1e-9


def test_the_best_round_reaches_the_linear_bound_where_it_can():
    for n, k in ((24, 1), (24, 3), (24, 5), (30, 4), (32, 7)):
        picks, bits = bound.best_round(_linear(n), k)
        assert len(picks) == k
        assert math.isclose(bits, math.log2(k + 1), abs_tol=1e-9), (n, k, picks, bits)
    # a merge-heavy range: k tests can cut more than k + 1 parts, never more than 2^k
    picks, bits = bound.best_round(_merges(200, 3), 4)
    assert math.log2(5) - 0.05 < bits <= 4


def test_the_script_prints_a_row_per_history_and_k_and_refuses_bad_input(capsys):
    script = scripts.load("round-bound")
    argv = ["--shape", "linear", "--commits", "24", "--histories", "2", "--k", "1,3"]
    assert script.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [r for r in out if r.startswith("| ") and "---" not in r]
    assert len(rows) == 1 + 2 * 2
    # 24 commits, k = 3: 2 bits a round, log2(24) / 2 rounds
    assert rows[2].split("|")[4].strip() == "2.000"
    assert rows[2].split("|")[6].strip() == f"{math.log2(24) / 2:.2f}"
    with pytest.raises(SystemExit) as bad:
        script.main(["--k", "four"])
    assert bad.value.code == 2
    assert "not a list of integers" in capsys.readouterr().err
