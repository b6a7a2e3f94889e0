"""scripts/simulate-sequential: the sequential compare's table, without and with a noise
prior (a few trials: the figures are docs/benchmarks-history.md's, at 10,000 a row)."""

from __future__ import annotations

import subprocess
import sys

from tests import scripts

SCRIPT = scripts.SCRIPTS / "simulate-sequential"


def _rows(*argv: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--trials", "20", "--cvs", "0.1", *argv],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [line for line in out if line.startswith("|")]


def test_without_a_prior_the_first_look_is_at_3_against_the_fixed_rule() -> None:
    rows = _rows()
    assert "settled at 3 a side" in rows[0] and rows[0].endswith("difference called |")
    assert len(rows) == 2 + 5
    halving = rows[-1].split("|")
    assert halving[2].strip() == "50%" and float(halving[7]) >= 3.0  # boots a side


def test_with_a_prior_the_first_look_is_at_2_and_the_guard_is_counted() -> None:
    rows = _rows("--prior-scale", "1")
    assert "settled at 2 a side" in rows[0] and rows[0].endswith("prior dropped |")
    halving = rows[-1].split("|")
    assert halving[2].strip() == "50%" and 2.0 <= float(halving[7]) < 3.0
    assert abs(float(halving[8]) - 2 * float(halving[7])) < 0.02  # boots in all
