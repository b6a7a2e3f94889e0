"""`git bisect` on the commit graph: the next revision halves the remaining candidates,
good marks remove a revision's ancestors, bad marks keep only them, skipped revisions are
not tested again; the answer is what is left (one commit, or a range hidden by skips)."""

from __future__ import annotations

from collections.abc import Callable

from kbisect.bisect.posterior.graph import Graph

Judge = Callable[[str], str]  # revision -> "good" | "bad" | "skip"


def next_revision(graph: Graph, left: int, skipped: set[str]) -> str | None:
    """The untested, unskipped candidate whose ancestors split `left` nearest half."""
    total = left.bit_count()
    best, value = None, 0
    for i in graph.members(left):
        if graph.commits[i] in skipped:
            continue
        w = (graph.anc[i] & left).bit_count()
        split = min(w, total - w)
        if split > value:
            best, value = graph.commits[i], split
    return best


def search(
    graph: Graph, judge: Judge, left: int, skipped: set[str], tested: list[tuple[str, str]]
) -> int:
    """Bisect until no revision splits the candidates; the candidates left."""
    while (r := next_revision(graph, left, skipped)) is not None:
        verdict = judge(r)
        tested.append((r, verdict))
        anc = graph.anc[graph.index[r]]
        if verdict == "good":
            left &= ~anc
        elif verdict == "bad":
            left &= anc
        else:
            skipped.add(r)
    return left


def bisect(
    graph: Graph, judge: Judge, broken: frozenset[str], retry: Judge | None = None
) -> tuple[list[str], list[tuple[str, str]]]:
    """git's answer and the revisions tested; with `retry`, kbisect's second pass over the
    revisions skipped as unclear (not broken) that hide the answer."""
    tested: list[tuple[str, str]] = []
    skipped: set[str] = set()
    left = search(graph, judge, graph.full, skipped, tested)
    unclear = {c for c in skipped if c not in broken and left >> graph.index[c] & 1}
    if retry is not None and unclear:
        left = search(graph, retry, left, skipped - unclear, tested)
    return [graph.commits[i] for i in graph.members(left)], tested
