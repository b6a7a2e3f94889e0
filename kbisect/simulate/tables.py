"""The tables of the simulation's tallies (scripts/simulate-bisect --matrix): one row per
setting and method (table, story_table, pool_table), the reliability by stated
probability, each setting's CPU time."""

from __future__ import annotations

from collections.abc import Callable

from kbisect.bisect.state import MEASURED
from kbisect.simulate.matrix import Cell
from kbisect.simulate.tally import BINS, Tally

CHECKS = (*MEASURED, "no-revert")  # the revert check's kinds (verify.py)


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f}%)" if n else "-"


def _reliability(bins: dict[int, list[int]]) -> str:
    answers = sum(a for a, _ in bins.values())
    right = sum(r for _, r in bins.values())
    return _pct(right, answers) if answers else "-"


def _grid(
    results: dict[Cell, dict[str, Tally]],
    header: list[str],
    columns: Callable[[str, Tally], list[str]],
) -> str:
    """A markdown table: setting, method, `columns` of each tally, CPU s per bisection."""
    head = ["setting", "method", *header, "CPU s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cell, tallies in results.items():
        for m, t in tallies.items():
            row = [cell.name, m, *columns(m, t), f"{t.seconds / max(t.runs, 1):.2f}"]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def table(results: dict[Cell, dict[str, Tally]]) -> str:
    """One row per setting and method."""

    def columns(m: str, t: Tally) -> list[str]:
        a = max(t.answered, 1)
        return [
            f"{t.boots_bisect / a:.1f}",
            f"{t.boots / a:.1f}",
            f"{t.builds / a:.1f}",
            _pct(t.wrong, t.answered),
            f"{t.ranges}/{t.answered}",
            f"{t.refused}/{t.runs}",
            f"{_reliability(t.bins)} ({_reliability(t.first_bins)})",
            _pct(t.warned, t.answered) if m.endswith("+refs") else "-",
        ]

    header = "boots (bisect)|boots (all)|builds|wrong culprit|range|refused|"
    header += "right at P ≥ 0.95 (at the stop)|drift warned"
    return _grid(results, header.split("|"), columns)


def reliability(results: dict[Cell, dict[str, Tally]], method: str, first: bool = False) -> str:
    """Culprits named at a stated probability, by bin, over every setting: how many right.
    first: at the first stop (before the re-check), else the final answers."""
    lines = ["| stated P(culprit) | answers | right | fraction right |", "|---|---|---|---|"]
    for k, (low, high) in enumerate(BINS):
        counts = [
            (ts[method].first_bins if first else ts[method].bins).get(k, [0, 0])
            for ts in results.values()
            if method in ts
        ]
        n, ok = sum(c[0] for c in counts), sum(c[1] for c in counts)
        label = f"[{low:g}, {min(high, 1.0):g}{']' if high > 1 else ')'}"
        lines.append(
            f"| {label} | {n} | {ok} | {ok / n:.4f} |" if n else f"| {label} | 0 | 0 | - |"
        )
    return "\n".join(lines)


def _named(t: Tally) -> str:
    return ", ".join(f"{k} {ok}/{n}" for k, (n, ok) in sorted(t.reported.items())) or "-"


def story_table(results: dict[Cell, dict[str, Tally]]) -> str:
    """One row per setting and method: the exit-0 view of the answers (wrong, wrong and
    confirmed, no answer), the boots by phase (the search's, references included, and of
    them the story's tests, the probes and those after the first stop; the re-checks';
    all, the endpoints' included; the revert check's, and its builds), which true changes
    the answer named (with several culprits: every one named and its revert measured
    restoring the gap), how often a revert restored all of it, the revert checks by kind
    (verify.py: all, part, none, unclear, no-revert), and how often an answer
    stated at P ≥ 0.95 was right."""

    def columns(m: str, t: Tally) -> list[str]:
        a = max(t.answered, 1)
        return [
            str(t.runs),
            _pct(t.wrong_single, t.runs),
            _pct(t.wrong_confirmed, t.runs),
            f"{_pct(t.no_answer, t.runs)} ({t.refused}, {t.undecided})",
            f"{t.boots_bisect / a:.1f}",
            f"{t.boots_story / a:.1f}",
            f"{t.boots_probes / a:.1f}",
            f"{t.boots_after / a:.1f}",
            f"{t.boots_recheck / a:.1f}",
            f"{t.boots_all / max(t.runs, 1):.1f}",
            f"{t.boots_verify / a:.1f}",
            f"{t.builds_verify / a:.2f}",
            _named(t),
            _pct(t.named_verified[1], t.named_verified[0]),
            _pct(t.verified_all, t.answered),
            ", ".join(str(t.checks.get(k, 0)) for k in CHECKS),
            f"{_reliability(t.bins)} ({_reliability(t.first_bins)})",
            _reliability(t.story_bins),
        ]

    header = "runs|wrong culprit|wrong, exit 0|no answer (refused, undecided)|boots: search|"
    header += "story|probes and checks|after the first stop|re-check|all|verification|"
    header += "verification builds|changes named|culprits named and verified|revert restores all|"
    header += f"revert checks ({', '.join(CHECKS)})|"
    header += "right at P ≥ 0.95 (at the first stop)|story's changes at P ≥ 0.95 right"
    return _grid(results, header.split("|"), columns)


def cpu(results: dict[Cell, dict[str, Tally]]) -> str:
    """Each setting's CPU time (all its methods), one line each."""
    return "\n".join(
        f"{cell.name}: {sum(t.seconds for t in ts.values()):.1f} s" for cell, ts in results.items()
    )


def pool_table(results: dict[Cell, dict[str, Tally]]) -> str:
    """One row per pool setting and method: rounds (the wall clock: one boot's time each)
    and boots per answered bisection, each against one machine's at the same histories
    and machine effect (k = 1 of the same family and CV, when it is among the results),
    the wrong answers and the runs without an answer."""
    ones = {
        (c.seeds, c.machine_cv, m): t
        for c, ts in results.items()
        if c.machines == 1
        for m, t in ts.items()
    }
    head = "setting|k|machine CV|method|runs|rounds|x 1 machine|boots (all)|x 1 machine|"
    head += "wrong culprit|wrong, exit 0|no answer|CPU s"
    lines = ["| " + head.replace("|", " | ") + " |", "|" + "---|" * len(head.split("|"))]
    for cell, tallies in results.items():
        for m, t in tallies.items():
            a = max(t.answered, 1)
            one = ones.get((cell.seeds, cell.machine_cv, m))
            rounds, boots = t.rounds / a, t.boots / a

            def ratio(mine: float, field_: str, one: Tally | None = one) -> str:
                if one is None or not one.answered:
                    return "-"
                return f"{mine / (getattr(one, field_) / one.answered):.2f}x"

            row = [
                cell.family or cell.name,
                str(cell.machines),
                f"{cell.machine_cv:.0%}",
                m,
                str(t.runs),
                f"{rounds:.1f}",
                ratio(rounds, "rounds"),
                f"{boots:.1f}",
                ratio(boots, "boots"),
                _pct(t.wrong_single, t.runs),
                _pct(t.wrong_confirmed, t.runs),
                _pct(t.no_answer, t.runs),
                f"{t.seconds / max(t.runs, 1):.2f}",
            ]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
