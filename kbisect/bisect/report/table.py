"""The revisions tested, one row each, in every format: the row summary.json keeps (either
method's: its samples, failures, verdict and why; the posterior's adds P(bad)), the
Markdown table of report.md and the lines of the mailing-list text."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def row(
    commit: str,
    subject: str,
    verdict: str,
    role: str,
    samples: tuple[list[float], list[str]],
    reason: str,
) -> dict[str, Any]:
    """A revision's row; role: endpoint or step; samples: its tps figures and the errors
    of its failed boots."""
    tps, failures = samples
    return {
        "commit": commit,
        "subject": subject,
        "verdict": verdict,
        "role": role,
        "tps": tps,
        "failures": failures,
        "n": len(tps),
        "mean": sum(tps) / len(tps) if tps else None,
        "reason": reason,
    }


def _mean(r: Mapping[str, Any]) -> str:
    return "-" if r.get("mean") is None else f"{r['mean']:.1f}"


def _note(r: Mapping[str, Any]) -> str:
    return "; ".join([r["reason"], *r["failures"]]).strip("; ")


# the Markdown table's columns: heading, cell (after the row's number)
COLUMNS: list[tuple[str, Callable[[Mapping[str, Any]], str]]] = [
    ("commit", lambda r: f"`{r['commit'][:12]}`"),
    ("subject", lambda r: r["subject"]),
    ("verdict", lambda r: r["verdict"]),
    ("n", lambda r: str(r["n"])),
    ("mean tps", _mean),
    ("samples", lambda r: ", ".join(f"{x:.0f}" for x in r["tps"])),
    ("note", _note),
]
P_BAD = ("P(bad)", lambda r: f"{r['p_bad']:.4f}")  # the posterior's, after the verdict


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown(rows: Sequence[Mapping[str, Any]], *, p_bad: bool) -> list[str]:
    """The Markdown table, in the rows' order; p_bad: with the posterior's P(bad) column."""
    columns = [*COLUMNS[:3], P_BAD, *COLUMNS[3:]] if p_bad else COLUMNS
    out = [_line(["#", *(name for name, _ in columns)]), "|---" * (1 + len(columns)) + "|"]
    for i, r in enumerate(rows):
        out.append(_line([str(i), *(cell(r).replace("|", "/") for _, cell in columns)]))
    return out


def text(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lines of the mailing-list text: number, commit, verdict, samples, mean."""
    return [
        f"  {i:>2} {r['commit'][:12]} {r['verdict']:<5} n={r['n']:<2} {_mean(r):>8} tps"
        for i, r in enumerate(rows)
    ]
