"""A revert check (`kbisect compare --base X --revert C`: side B is X with C reverted) as a
report phrases it: what reverting C does to tps, and so what C costs. summary.json
records it in its command (`--revert C`) and in side B's kernel (its subject is git's
`Revert "<C's subject>"`); side B's label is kbisect's own short form of both."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kbisect.report.text import change
from kbisect.stats import means

OPTION = "--revert"


@dataclass(frozen=True)
class Revert:
    commit: str  # as the command gave it (a hash, a tag, HEAD~1)
    subject: str | None  # the reverted commit's subject, when side B's kernel records it

    def named(self) -> str:
        """`d59fc21905a7 ("net/unix: ...")`: the commit and, when known, its subject."""
        short = self.commit[:12] if re.fullmatch(r"[0-9a-f]{13,40}", self.commit) else self.commit
        return f'{short} ("{self.subject}")' if self.subject else short


def of(summary: Mapping[str, Any]) -> Revert | None:
    """The revert a compare checked, or None for any other compare."""
    try:
        words = shlex.split(str(summary.get("command") or ""))
    except ValueError:
        return None
    commit = next(
        (
            words[i + 1] if w == OPTION else w.removeprefix(OPTION + "=")
            for i, w in enumerate(words)
            if (w == OPTION and i + 1 < len(words)) or w.startswith(OPTION + "=")
        ),
        None,
    )
    if not commit:
        return None
    b = ((summary.get("sides") or {}).get("B") or {}).get("kernel") or {}
    found = re.fullmatch(r'Revert "(.*)"', str(b.get("subject") or ""), re.DOTALL)
    return Revert(commit, found.group(1) if found else None)


def commit_cost(r: means.RatioCI) -> tuple[float, float, float]:
    """A/B and its interval: what the commit does to tps (the inverse of B/A)."""
    return 1 / r.ratio, 1 / r.high, 1 / r.low


def finding(rev: Revert, v: means.Verdict, scenario: str) -> str:
    """The report's first sentence: `reverting C ("s") restores +99.1% tps ...: the commit
    costs -49.8%`."""
    r = v.ratio
    cost = change(commit_cost(r)[0])
    if v.kind == "improvement":
        return (
            f"reverting {rev.named()} restores {change(r.ratio)} pgbench tps ({scenario}): "
            f"the commit costs {cost}."
        )
    if v.kind == "regression":
        return (
            f"reverting {rev.named()} loses {change(r.ratio)} pgbench tps ({scenario}): "
            f"the commit gains {cost}."
        )
    return (
        f"reverting {rev.named()} makes no significant change in pgbench tps ({scenario}) "
        f"({change(r.ratio)})."
    )


def cost_line(v: means.Verdict) -> str:
    """`A/B 0.502x (-49.8%), 95% CI [0.426, 0.592]: what the commit does`."""
    ratio, low, high = commit_cost(v.ratio)
    return (
        f"A/B {ratio:.3f}x ({change(ratio)}), {v.ratio.confidence * 100:g}% CI "
        f"[{low:.3f}, {high:.3f}]: the commit's own effect"
    )
