"""A real compare whose side A had a sample disturbed by other work and kept when its
retakes ran out (tests/data/disturbed-demo, its README says how it ran). Re-rendered
today, the disturbed sample never counts, the report says so, and the outlier rule
no longer calls a boot 4% off its neighbours an outlier."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.compare import report, schedule
from kbisect.measure import results, retake
from kbisect.stats import means

DEMO = Path(__file__).resolve().parents[1] / "data" / "disturbed-demo"


def side(name: str, *, every: bool = False) -> list[float]:
    """Side `name`'s tps as the run counted them (every: the kept disturbed one too)."""
    found = results.load_samples(DEMO)
    return [
        float(s.data["tps"])
        for s in found
        if s.label == name and (retake.counts(s) or (every and s.status == "ok"))
    ]


def test_the_kept_disturbed_sample_does_not_count() -> None:
    kept = results.load_samples(DEMO)[2]  # 003-A.json: its retakes used up, then kept
    assert kept.status == "ok" and kept.disturbance["disturbed"]
    assert not retake.counts(kept) and retake.left_out(kept)
    assert side("A", every=True) == pytest.approx([264.8, 592.7, 617.3, 617.8, 616.3], abs=0.1)
    assert side("A") == side("A", every=True)[1:]


def test_an_outlier_is_a_real_one_not_a_boot_4_percent_off_a_tight_side() -> None:
    """The run's report called boot 2 (592.7 tps, 4% under 616-618) an outlier: the
    others agree to 1 tps, so the MAD alone made 4% look like 10 deviations."""
    assert means.outliers(side("A", every=True)) == [0]  # 264.8: the disturbed one, only
    assert means.outliers(side("A")) == []  # 592.7 at CV 2%: no outlier
    assert means.outliers(side("B")) == []
    assert means.outliers([*side("A"), 450.0]) == [4]  # a real outlier among the clean ones


def test_the_run_re_renders_from_its_undisturbed_samples(tmp_path: Path) -> None:
    run = Path(shutil.copytree(DEMO, tmp_path / "run"))
    assert cli.main(["report", str(run)]) == 0
    loaded = report.load(run, report.load_summary(run), None)
    v, old = loaded.verdict, json.loads((DEMO / results.SUMMARY).read_text())["verdict"]
    assert (v.a.n, v.b.n) == (4, 5)
    assert v.a.mean == pytest.approx(611.0, abs=0.5) and v.a.cv == pytest.approx(0.02, abs=0.003)
    old_width = old["ratio"]["high"] - old["ratio"]["low"]
    assert v.ratio.high - v.ratio.low < old_width / 4
    assert v.kind == old["kind"] == "improvement"
    text = (run / "report.md").read_text()
    assert "add boots" not in text and "outlier" not in text
    assert "use --boots" not in text  # 5 a side were asked for
    assert "side A: 4 of 5 boots count: 1 slot(s) left without an undisturbed sample" in text
    assert "takes them again" not in text  # 2.3x settled: retaking it would change nothing
    assert ", 4 + 5 boots;" in text
    assert "| 003-A.json | A | 264.8 |" in text
    assert "kept, not counted (a disturbed sample never counts)" in text
    boots = text.split("## Boots, in run order")[1].split("## Plots")[0]
    assert "264.8" not in boots and "| 1 | B | 1,367.2 |" in boots


def test_a_resume_would_take_the_left_slot_first() -> None:
    plan = schedule.load(DEMO)
    st = schedule.standing(plan.order, plan.retries, results.load_samples(DEMO))
    assert st.slot == len(plan.order) and st.open == {0: 0}
    assert [len(st.tps[x]) for x in "AB"] == [4, 5]
