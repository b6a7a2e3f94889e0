"""The one revision table (kbisect/bisect/report/table.py) in its formats."""

from __future__ import annotations

from kbisect.bisect.report import table


def _rows() -> list[dict[str, object]]:
    ok = table.row("a" * 40, "mm: a | b", "good", "endpoint", ([100.0, 102.0], []), "ends")
    failed = table.row("b" * 40, "sched: c", "skip", "step", ([], ["boot failed"]), "")
    return [{**ok, "p_bad": 0.0}, {**failed, "p_bad": 0.5}]


def test_a_row_counts_its_samples_and_their_mean() -> None:
    r = table.row("c" * 40, "s", "bad", "step", ([1.0, 3.0], ["x"]), "why")
    assert (r["n"], r["mean"], r["failures"]) == (2, 2.0, ["x"])
    assert table.row("c" * 40, "s", "skip", "step", ([], []), "")["mean"] is None


def test_the_markdown_table_of_either_method() -> None:
    git = table.markdown(_rows(), p_bad=False)
    assert git[:2] == [
        "| # | commit | subject | verdict | n | mean tps | samples | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    assert git[2] == f"| 0 | `{'a' * 12}` | mm: a / b | good | 2 | 101.0 | 100, 102 | ends |"
    # a failed boot without a skip reason: the note is the failure alone
    assert git[3] == f"| 1 | `{'b' * 12}` | sched: c | skip | 0 | - |  | boot failed |"
    posterior = table.markdown(_rows(), p_bad=True)
    assert posterior[0].startswith("| # | commit | subject | verdict | P(bad) | n |")
    assert posterior[1].count("---") == 9
    assert "| skip | 0.5000 | 0 | - |" in posterior[3]


def test_the_text_lines() -> None:
    assert table.text(_rows()) == [
        f"   0 {'a' * 12} good  n=2     101.0 tps",
        f"   1 {'b' * 12} skip  n=0         - tps",
    ]
