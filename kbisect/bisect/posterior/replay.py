"""A `git bisect log` for a posterior bisection, that plain git replays to the same answer.

    git bisect replay RUN_DIR/git-bisect.log     # in any clone that has the commits

The marks: the endpoints (`git bisect start BAD GOOD`); every tested revision the
posterior has decided (P(bad) at least the confidence: bad, at most 1 - confidence: good;
consistent with the answer whenever it holds the confidence); every untestable revision
as a skip; then the answer itself: its one testable member bad, every parent of the
answer's commits outside it good, its other (untestable) members skipped. git is then left
with exactly the answer's commits: "X is the first bad commit" for a culprit, "The first
bad commit could be any of" for a range. For an undecided answer (the budget ended) the
answer's marks are left out and git is left bisecting what the decided marks leave.
"""

from __future__ import annotations

from collections.abc import Callable

from kbisect.bisect.posterior.posterior import Answer, Posterior


def _mark(verdict: str, commit: str, subject: str, note: str = "") -> list[str]:
    tail = f" ({note})" if note else ""
    return [f"# {verdict}: [{commit}] {subject}{tail}", f"git bisect {verdict} {commit}"]


def answer_marks(
    post: Posterior, answer: Answer, parents: Callable[[str], list[str]]
) -> dict[str, str]:
    """commit -> good | bad | skip: the marks that leave git with the answer's commits.
    parents: a commit's parents as git has them (the graph keeps only those in range)."""
    g = post.graph
    members = {g.index[c] for c, _ in answer.candidates}
    top = next(i for i in members if all(g.anc[i] >> j & 1 for j in members))
    marks = {g.commits[top]: "bad"}
    for i in sorted(members - {top}):
        marks[g.commits[i]] = "skip"
    names = {g.commits[i] for i in members}
    for i in sorted(members):
        for p in parents(g.commits[i]):
            if p not in names:
                marks[p] = "good"
    return marks


def log(
    post: Posterior,
    answer: Answer,
    confidence: float,
    subject: Callable[[str], str],
    parents: Callable[[str], list[str]],
    order: list[str],
) -> str:
    """The log text; `order`: the revisions in the order they were first tested."""
    g = post.graph
    good, bad = g.goods[0], g.bad
    lines = [
        "# kbisect bisect --method posterior: replay with `git bisect replay FILE`",
        f"# bad: [{bad}] {subject(bad)}",
        f"# good: [{good}] {subject(good)}",
        f"git bisect start '{bad}' '{good}'",
    ]
    for commit in order:
        if commit in (good, bad) or commit not in g.index:
            continue
        if commit in post.untestable:
            lines += _mark("skip", commit, subject(commit), "failed to build or boot")
            continue
        p = post.p_bad(commit)
        if p >= confidence or p <= 1 - confidence:
            lines += _mark(
                "bad" if p >= confidence else "good", commit, subject(commit), f"P(bad) = {p:.4f}"
            )
    if answer.kind == "undecided":
        return "\n".join([*lines, "# undecided: the budget ended before an answer"]) + "\n"
    lines.append(f"# the answer, {answer.kind} at P = {answer.probability:.4f}:")
    for commit, verdict in answer_marks(post, answer, parents).items():
        lines += _mark(verdict, commit, subject(commit))
    if answer.kind == "culprit":
        c = answer.candidates[0][0]
        lines.append(f"# first bad commit: [{c}] {subject(c)}")
    else:
        lines += [f"# possible first bad commit: [{c}] {subject(c)}" for c, _ in answer.candidates]
    return "\n".join(lines) + "\n"
