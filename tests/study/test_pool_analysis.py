"""A study's analysis over a pool (study/analysis.py with stats/blocked.py): the ratios
to the baseline, the steps and the interactions are within machines, so a slower machine
that took more of one kernel's boots is not a kernel effect; one machine's study is
analysed as before; the report shows each machine's figures."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kbisect.commands import cli
from kbisect.measure import results
from kbisect.measure.record import Sample
from kbisect.report.text import WIDTH
from kbisect.stats import blocked, ratio
from kbisect.study import analysis, figures, store
from tests.fakes import fake_image, fake_pool
from tests.study.test_study import definition


def sample(k: int, c: int, tps: float, machine: str | None) -> Sample:
    target = {"name": "lab", "pool": "lab", "machine": machine} if machine else {"name": "vng"}
    return Sample.of(
        {
            "label": store.label(k, c),
            "status": "ok",
            "tps": tps,
            "fingerprint": {},
            "target": target,
        }
    )


def clients(n: int) -> dict[str, Any]:
    return definition(n, [{"pgbench.clients": "4"}], [])


# Over a pool of fake machines, end to end.


def test_a_slower_machine_with_more_of_one_kernels_boots_is_no_kernel_effect(
    isolated_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two kernels of equal tps; machine m2 is 10% slower. The fan-out gives each machine
    3 boots per kernel and cell; then m2 loses two of k0's boots and m1 two of k1's (as
    failed boots would): k1 has more boots on the slow machine. The pooled ratio calls
    that a 5% regression; the estimate within machines says 1."""
    pool = fake_pool(
        tmp_path / "pool",
        {"m1": {"seed": 1, "cv": 0.005}, "m2": {"seed": 2, "cv": 0.005, "scale": 0.9}},
    )
    kernels = ",".join(str(fake_image(tmp_path / f"k{i}", 1000.0).parent) for i in range(2))
    argv = ["study", "--kernels", kernels, "--scenario", "smoke", "--axis"]
    argv += ["pgbench.clients=2,4", "--target", str(pool), "--boots", "6", "--seed", "3"]
    assert cli.main(argv) == 0
    (run,) = [p for p in (tmp_path / "results").glob("*-study-*") if p.is_dir()]
    paths = {p: json.loads(p.read_text()) for p in results.sample_paths(run)}
    assert {(s["target"]["machine"], s["label"]) for s in paths.values()} == {
        (m, store.label(k, c)) for m in ("m1", "m2") for k in range(2) for c in range(2)
    }  # every machine measured every kernel of every cell
    for (k, gone), c in itertools.product(((0, "m2"), (1, "m1")), range(2)):
        drop = [p for p, s in paths.items() if s["label"] == store.label(k, c)]
        for p in [p for p in drop if paths[p]["target"]["machine"] == gone][:2]:
            p.unlink()
    capsys.readouterr()
    assert cli.main(["report", str(run)]) == 0
    a = analysis.analyze(store.load_definition(run), store.samples(run))
    assert a.machines == ("m1", "m2") or a.machines == ("m2", "m1")
    for c in range(2):
        pooled = ratio.ratio_ci(a.points[(0, c)].tps, a.points[(1, c)].tps)
        assert pooled.ratio < 0.96  # the slow machine leaks into the pooled ratio
        within = a.vs_baseline[(1, c)]
        assert within.method == blocked.METHOD
        assert within.ratio == pytest.approx(1.0, abs=0.01) and within.low < 1 < within.high
    assert not a.significant()
    text = (run / "report.txt").read_text()
    assert max(map(len, text.splitlines())) <= WIDTH
    flat = " ".join(text.split())
    assert "the ratios and steps are within machines" in flat
    assert "boots per machine: m" in flat and "c0 k1: m" in flat
    md = (run / "report.md").read_text()
    assert "## Per machine" in md and "fixed effect (residual df)" in md
    row = next(line for line in md.splitlines() if line.startswith("| boots |"))
    assert sorted(row.split("|")[3:5]) == [" 8 ", " 8 "]  # 12 each, 2 a cell gone
    summary = results.load_summary(run)
    on = {m["machine"]: m for m in summary["stats"]["machines"]}
    assert set(on) == {"m1", "m2"} and on["m1"]["boots"] == 8
    for m in on.values():  # each machine alone: no kernel effect either
        assert all(r["ratio"] == pytest.approx(1.0, abs=0.02) for r in m["ratios"])


