"""A compare's verdict in a maintainer's words, the one phrase the closing line of
`kbisect compare`, the report's headline, the text and the mail all use: a revert check
(`kbisect compare --base X --revert C`: side B is X with C reverted) says what reverting
C does to tps and so what C costs; a patch side (`--patch-b`, `--pg-patch-b`) what the
patch changes; any other compare B/A in plain words. Every figure is B/A's interval as
percent changes (for what C costs, its inverse A/B), no new statistics. summary.json
records a revert and a patch in its command; a revert also in side B's kernel (its
subject is git's `Revert "<C's subject>"`)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.report.text import change
from kbisect.stats import means

OPTION = "--revert"
PATCHES = {"B": ("--patch-b", "--pg-patch-b"), "A": ("--patch-a", "--pg-patch-a")}
# a revert's verb, then its commit's, by the verdict; any other verdict changes nothing
VERBS = {"improvement": ("restores", "costs"), "regression": ("costs", "gains")}
KINDS = {"regression": "a regression", "improvement": "an improvement"}
NO_CHANGE = "no significant change"


@dataclass(frozen=True)
class Revert:
    commit: str  # as the command gave it (a hash, a tag, HEAD~1)
    subject: str | None  # the reverted commit's subject, when side B's kernel records it

    @property
    def short(self) -> str:
        """The commit's first 12 hex digits, or the name the command gave it."""
        return self.commit[:12] if re.fullmatch(r"[0-9a-f]{13,40}", self.commit) else self.commit

    def named(self) -> str:
        """`d59fc21905a7 ("net/unix: ...")`: the commit and, when known, its subject."""
        return f'{self.short} ("{self.subject}")' if self.subject else self.short


def _values(summary: Mapping[str, Any], option: str) -> list[str]:
    """Every value the run's command gave `option` (`--opt V` or `--opt=V`)."""
    try:
        words = shlex.split(str(summary.get("command") or ""))
    except ValueError:
        return []
    return [
        words[i + 1] if w == option else w.removeprefix(option + "=")
        for i, w in enumerate(words)
        if (w == option and i + 1 < len(words)) or w.startswith(option + "=")
    ]


def of(summary: Mapping[str, Any]) -> Revert | None:
    """The revert a compare checked, or None for any other compare."""
    commit = next(iter(_values(summary, OPTION)), None)
    if not commit:
        return None
    b = ((summary.get("sides") or {}).get("B") or {}).get("kernel") or {}
    found = re.fullmatch(r'Revert "(.*)"', str(b.get("subject") or ""), re.DOTALL)
    return Revert(commit, found.group(1) if found else None)


def patches(summary: Mapping[str, Any]) -> list[str]:
    """The patch files side B alone was given, by name (none when side A has its own)."""
    if any(_values(summary, o) for o in PATCHES["A"]):
        return []
    return [Path(f).name for o in PATCHES["B"] for f in _values(summary, o)]


def percent(ratio: float, low: float, high: float) -> str:
    """1.991 [1.688, 2.347] -> `+99.1% [+68.8%, +134.7%]`: a ratio and its interval as
    changes."""
    return f"{change(ratio)} [{change(low)}, {change(high)}]"


def ratio(r: means.RatioCI) -> str:
    """`B/A = 0.512x [0.471, 0.556]`."""
    return f"B/A = {r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}]"


def said(
    summary: Mapping[str, Any], v: means.Verdict, *, full: bool = False, ba: bool = True
) -> str:
    """The verdict in a maintainer's words (`full`: a reverted commit with its subject):
    `reverting C restores +99.1% [+68.8%, +134.7%]: C costs -49.8% [-57.4%, -40.8%]`,
    `the patch P changes tps by +1.8% [-15.3%, +22.3%]: no significant change`, else
    `a regression (B/A = 0.512x [0.471, 0.556])` (`ba` False: without its B/A)."""
    r = v.ratio
    b_a = percent(r.ratio, r.low, r.high)
    if rev := of(summary):
        name = rev.named() if full else rev.short
        if v.kind not in VERBS:
            return f"reverting {name} makes {NO_CHANGE}: {b_a}"
        undo, commit = VERBS[v.kind]
        a_b = percent(1 / r.ratio, 1 / r.high, 1 / r.low)
        return f"reverting {name} {undo} {b_a}: {rev.short} {commit} {a_b}"
    kind = KINDS.get(v.kind, NO_CHANGE)
    if files := patches(summary):
        sides = summary.get("sides") or {}
        append = (sides.get("B") or {}).get("append") or ""
        also = f" with {append}" if append != ((sides.get("A") or {}).get("append") or "") else ""
        what = f"the patch {files[0]}" if len(files) == 1 else f"the patches {', '.join(files)}"
        return f"{what}{also} {'change' if len(files) > 1 else 'changes'} tps by {b_a}: {kind}"
    return f"{kind} ({ratio(r)})" if ba else kind
