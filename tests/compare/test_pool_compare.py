"""`kbisect compare --target pool.toml` end to end on fake machines: the machine as the
block, the kernel effect within machines, per-machine figures, a failing machine
quarantined, and --resume of a pool's run."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.compare import report, schedule
from kbisect.compare import summary as summaries
from kbisect.core.exceptions import EXIT_OK
from kbisect.measure import results
from tests.fakes import ab_compare_argv, fake_image, fake_pool

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))


def argv(pool: Path, image: Path, out: Path, boots: int, *extra: str) -> list[str]:
    """The fake compare of tests/fakes.py (x=1 against x=2) over `pool`."""
    return ab_compare_argv(image, pool, "--boots", str(boots), "--out", str(out), *extra)


def test_the_order_deals_abba_blocks_to_every_machine() -> None:
    sides, where = schedule.order(6, machines=["m1", "m2", "m3"])
    for m in ("m1", "m2", "m3"):
        mine = [s for s, w in zip(sides, where, strict=True) if w == m]
        assert mine in (["A", "B", "B", "A"], ["B", "A", "A", "B"])
    assert where[:6] == ["m1", "m1", "m2", "m2", "m3", "m3"]  # all machines at once
    sides, where = schedule.order(5, "random", 3, ["m1", "m2"])
    assert Counter(sides) == {"A": 5, "B": 5} and Counter(where) == {"m1": 6, "m2": 4}


def test_a_compare_over_three_machines_one_faster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No kernel effect; m3 is 10% faster. The verdict is no difference, within
    machines; each sample names its machine; the report shows each machine."""
    pool = fake_pool(
        tmp_path,
        {
            "m1": {"seed": 1, "cv": 0.01},
            "m2": {"seed": 2, "cv": 0.01},
            "m3": {"seed": 3, "cv": 0.01, "scale": 1.10},
        },
    )
    out = tmp_path / "out"
    assert cli.main(argv(pool, fake_image(tmp_path / "k"), out, 6)) == EXIT_OK
    printed = capsys.readouterr().out
    assert "no significant change (B/A = " in printed
    rows = [line.split() for line in printed.splitlines() if line[:2] in ("A ", "B ")]
    assert sorted(r[0] + r[-7] for r in rows) == [x + m for x in "AB" for m in ("m1", "m2", "m3")]
    assert "95% CI, log tps with a machine fixed effect: B/A within machines)" in printed
    plan = schedule.load(out)
    assert Counter(plan.machines or []) == {"m1": 4, "m2": 4, "m3": 4}
    stored = results.load_samples(out)
    took = Counter((s.target["machine"], s.label) for s in stored)
    assert took == {(m, x): 2 for m in ("m1", "m2", "m3") for x in "AB"}
    summary = results.load_summary(out)
    assert summary["verdict"]["ratio"]["method"] == "log-machine-blocked"
    assert summary["target"]["kind"] == "pool"
    mean = {
        m: [float(s.data["tps"]) for s in stored if s.target["machine"] == m] for m in ("m1", "m3")
    }
    assert sum(mean["m3"]) / 4 > 1.08 * sum(mean["m1"]) / 4  # the machine effect is there
    assert cli.main(["report", str(out), "--format", "text"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "log-machine-blocked" in text and "per machine" in text
    assert all(f"    {m}: A " in text for m in ("m1", "m2", "m3"))
    assert "## Machines" in (out / "report.md").read_text()


def test_a_machine_that_keeps_failing_is_quarantined_and_its_slots_move(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = fake_pool(tmp_path, {"ok": {"seed": 1}, "bad": {"seed": 2, "mode": "panic"}})
    out = tmp_path / "out"
    code = cli.main(argv(pool, fake_image(tmp_path / "k"), out, 6, "--retries", "0"))
    assert code == EXIT_OK
    assert "machine bad quarantined" in capsys.readouterr().err
    stored = results.load_samples(out)
    good = [s for s in stored if s.status == "ok"]
    assert {s.target["machine"] for s in good} == {"ok"}
    assert all(s.status == "boot-failed" for s in stored if s.target["machine"] == "bad")
    # the slot that took it out was taken again on the other machine: more boots counted
    # than the good machine's own 6 slots
    assert len(good) > 6
    summary = results.load_summary(out)
    assert summary["verdict"]["ratio"]["method"] == "delta-log-welch"  # one machine counted


def test_a_pool_compare_resumes_by_slot(tmp_path: Path) -> None:
    pool = fake_pool(tmp_path, {"m1": {"seed": 1}, "m2": {"seed": 2, "scale": 1.05}})
    out = tmp_path / "out"
    assert cli.main(argv(pool, fake_image(tmp_path / "k"), out, 4)) == EXIT_OK
    before = results.sample_paths(out)
    # as if interrupted: the last two samples, the summary and the report never written
    dropped = {json.loads(p.read_text())["slot"] for p in before[-2:]}
    for p in [*before[-2:], out / "summary.json", out / "report.md"]:
        p.unlink()
    st = schedule.standing(schedule.load(out).order, 2, results.load_samples(out))
    assert set(st.todo) == dropped and st.slot == min(dropped)
    assert cli.main(["compare", "--resume", str(out)]) == EXIT_OK
    stored = results.load_samples(out)
    assert sorted(s.data["slot"] for s in stored) == list(range(8))
    assert results.load_summary(out)["resumed"] == 1


POOL_TABLE = """\
side label                         machine          n      mean    median     CV       min       max
A    head                          fake1            2    1000.8    1000.8   1.6%     989.7    1011.8
A    head                          vng1             2     146.3     146.3   9.1%     136.9     155.8
B    revert                        fake1            2     999.4     999.4   1.9%     985.9    1013.0
B    revert                        vng1             2     288.9     288.9  29.7%     228.2     349.7
no significant change (B/A = 1.390x [0.878, 2.199], 95% CI, log tps with a machine fixed \
effect: B/A within machines)
"""
ONE_TABLE = """\
side label                                          n      mean    median     CV       min       max
A    base v6.12-debian-16-g497e2bae621e             5     508.6     502.4   6.1%     471.8     547.5
B    revert d59fc21905a7 (net/unix: [kbisect demo   5    1012.3    1017.8  13.5%     833.1    1158.4
reverting d59fc21905a7 restores +99.1% [+68.8%, +134.7%]: d59fc21905a7 costs -49.8% \
[-57.4%, -40.8%] (B/A = 1.991x [1.688, 2.347], 95% CI, delta method on the log ratio, \
Welch df)
"""


@pytest.mark.parametrize(("example", "table"), [("pool-fake-vng", POOL_TABLE), ("demo", ONE_TABLE)])
def test_the_printed_table_has_a_row_per_side_and_machine_over_a_pool(
    example: str, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table `kbisect compare` prints at its end, for the stored examples: over the
    pool a row per side and machine (vng1's side B: CV 29.7% within the machine, where
    the two machines mixed would show 86%); on one machine the table as it always was."""
    run_dir = EXAMPLES / example
    run = report.load(run_dir, report.load_summary(run_dir), None)
    summaries.print_table(run.summary, run.verdict, run.samples)
    got = capsys.readouterr()
    assert got.out == table
    assert ("side B on vng1: CV 29.7%" in got.err) == (example == "pool-fake-vng")