# One machine: as before.


def test_one_machine_is_the_welch_analysis_unchanged() -> None:
    d = definition(2, [{"pgbench.clients": "4"}, {"pgbench.clients": "16"}], [])
    tps = {(0, 0): [1000, 1010, 990], (1, 0): [950, 955, 948], (0, 1): [500, 505, 499]}
    tps[(1, 1)] = [520, 515, 518]
    for machine in (None, "box1"):  # a plain target, or a pool whose one machine took all
        a = analysis.analyze(
            d, [sample(k, c, x, machine) for (k, c), xs in tps.items() for x in xs]
        )
        assert a.machines == () and not analysis.per_machine(a)
        for c in range(2):
            assert a.vs_baseline[(1, c)] == ratio.ratio_ci(tps[(0, c)], tps[(1, c)])
        assert all(s.ratio.method == ratio.METHOD for s in a.steps)


def test_kernels_no_machine_measured_both_are_left_out_with_a_warning() -> None:
    samples = [sample(0, 0, x, "m1") for x in (1000, 1010, 990)]
    samples += [sample(1, 0, x, "m2") for x in (900, 905, 899)]
    a = analysis.analyze(clients(2), samples)
    assert a.vs_baseline == {} and a.steps == [] and a.tests == 0
    assert any("no machine measured both sides" in w for w in a.warnings)


# The machine's level never enters a kernel's or an axis's effect.

tps_lists = st.lists(st.floats(500.0, 2000.0), min_size=2, max_size=4)


