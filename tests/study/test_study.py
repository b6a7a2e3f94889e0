"""kbisect study, the pure parts: axes and cells, study files, the block schedule, and
the analysis (steps with Holm's correction, bisect lines, interactions) against values
computed here independently (scipy for the t test)."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from scipy import stats as scipy_stats

from kbisect.measure.record import Sample
from kbisect.scenario import scenario
from kbisect.stats import inference, ratio
from kbisect.study import analysis, axes, bisectline, budget, fanout, kernels, schedule, spec, store

SHIPPED = ("mechanism-7dadeaa6e851", "hugepages-sweep", "kernel-series")


# Axes and cells.


def test_key_and_append_axes_expand_into_labelled_cells() -> None:
    clients = axes.parse("pgbench.clients=4,16")
    preempt = axes.parse("append=preempt=none,preempt=full")
    cells = axes.cells([clients, preempt])
    assert [c.label([clients, preempt]) for c in cells] == [
        "clients=4 preempt=none",
        "clients=4 preempt=full",
        "clients=16 preempt=none",
        "clients=16 preempt=full",
    ]
    last = cells[-1]
    assert (last.id, last.sets, last.append) == ("c3", ("pgbench.clients=16",), "preempt=full")
    assert last.values == {"pgbench.clients": "16", "append": "preempt=full"}


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("pgbench.clientz=1,2", "not a scenario key"),
        ("pgbench.clients=", "no empty value"),
        ("pgbench.clients=4,,8", "no empty value"),
        ("pgbench.clients=4,4", "a value repeats"),
        ("noequals", "expected KEY=VALUE1"),
    ],
)
def test_bad_axis_is_one_line(option: str, message: str) -> None:
    with pytest.raises(axes.AxisError, match=message) as exc:
        axes.parse(option)
    assert "\n" not in str(exc.value)


def test_a_value_the_scenario_rejects_names_its_cell() -> None:
    axis = axes.parse("pgbench.clients=4,0")
    with pytest.raises(axes.AxisError, match=r"cell c1 \(clients=0\).*must be 1 to 262142"):
        axes.scenarios(scenario.load("smoke"), [], axes.cells([axis]), [axis])


def test_needs_add_what_a_value_requires() -> None:
    level = axes.key_level("postgres.settings.huge_pages", "on", {"set": ["guest.hugepages=64"]})
    assert level.sets == ("postgres.settings.huge_pages=on", "guest.hugepages=64")
    scen = scenario.load("simple-update-2vcpu").with_overrides(list(level.sets))
    assert scen.get("guest.hugepages") == 64


# Study files.


@pytest.mark.parametrize("name", spec.names())
def test_every_shipped_study_loads_and_every_cell_validates(name: str) -> None:
    study = spec.load(name)
    cells = axes.cells(study.axes)
    scens = axes.scenarios(scenario.load(study.scenario), study.sets, cells, study.axes)
    assert len(scens) == math.prod(len(a.levels) for a in study.axes) >= 2
    assert (study.kernels.items or study.kernels.listed) and study.boots >= 2


def test_the_releases_study_names_each_release_in_its_own_tree() -> None:
    study = spec.load("releases")
    assert [(k.tree, k.label) for k in study.kernels.listed] == [
        ("debian:6.1", "6.1"),
        ("default", "6.12"),
        ("debian:7.2", "7.2"),
        ("debian:7.3", "7.3"),
    ]
    scens = axes.scenarios(
        scenario.load(study.scenario), study.sets, axes.cells(study.axes), study.axes
    )
    est = budget.estimate(4, 4, scens, study.boots)
    assert est.boots == 36 and est.hours <= study.budget_hours
    assert "about 2 min 40 s per simple-update-2vcpu boot" in " ".join(study.description.split())


def test_a_kernel_list_entry_and_the_command_line() -> None:
    data = {
        "name": "x",
        "scenario": "smoke",
        "kernels": {"tree": "~/linux", "list": [{"tree": "debian:7.2"}, {"rev": "v6.12"}]},
    }
    study = spec.from_dict(data, "x.toml")
    assert study.kernels.listed == (spec.Listed("debian:7.2"), spec.Listed(None, "v6.12"))
    given = spec.apply(study, spec.Given(tree="/src/other"))
    assert given.kernels.listed == study.kernels.listed and given.kernels.tree == "/src/other"
    replaced = spec.apply(study, spec.Given(kernels="a,b"))
    assert replaced.kernels.listed == () and replaced.kernels.items == ("a", "b")
    named = spec.apply(study, spec.Given(kernels="debian:6.1, v6.12-debian,debian:7.2"))
    assert named.kernels.items == () and named.kernels.listed == (
        spec.Listed("debian:6.1"),
        spec.Listed(None, "v6.12-debian"),
        spec.Listed("debian:7.2"),
    )


def test_tree_names_and_makefile_versions() -> None:
    assert kernels.tree_name(None) is None and kernels.tree_name("default") is None
    assert kernels.tree_name("debian:7.2") == "debian:7.2"
    assert kernels.tree_name("src/linux") == str(Path("src/linux").resolve())
    head = "# SPDX\nVERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 0\nEXTRAVERSION = -rc7\nNAME = x\n"
    assert kernels.makefile_version(head) == "7.3.0-rc7"
    assert kernels.makefile_version("VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 158\n") == "6.1.158"
    assert kernels.makefile_version("all:\n\ttrue\n") is None
    tags = [{"rev": "r", "version": v} for v in ("6.1.158", "7.3.0-rc7", "6.12.0", None)]
    assert [bisectline.release_tag(k) for k in tags] == ["v6.1", "v7.3-rc7", "v6.12", "r"]


@pytest.mark.parametrize("name", SHIPPED)
def test_each_study_has_a_runnable_2core_size_and_a_big_size(name: str) -> None:
    small, big = spec.load(name), spec.load(f"{name}-big")
    scens = axes.scenarios(
        scenario.load(small.scenario), small.sets, axes.cells(small.axes), small.axes
    )
    est = budget.estimate(len(small.kernels.items), len(small.kernels.items), scens, small.boots)
    assert est.hours <= small.budget_hours <= 3
    assert {s.get("guest.vcpus") for s in scens} == {2}
    assert scenario.load(big.scenario).get("guest.vcpus") >= 64


def test_huge_pages_on_carries_its_reservation_and_1g_its_command_line() -> None:
    study = spec.load("hugepages-sweep")
    cells = axes.cells(study.axes)
    by_label = {
        c.label(study.axes): s
        for c, s in zip(
            cells,
            axes.scenarios(scenario.load(study.scenario), study.sets, cells, study.axes),
            strict=True,
        )
    }
    two_m, one_g = by_label["pages=2M clients=16"], by_label["pages=1G clients=16"]
    assert two_m.get("guest.hugepages") == 64 and two_m.get("guest.thp") == "never"
    assert "hugepagesz=1G hugepages=1" in one_g.get("guest.append")
    assert one_g.get("postgres.settings.huge_page_size") == "1GB"
    assert by_label["pages=4k-thp clients=4"].get("guest.thp") == "always"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kernels": {"revs": ["a"]}, "scenario": "smoke"}, "name is missing"),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"revs": ["a"]}, "bogus": 1},
            "bogus is not a known field",
        ),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"revs": ["a"], "tags": ["b"]}},
            "kernels.tags is not a known field",
        ),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"revs": ["a"]}, "min_effect": math.nan},
            "min_effect must be a finite number, got nan",
        ),
        (
            {
                "name": "x",
                "scenario": "smoke",
                "kernels": {"revs": ["a"]},
                "budget_hours": math.inf,
            },
            "budget_hours must be a finite number, got inf",
        ),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"revs": ["a"]}, "boots": -1},
            "boots must be 1 to 1000, got -1",
        ),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"revs": ["a"]}, "retries": True},
            "retries must be an integer, got true",
        ),
        (
            {
                "name": "x",
                "scenario": "smoke",
                "kernels": {"revs": ["a"]},
                "axes": [{"key": "pgbench.clients", "values": [math.nan]}],
            },
            "axes.values must be finite numbers",
        ),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"revs": ["a"], "pattern": "v*"}},
            "one of them",
        ),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"revs": ["a"], "list": [{"rev": "b"}]}},
            "one of them",
        ),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"list": [{"label": "b"}]}},
            "needs a tree, a rev or both",
        ),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"list": [{"tree": "t", "tag": "b"}]}},
            "kernels.list.tag is not a known field",
        ),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"list": {"tree": "t"}}},
            "kernels.list must be a list",
        ),
        (
            {
                "name": "x",
                "scenario": "smoke",
                "kernels": {"revs": ["a"]},
                "axes": [{"key": "pgbench.clients", "values": [1], "needs": {"2": {"set": []}}}],
            },
            "needs for no value",
        ),
        (
            {"name": "x", "scenario": "smoke", "kernels": {"revs": ["a"]}, "boots": "3"},
            "boots must be an integer",
        ),
    ],
)
def test_bad_study_files(data: dict[str, Any], message: str) -> None:
    with pytest.raises(spec.StudyFileError, match=message):
        spec.from_dict(data, "x.toml")


# The schedule.


def test_every_block_boots_every_kernel_in_every_cell_once() -> None:
    slots = schedule.plan(3, [0, 2, 5], 4, seed=11)
    units = {(k, c) for k in range(3) for c in (0, 2, 5)}
    assert len(slots) == 4 * len(units)
    for block in range(4):
        got = [s.unit for s in slots if s.block == block]
        assert sorted(got) == sorted(units)
    orders = {tuple(s.unit for s in slots if s.block == b) for b in range(4)}
    assert len(orders) > 1  # shuffled, not the same order every block


def test_the_seed_decides_the_order() -> None:
    assert schedule.plan(2, [0, 1], 3, seed=5) == schedule.plan(2, [0, 1], 3, seed=5)
    assert schedule.plan(2, [0, 1], 3, seed=5) != schedule.plan(2, [0, 1], 3, seed=6)
    data = schedule.to_json(schedule.plan(2, [0, 1], 3, seed=5), 5, 3)
    assert schedule.from_json(data) == schedule.plan(2, [0, 1], 3, seed=5)


def test_pending_skips_what_is_done_and_keeps_plan_order() -> None:
    slots = schedule.plan(2, [0, 1], 3, seed=1)
    done = {(0, 0): 2, (1, 1): 3, (0, 1): 1}
    todo = schedule.pending(slots, done)
    assert Counter(s.unit for s in todo) == {(0, 0): 1, (0, 1): 2, (1, 0): 3}
    assert todo == [s for s in slots if s in todo]  # plan order
    positions = [i for i, s in enumerate(slots) if s.unit == (0, 0)]
    assert slots[positions[-1]] in todo and slots[positions[0]] not in todo


# Analysis against independent reference values.


def test_holm_matches_the_textbook_example() -> None:
    assert inference.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def definition(
    kernels: int, cell_values: list[dict[str, str]], axes_: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "name": "t",
        "scenario": {"name": "smoke", "source": "smoke", "hash": "0" * 64},
        "sets": ["guest.thp=never"],
        "append": "",
        "boots": 4,
        "min_effect": 0.02,
        "baseline": 0,
        "arch": "x86_64",
        "tree": "/src/linux",
        "configs": ["preempt-full"],
        "kernels": [
            {"label": f"v6.{k}", "rev": f"v6.{k}", "commit": f"{k:040x}"} for k in range(kernels)
        ],
        "axes": axes_,
        "cells": [
            {
                "id": f"c{i}",
                "label": " ".join(v.values()),
                "values": v,
                "set": [f"pgbench.clients={v['pgbench.clients']}"]
                if "pgbench.clients" in v
                else [],
                "append": v.get("append", ""),
            }
            for i, v in enumerate(cell_values)
        ],
    }


def sample(k: int, c: int, tps: float) -> Sample:
    return Sample.of({"label": store.label(k, c), "status": "ok", "tps": tps, "fingerprint": {}})


def test_steps_are_found_where_planted_with_the_reference_p_values() -> None:
    rng = random.Random(3)
    axis = {"name": "pgbench.clients", "levels": [{"label": "4"}, {"label": "16"}]}
    d = definition(4, [{"pgbench.clients": "4"}, {"pgbench.clients": "16"}], [axis])
    means = {0: 1000.0, 1: 1005.0, 2: 700.0, 3: 702.0}  # the step is 1 -> 2
    data = {
        (k, c): [means[k] * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(4)]
        for k in range(4)
        for c in range(2)
    }
    result = analysis.analyze(d, [sample(k, c, x) for (k, c), xs in data.items() for x in xs])
    assert result.tests == 6
    called = [(s.cell, s.a, s.b, s.kind) for s in result.significant()]
    assert called == [(0, 1, 2, "regression"), (1, 1, 2, "regression")]
    ps = []
    for s in result.steps:
        a, b = data[(s.a, s.cell)], data[(s.b, s.cell)]
        assert s.ratio == ratio.ratio_ci(a, b)
        log_a, log_b = [math.log(x) for x in a], [math.log(x) for x in b]
        ref = scipy_stats.ttest_ind(log_b, log_a, equal_var=False).pvalue
        assert s.p == pytest.approx(ref, rel=0.15)  # delta-method log-mean vs mean-of-logs
        ps.append(s.p)
    assert [s.p_holm for s in result.steps] == pytest.approx(inference.holm(ps))
    step = result.significant()[1]
    assert step.bisect == (
        "kbisect bisect --good v6.1 --bad v6.2 --scenario smoke --tree /src/linux "
        "--set guest.thp=never --set pgbench.clients=16 --config preempt-full --arch x86_64"
    )


def test_a_step_between_two_trees_names_the_release_tags_to_bisect_instead() -> None:
    axis = {"name": "pgbench.clients", "levels": [{"label": "4"}]}
    d = definition(3, [{"pgbench.clients": "4"}], [axis])
    d["kernels"][0].update(tree="/src/a", version="6.1.158")
    d["kernels"][1].update(tree="/src/a", version="6.1.160")
    d["kernels"][2].update(tree="debian:7.2", version="7.2.13")
    tps = {0: [1000, 1010, 990], 1: [700, 707, 693], 2: [400, 404, 396]}
    got = analysis.analyze(d, [sample(k, 0, x) for k, xs in tps.items() for x in xs])
    first, second = got.significant()
    assert first.bisect is not None and first.elsewhere is None
    assert "--good v6.0 --bad v6.1 --scenario smoke --tree /src/a " in first.bisect
    assert second.bisect is None
    assert second.elsewhere == (
        "kbisect bisect --good v6.1 --bad v7.2 --scenario smoke --tree /path/to/linux.git "
        "--set guest.thp=never --set pgbench.clients=4 --config preempt-full --arch x86_64"
    )
    assert got.apart(second).startswith("v6.1 (/src/a) and v6.2 (debian:7.2) are in different")
    assert store.several_trees(d) and not store.several_trees(definition(3, [], []))
    assert got.where(2) == "debian:7.2 at v6.2"


def test_an_improvement_bisects_with_lower_is_better() -> None:
    axis = {"name": "append", "levels": [{"label": "preempt=full"}]}
    d = definition(2, [{"append": "preempt=full"}], [axis])
    got = analysis.analyze(
        d, [sample(k, 0, x) for k, xs in ((0, [500, 505, 495]), (1, [800, 790, 810])) for x in xs]
    )
    (step,) = got.significant()
    assert step.kind == "improvement"
    assert step.bisect is not None and step.bisect.endswith(
        "--append preempt=full --config preempt-full --arch x86_64 --lower-is-better"
    )


def test_interaction_ratio_of_ratios() -> None:
    preempt = {"name": "append", "levels": [{"label": "none"}, {"label": "full"}]}
    pages = {"name": "pages", "levels": [{"label": "4k"}, {"label": "2M"}]}
    values = [{"append": a, "pages": p} for a in ("none", "full") for p in ("4k", "2M")]
    d = definition(1, values, [preempt, pages])
    # full costs 40% with 4 kB pages and nothing with 2 MB pages
    truth = {
        ("none", "4k"): 1000.0,
        ("none", "2M"): 1100.0,
        ("full", "4k"): 600.0,
        ("full", "2M"): 1100.0,
    }
    noise = [0.99, 1.01, 1.0]
    samples = [
        sample(0, c, truth[(v["append"], v["pages"])] * e)
        for c, v in enumerate(values)
        for e in noise
    ]
    (i,) = analysis.analyze(d, samples).interactions
    assert (i.x, i.y) == ("append", "pages")
    assert i.effect_y1 == pytest.approx(0.6) and i.effect_y2 == pytest.approx(1.0)
    assert i.ratio == pytest.approx(1.0 / 0.6) and i.low > 1
    flat = [sample(0, c, 1000.0 * e) for c in range(4) for e in noise]
    (j,) = analysis.analyze(d, flat).interactions
    assert j.ratio == pytest.approx(1.0) and j.low < 1 < j.high


# Fan-out.


def test_shares_hold_whole_cells_balanced_by_time() -> None:
    parts = fanout.partition([100, 100, 300, 100, 200], 2)
    assert sorted(c for p in parts for c in p) == [0, 1, 2, 3, 4]
    assert parts == [[1, 2], [0, 3, 4]]  # 400 s each: longest first, onto the lighter share
    assert fanout.partition([1.0], 3) == [[0], [], []]
    m = fanout.matrix("s", fanout.partition([1.0], 3), ["only"], "metal-")
    assert m == {
        "include": [
            {"share": "1/3", "runner": "metal-1", "study": "s", "cells": "c0", "labels": "only"}
        ]
    }
    assert fanout.parse_share("2/3") == (1, 3)
    for bad in ("0/3", "4/3", "x"):
        with pytest.raises(fanout.ShareError):
            fanout.parse_share(bad)
