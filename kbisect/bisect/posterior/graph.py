"""The candidates of a bisection on the commit graph: the commits of good..bad.

The culprit (the first bad commit) is one commit of `git rev-list bad ^good`. A revision
r of the range is bad iff the culprit is r or one of r's ancestors *in the range*; the
good endpoints and their ancestors are good. This holds across merges: a merge is bad as
soon as either side brought the culprit in.

Commits are numbered 0..n-1 in a topological order (parents first); `anc[i]` is the set
of candidates that are ancestors-or-self of commit i, as a bitset in a Python int (bit j
set iff commit j). For 3,000 commits that is 3,000 ints of 3,000 bits: built in a few
milliseconds, and `anc[r] & mask` with `int.bit_count()` answers "how many of these
candidates would make r bad" without a loop over commits.

`Graph.from_parents` is pure (tests, the simulator); `read(repo, good, bad)` runs one
`git rev-list` through kbisect.proc.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from kbisect.core import proc
from kbisect.core.exceptions import UserError


class EmptyRange(UserError):
    """good..bad holds no commit to bisect."""


@dataclass(frozen=True)
class Graph:
    """The range good..bad in topological order, with ancestor bitsets."""

    commits: tuple[str, ...]  # parents before children; the bad endpoint is the last
    parents: tuple[tuple[int, ...], ...]  # parents inside the range
    goods: tuple[str, ...]  # the good endpoints (outside the range)
    anc: tuple[int, ...] = field(repr=False)  # ancestors-or-self in the range, as bitsets
    index: Mapping[str, int] = field(repr=False)

    @property
    def n(self) -> int:
        return len(self.commits)

    @property
    def full(self) -> int:
        """The bitset of every candidate."""
        return (1 << self.n) - 1

    @property
    def bad(self) -> str:
        return self.commits[-1]

    def is_bad(self, revision: str, culprit: str) -> bool:
        """Whether `revision` (in the range, or a good endpoint) is bad for that culprit."""
        i = self.index.get(revision)
        return i is not None and bool(self.anc[i] >> self.index[culprit] & 1)

    def first_parent(self, commit: str) -> str:
        """commit's first parent: in the range, else the (first) good endpoint."""
        ps = self.parents[self.index[commit]]
        return self.commits[ps[0]] if ps else self.goods[0]

    def members(self, mask: int) -> list[int]:
        """The commit numbers in a bitset, ascending."""
        out = []
        while mask:
            low = mask & -mask
            out.append(low.bit_length() - 1)
            mask ^= low
        return out

    @cached_property
    def desc(self) -> list[int]:
        """For each commit, the bitset of range commits it is an ancestor-or-self of."""
        desc = [1 << i for i in range(self.n)]
        for i in reversed(range(self.n)):
            for p in self.parents[i]:
                desc[p] |= desc[i]
        return desc

    @classmethod
    def from_parents(
        cls, parents: Mapping[str, Sequence[str]], bad: str, goods: Iterable[str]
    ) -> Graph:
        """The range from a parents map (commit -> its parents, for every commit that can
        be reached from bad); commits reachable from a good endpoint are not in it."""
        goods = tuple(goods)
        excluded = _reachable(parents, goods)
        in_range = _reachable(parents, [bad]) - excluded
        if not in_range:
            raise EmptyRange(f"no commit in {'/'.join(g[:12] for g in goods)}..{bad[:12]}")
        order = _topological(parents, in_range)
        return _build(
            order, {c: [p for p in parents.get(c, ()) if p in in_range] for c in order}, goods
        )

    def as_dict(self) -> dict[str, Any]:
        """The range for state.json: commits in order and parents by number."""
        return {
            "commits": list(self.commits),
            "parents": [list(p) for p in self.parents],
            "goods": list(self.goods),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Graph:
        commits = [str(c) for c in data["commits"]]
        by_name = {
            c: [commits[j] for j in ps] for c, ps in zip(commits, data["parents"], strict=True)
        }
        return _build(commits, by_name, [str(g) for g in data["goods"]])


def _reachable(parents: Mapping[str, Sequence[str]], starts: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.add(c)
            todo.extend(parents.get(c, ()))
    return seen


def _topological(parents: Mapping[str, Sequence[str]], nodes: set[str]) -> list[str]:
    """Parents first; depth-first in the order the parents map lists commits."""
    order: list[str] = []
    placed: set[str] = set()
    for root in [c for c in parents if c in nodes]:
        stack = [root]
        while stack:
            c = stack[-1]
            todo = [p for p in parents.get(c, ()) if p in nodes and p not in placed]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            if c not in placed:
                placed.add(c)
                order.append(c)
    return order


def _build(
    order: Sequence[str], parents: Mapping[str, Sequence[str]], goods: Sequence[str]
) -> Graph:
    index = {c: i for i, c in enumerate(order)}
    anc: list[int] = []
    pars: list[tuple[int, ...]] = []
    for i, c in enumerate(order):
        ps = tuple(index[p] for p in parents[c])
        bits = 1 << i
        for p in ps:
            bits |= anc[p]
        anc.append(bits)
        pars.append(ps)
    return Graph(tuple(order), tuple(pars), tuple(goods), tuple(anc), index)


# --- git ---------------------------------------------------------------------------------


def rev_list_command(repo: Path, good: Sequence[str], bad: str) -> list[str]:
    """Every commit of good..bad with its parents, parents before children."""
    head = ["git", "-C", str(repo), "rev-list", "--parents", "--topo-order", "--reverse"]
    return [*head, bad, *(f"^{g}" for g in good)]


def parse_rev_list(text: str) -> dict[str, list[str]]:
    """`commit parent...` lines to a parents map, in the order given."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.strip():
            commit, *ps = line.split()
            out[commit] = ps
    return out


def read(repo: Path, good: Sequence[str], bad: str) -> Graph:
    """The range good..bad of the repository (full commit ids)."""
    parents = parse_rev_list(proc.capture(rev_list_command(repo, good, bad)))
    if bad not in parents:
        raise EmptyRange(f"no commit in {'/'.join(g[:12] for g in good)}..{bad[:12]}")
    inside = {c: [p for p in ps if p in parents] for c, ps in parents.items()}
    return _build(_topological(inside, set(inside)), inside, good)