@settings(max_examples=40, deadline=None)
@given(
    data=st.lists(st.tuples(tps_lists, tps_lists), min_size=2, max_size=3),
    factor=st.floats(0.5, 2.0),
)
def test_the_cell_estimate_ignores_a_constant_on_one_machines_tps(
    data: list[tuple[list[float], list[float]]], factor: float
) -> None:
    """Kernels 0 and 1 in one cell, each machine with its own boots of each; one
    machine's tps times a constant changes neither the ratio nor its interval nor p."""

    def analyzed(scale: float) -> analysis.Analysis:
        samples = [
            sample(k, 0, x * (scale if j == 0 else 1.0), f"m{j}")
            for j, sides in enumerate(data)
            for k, xs in enumerate(sides)
            for x in xs
        ]
        return analysis.analyze(clients(2), samples)

    plain, scaled = analyzed(1.0), analyzed(factor)
    r, q = plain.vs_baseline[(1, 0)], scaled.vs_baseline[(1, 0)]
    assume(r.high - r.low > 1e-6)  # boots all alike: no spread, p is rounding
    assert r.method == q.method == blocked.METHOD
    assert q.ratio == pytest.approx(r.ratio, rel=1e-9)
    assert (q.low, q.high) == pytest.approx((r.low, r.high), rel=1e-9)
    assert scaled.steps[0].p == pytest.approx(plain.steps[0].p, rel=1e-6, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(factor=st.floats(0.5, 2.0), effect=st.floats(0.6, 1.4), seed=st.integers(0, 2**16))
def test_the_interaction_ignores_a_machine_and_finds_a_planted_one(
    factor: float, effect: float, seed: int
) -> None:
    """A 2x2 on two machines, m1 slower by `factor` and with one boot fewer per cell:
    the ratio of ratios is the planted `effect` (no noise), whatever the factor."""
    preempt = {"name": "append", "levels": [{"label": "none"}, {"label": "full"}]}
    pages = {"name": "pages", "levels": [{"label": "4k"}, {"label": "2M"}]}
    values = [{"append": a, "pages": p} for a in ("none", "full") for p in ("4k", "2M")]
    d = definition(1, values, [preempt, pages])
    truth = [1000.0, 1100.0, 600.0, 660.0 * effect]  # c3: full and 2M
    wobble = [1.0 + 0.001 * ((seed >> i) % 3 - 1) for i in range(3)]
    samples = [
        sample(0, c, truth[c] * w * (factor if m == "m1" else 1.0), m)
        for c in range(4)
        for m, ws in (("m0", wobble), ("m1", wobble[:2]))
        for w in ws
    ]
    (i,) = analysis.analyze(d, samples).interactions
    plain = [s for s in samples if s.machine == "m0"]
    (j,) = analysis.analyze(d, plain).interactions  # one machine: the Welch figures
    assert i.ratio == pytest.approx(effect, rel=1e-6) and j.ratio == pytest.approx(effect)
    assert i.effect_y1 == pytest.approx(0.6, rel=1e-6)
    assert math.isfinite(i.low) and i.low <= i.ratio <= i.high


# The figures: each machine its own line over a pool, as before on one machine.


def test_a_pool_studys_figures_draw_each_machine_apart(tmp_path: Path) -> None:
    """m2 10% slower: study-tps.png and study-clients.png have a line per cell (or
    kernel) and machine, each machine in the legend by its marker; m2's line is m2's
    own means. One machine: a line per cell and the cells' legend, as before."""
    axis = {"name": "pgbench.clients", "levels": [{"label": "4"}, {"label": "16"}]}
    d = definition(2, [{"pgbench.clients": "4"}, {"pgbench.clients": "16"}], [axis])
    level = {"m1": 1.0, "m2": 0.9}
    samples = [
        sample(k, c, 1000.0 * (c + 1) * level[m] * (1 + 0.01 * j), m)
        for k in range(2)
        for c in range(2)
        for m in ("m1", "m2")
        for j in range(3)
    ]
    a = analysis.analyze(d, samples)
    series = figures.kernel_series(a)
    assert [(s.cell, s.machine) for s in series] == [(0, "m1"), (0, "m2"), (1, "m1"), (1, "m2")]
    m2 = next(s for s in series if (s.cell, s.machine) == (1, "m2"))
    assert m2.xs == (0, 1) and m2.ys == pytest.approx((1800.0 * 1.01,) * 2)
    legend = [t.get_text() for t in figures.tps_figure(a).axes[0].get_legend().get_texts()]
    assert legend == ["4", "16", "m1", "m2"]
    lines = figures.clients_series(a)
    assert set(lines) == {"m1", "m2"}
    assert [c for c, _ in lines["m2"]["v6.0"]] == [4.0, 16.0]
    assert [y for _, y in lines["m2"]["v6.0"]] == pytest.approx([900.0 * 1.01, 1800.0 * 1.01])
    legend = [t.get_text() for t in figures.clients_figure(a).axes[0].get_legend().get_texts()]
    assert legend == ["v6.0", "v6.1", "m1", "m2"]
    drawn = figures.draw(a, tmp_path)
    assert drawn[0] == "![tps per kernel, one line per cell and machine](study-tps.png)"
    assert all((tmp_path / f).stat().st_size > 0 for f in (figures.TPS, figures.CLIENTS))

    one = analysis.analyze(d, [s for s in samples if s.machine == "m1"])
    assert [(s.cell, s.machine) for s in figures.kernel_series(one)] == [(0, None), (1, None)]
    legend = [t.get_text() for t in figures.tps_figure(one).axes[0].get_legend().get_texts()]
    assert legend == ["4", "16"]
    assert list(figures.clients_series(one)) == [None]
