"""A compare's verdict in a maintainer's words (compare/revert.py `said`): a revert check as
what reverting restores and what the commit costs, a patch side as what the patch
changes, any other compare as B/A in plain words; and a compare's warnings ask for boots
only where more boots could change the verdict (stats/ratio.py `settles`)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbisect.commands import cli
from kbisect.compare import report as compare_report
from kbisect.compare import revert, sequential
from kbisect.stats import means, ratio

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
A = [100.0, 104.0, 96.0, 101.0, 99.0]
REVERT = "kbisect compare --base v6.12 --revert 4f6eca68a8e3936e9603d75558b77d9218ce85e6"
PATCHED = "kbisect compare --base v6.12 --patch-b /p/0001-fix.patch --append-b preempt=none"
SIDES = {"A": {"append": ""}, "B": {"append": "preempt=none"}}


def verdict(b: list[float]) -> means.Verdict:
    return sequential.verdict(A, b, min_effect=0.02, confidence=0.95, planned=5, most=None)


def percents(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"[-+]\d+\.\d(?=%)", text)]


@given(st.floats(0.3, 3.0), st.floats(0.01, 0.3))
def test_a_revert_reads_as_what_it_restores_and_what_the_commit_costs(
    scale: float, spread: float
) -> None:
    """The figures are B/A's interval as changes and, for the commit, A/B's (1/high,
    1/low): the same interval, no other statistics."""
    v = verdict([x * scale * (1 + spread * (i - 2) / 4) for i, x in enumerate(A)])
    r, words = v.ratio, revert.said({"command": REVERT}, v)
    if v.kind == "improvement":
        assert words.startswith("reverting 4f6eca68a8e3 restores +")
        assert ": 4f6eca68a8e3 costs -" in words
    elif v.kind == "regression":
        assert words.startswith("reverting 4f6eca68a8e3 costs -")
        assert ": 4f6eca68a8e3 gains +" in words
    else:
        assert words.startswith("reverting 4f6eca68a8e3 makes no significant change: ")
        assert len(percents(words)) == 3
    want = [r.ratio, r.low, r.high, 1 / r.ratio, 1 / r.high, 1 / r.low]
    for got, x in zip(percents(words), want, strict=False):
        assert got == pytest.approx((x - 1) * 100, abs=0.051)


def test_a_patch_side_reads_as_what_the_patch_changes() -> None:
    v = verdict([x * 0.8 for x in A])
    summary = {"command": PATCHED, "sides": SIDES}
    assert revert.said(summary, v).startswith(
        "the patch 0001-fix.patch with preempt=none changes tps by -20.0% ["
    )
    assert revert.said(summary, v).endswith("]: a regression")
    # a patch on each side is no patch side: B/A in plain words
    both = {"command": PATCHED.replace("--base", "--patch-a /p/x.patch --base"), "sides": SIDES}
    assert revert.said(both, v).startswith("a regression (B/A = 0.800x [")


def test_any_other_compare_says_b_over_a_in_plain_words() -> None:
    same = verdict([x + 0.5 for x in A])
    assert revert.said({"command": "kbisect compare"}, same).startswith(
        "no significant change (B/A = 1.005x ["
    )
    assert revert.said({}, verdict([x * 1.5 for x in A])).startswith("an improvement (B/A = ")


def test_a_settled_verdict_asks_for_no_boots_and_keeps_the_outlier() -> None:
    """CV 15% on side B and 3 boots a side: a 3x verdict settles the question, so neither
    "add boots" nor "use --boots"; an outlier is still named. The same noise with no
    effect leaves it open: both warnings stay, and a bisection's verdict keeps asking."""
    a, noisy = [100.0, 101.0, 99.0], [1.0, 1.15, 0.85]
    settled = sequential.verdict(
        a, [300 * x for x in noisy], min_effect=0.02, confidence=0.95, planned=3, most=None
    )
    assert settled.kind == "improvement" and ratio.settles(settled.ratio, 0.02)
    assert not [w for w in settled.warnings if "boots" in w]
    open_ = sequential.verdict(
        a, [100 * x for x in noisy], min_effect=0.02, confidence=0.95, planned=3, most=10
    )
    assert ratio.settles(open_.ratio, 0.02) is None
    asks = [w for w in open_.warnings if "boots" in w]
    assert len(asks) == 1 and "add boots (--max-boots " in asks[0]
    assert not any("use --max-boots" in w for w in open_.warnings)  # 10 a side planned
    bisect = ratio.verdict(a, [300 * x for x in noisy], planned=3)
    assert any("add boots" in w for w in bisect.warnings)
    outlier = sequential.verdict(
        [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 130.0],
        [300.0] * 6 + [301.0],
        min_effect=0.02,
        confidence=0.95,
        planned=7,
        most=None,
    )
    assert [w for w in outlier.warnings if "is an outlier" in w]


def test_the_demo_reads_as_a_maintainer_writes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kbisect report` of the heavy demo (3 + 3 boots, settled at the first look): the
    headline and the line it prints say what the revert restores and what the commit
    costs, and no warning asks for boots."""
    run = Path(shutil.copytree(EXAMPLES / "demo-heavy", tmp_path / "run"))
    (run / "report.md").unlink()
    assert cli.main(["report", str(run)]) == 0
    words = (
        "reverting 4f6eca68a8e3 restores +177.6% [+90.0%, +305.4%]: 4f6eca68a8e3 costs "
        "-64.0% [-75.3%, -47.4%]"
    )
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].startswith(f"{words} (B/A = 2.776x [1.900, 4.054], 99.375% CI, ")
    text = (run / "report.md").read_text()
    assert text.startswith(f"# simple-update-2vcpu: {words}\n")
    assert "add boots" not in text and "use --" not in text


def test_slots_left_disturbed_are_worth_taking_again_only_while_the_verdict_is_open() -> None:
    run = Path("/r/run")
    settled = verdict([x * 2 for x in A])
    assert compare_report.again(settled, 0.02, run) == ""
    open_ = verdict([x * 1.01 for x in A])
    assert compare_report.again(open_, 0.02, run) == (
        ": `kbisect compare --resume /r/run` takes them again"
    )
