"""A drifting host (the fake target's drift_per_call): a fixed threshold goes wrong,
drift-aware references keep the answer right, and bisect, compare and bisect/run say
what moved."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from kbisect.bisect.git import judge
from kbisect.commands import cli
from kbisect.measure.record import Sample
from kbisect.study import analysis as study_analysis
from kbisect.study import store as study_store
from tests.bisect.test_bisect import bisect_argv, history, kbisect, run_dirs
from tests.bisect.test_step import at, fake, fixed_dates, step, write_scenario
from tests.fakes import fake_image, fake_target, git

FASTER = 0.02  # the host gets 2% faster with every boot


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    fixed_dates(monkeypatch)
    monkeypatch.setenv("KBISECT_BISECT_STORE", str(tmp_path / "store"))
    return {
        "scenario": write_scenario(tmp_path),
        "results": tmp_path / "results",
        "log": fake(tmp_path, cv=0.02, noise_key="subject", drift_per_call=FASTER),
        "repo": tmp_path / "linux",
    }


def bisect(env: dict[str, Path], good: str, bad: str, *extra: str) -> dict[str, Any]:
    """One bisection on a fresh host (the drift starts again) with its own sample store."""
    state = env["log"].parent / "fake-state" / "calls.jsonl"
    state.unlink(missing_ok=True)
    os.environ["KBISECT_BISECT_STORE"] = str(env["log"].parent / f"store-{'-'.join(extra)}")
    # (the env fixture's monkeypatch restores the variable after the test)
    kbisect(*bisect_argv(env, good, bad, "--recheck-samples", "4", *extra))
    data: dict[str, Any] = json.loads((run_dirs(env["results"])[-1] / "summary.json").read_text())
    return data


def test_a_fixed_threshold_goes_wrong_and_references_repair_it(env):
    shas = history(env["repo"], 16, 5)
    fixed = bisect(env, shas[1], shas[-1], "--method", "git", "--references", "0")
    assert fixed["candidates"][0]["commit"] != shas[5]  # the drift moved the answer
    refs = bisect(env, shas[1], shas[-1], "--method", "git", "--references", "2")
    assert refs["first_bad"]["commit"] == shas[5]
    assert any(
        "drift: revisions sampled more than once got" in w and "corrected" in w
        for w in refs["verdict"]["warnings"]
    )


def test_the_posterior_with_references_stays_right_and_reports_the_drift(env):
    shas = history(env["repo"], 16, 5)
    # a reference boot after every test boot: without the re-check's pairs, which the
    # revert check replaced (its boots are not in the drift check), the revisions sampled
    # more than once are the references alone
    s = bisect(env, shas[1], shas[-1], "--references", "1")
    assert s["first_bad"]["commit"] == shas[5] and s["confirmed"]
    assert any("got" in w and "faster" in w for w in s["verdict"]["warnings"])
    run = run_dirs(env["results"])[-1]
    assert "**drift: revisions sampled more than once" in (run / "report.md").read_text()
    assert (run / "tps-time.png").read_bytes()[:4] == b"\x89PNG"


def compare(tmp_path: Path, target: Path) -> None:
    """Six boots of two kernels of the same speed into tmp_path/c."""
    a, b = fake_image(tmp_path / "a", tps=1000.0), fake_image(tmp_path / "b", tps=1000.0)
    kernels = ["--kernel-a", str(a), "--kernel-b", str(b), "--boots", "6"]
    cli.main(
        [
            "compare",
            *kernels,
            "--scenario",
            "smoke",
            "--target",
            str(target),
            "--out",
            str(tmp_path / "c"),
        ]
    )


def test_compare_warns_when_both_sides_drift(tmp_path, capsys):
    target = fake_target(tmp_path, cv=0.01, drift_per_call=0.05)
    compare(tmp_path, target)
    err = capsys.readouterr().err
    assert "drift: both sides got" in err and "faster" in err and "interleaved" in err
    report = (tmp_path / "c" / "report.md").read_text()
    assert "drift: both sides got" in report and "tps-time.png" in report
    assert (tmp_path / "c" / "tps-time.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_without_drift_says_nothing(tmp_path, capsys):
    target = fake_target(tmp_path, cv=0.01)
    compare(tmp_path, target)
    assert "drift:" not in capsys.readouterr().err


def test_bisect_run_warns_that_its_threshold_is_stale(tmp_path, monkeypatch, capsys):
    """By hand, with a fixed threshold: endpoint samples an hour old, or drifting."""
    fixed_dates(monkeypatch)
    store = tmp_path / "store"
    monkeypatch.setenv("KBISECT_BISECT_STORE", str(store))
    scen = write_scenario(tmp_path)
    fake(tmp_path, cv=0.0, drift_per_call=0.1)
    shas = history(tmp_path / "linux", 3, 3, tps=(1000, 600))
    monkeypatch.chdir(tmp_path / "linux")
    git(tmp_path / "linux", "bisect", "start", shas[-1], shas[1])
    for commit in (shas[1], shas[-1]):
        at(commit)
        step(scen, "--runs-min", "4", "--runs-max", "4", threshold="10")
    lines = judge.stale_warning(store, shas[1], shas[-1], time.time() + 7200)
    assert any("2 h old" in x or "min old" in x for x in lines)
    assert any(x.startswith("drift: the endpoints' stored samples got") for x in lines)
    at(shas[2])
    capsys.readouterr()
    step(scen, "--runs-min", "2", "--runs-max", "2", threshold="10")
    assert "drift: the endpoints' stored samples got" in capsys.readouterr().err


@pytest.mark.parametrize("per_boot", [0.02, 0.0])
def test_a_study_warns_when_its_cells_drift(per_boot):
    noise = [0.004, -0.003, 0.001, -0.002, 0.003, -0.004] * 2
    samples = [
        Sample.of(
            {
                "label": study_store.label(i % 2, 0),
                "status": "ok",
                "target": {"name": "vng"},
                "tps": (1000 + 300 * (i % 2)) * (1 + per_boot * i + noise[i]),
                "created": f"2026-01-01T00:{3 * i:02d}:00Z",
            }
        )
        for i in range(12)
    ]
    rows, lines = study_analysis.drifted(samples)
    assert len(rows) == 12 and rows[-1].t == 33 * 60
    if per_boot:
        assert len(lines) == 1 and lines[0].startswith("drift: the samples of each kernel")
        assert "faster over 33 min" in lines[0] and "not corrected" in lines[0]
    else:
        assert lines == []


@pytest.mark.parametrize("bad", [["--bogus"], ["--at", "x"], ["--at"], ["--hogs", "0"]])
def test_drift_demo_refuses_bad_arguments_with_its_usage(bad):
    script = Path(__file__).resolve().parents[2] / "scripts" / "drift-demo"
    got = subprocess.run([str(script), *bad], capture_output=True, text=True, check=False)
    assert got.returncode == 2 and got.stderr.startswith("usage: scripts/drift-demo")
    assert got.stdout == ""
