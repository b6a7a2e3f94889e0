"""Variance components of tps (kbisect/stats/variance.py) and scripts/variance-components."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kbisect.core.exceptions import UserError
from kbisect.stats import variance

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "variance-components"


def boots(
    rng: random.Random, n: int, runs: int, sd_boot: float, sd_run: float
) -> list[list[float]]:
    out = []
    for _ in range(n):
        level = 500 + rng.gauss(0, sd_boot)
        out.append([level + rng.gauss(0, sd_run) for _ in range(runs)])
    return out


def test_components_recover_known_variances():
    c = variance.components(boots(random.Random(1), 400, 3, 40.0, 10.0))
    assert math.sqrt(c.within) == pytest.approx(10.0, rel=0.08)
    assert math.sqrt(c.between) == pytest.approx(40.0, rel=0.1)
    assert c.boots == 400 and c.runs == 1200


def test_boot_dominated_noise_wants_one_run_per_boot():
    c = variance.Components(within=100.0, between=1600.0, boots=10, runs=30, mean=500.0)
    assert c.best_runs(90.0, 30.0) == pytest.approx(math.sqrt(90 * 100 / (30 * 1600)))
    assert c.per_minute(1, 90, 30) < c.per_minute(3, 90, 30)
    runs_dominated = variance.Components(1600.0, 100.0, 10, 30, 500.0)
    assert runs_dominated.best_runs(90.0, 30.0) > 3
    assert runs_dominated.per_minute(5, 90, 30) < runs_dominated.per_minute(1, 90, 30)


def test_too_few_samples_is_a_user_error():
    with pytest.raises(UserError):
        variance.components([[1.0, 2.0]])
    with pytest.raises(UserError):
        variance.components([[1.0], [2.0]])


def test_script_reads_sample_files(tmp_path):
    rng = random.Random(2)
    samples = tmp_path / "run" / "samples"
    samples.mkdir(parents=True)
    for i, b in enumerate(boots(rng, 12, 3, 30.0, 5.0)):
        record = {
            "status": "ok",
            "scenario": {"name": "simple-update-2vcpu"},
            "runs": [{"tps": x} for x in b],
        }
        (samples / f"{i:03d}-A.json").write_text(json.dumps(record))
    (samples / "999-A.json").write_text(json.dumps({"status": "boot-failed", "runs": []}))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("12 boots, 36 runs of simple-update-2vcpu")
    assert "best runs per boot" in out
    empty = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "--scenario", "x"],
        capture_output=True,
        text=True,
    )
    assert empty.returncode == 1 and "no stored samples of x" in empty.stdout
