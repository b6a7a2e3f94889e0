"""One boot = one sample (kbisect/measure/sample.py), on the fake target: the record, console
watching, deadlines and failure classes, the same for every target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kbisect.core.exceptions import BenchmarkError, BootError, UserError
from kbisect.measure import results, sample
from kbisect.measure.record import Sample
from kbisect.scenario import scenario
from kbisect.targets import registry
from kbisect.targets.base import Kernel
from tests.fakes import fake_calls, fake_image, fake_target

SHORT = ["timeouts.boot_s=1", "timeouts.idle_s=1", "timeouts.total_s=20"]


def smoke(*overrides: str) -> scenario.Scenario:
    return scenario.load("smoke").with_overrides(list(overrides))


def stored(out: Path) -> list[Sample]:
    return results.load_samples(out)  # validates each against the schema


def take(tmp_path: Path, scen: scenario.Scenario, **settings: Any) -> Sample:
    target = registry.get(str(fake_target(tmp_path, **settings)))
    kernel = Kernel(fake_image(tmp_path / "k"), {"commit": "a" * 40, "config_hash": "b" * 64})
    return sample.take(target, sample.Boot(kernel, scen, tmp_path / "run", "preempt=full", "A"))


def test_a_sample_is_valid_and_its_tps_is_the_mean_of_measured_runs(tmp_path: Path) -> None:
    s = take(tmp_path, smoke("pgbench.runs=3"), cv=0.0)
    results.validate(s.data, "sample")
    assert [x.tps for x in stored(tmp_path / "run")] == [s.tps]
    warm = [r["tps"] for r in s.data["runs"] if r["warmup"]]
    measured = [r["tps"] for r in s.data["runs"] if not r["warmup"]]
    assert len(warm) == 1 and len(measured) == 3
    assert s.tps == pytest.approx(sum(measured) / 3) == pytest.approx(1000.0)
    assert s.tps != pytest.approx(sum(warm + measured) / 4)  # the warm-up is left out
    assert (s.status, s.data["error"], s.label, s.data["version"]) == ("ok", None, "A", 2)
    assert s.target == {"kind": "fake", "name": "fake", "arch": "x86_64", "accel": None}
    assert s.data["append"] == "preempt=full"
    assert s.data["kernel"]["release"] == "6.12.0-fake"
    assert s.data["kernel"]["commit"] == "a" * 40 and s.data["kernel"]["config_hash"] == "b" * 64
    assert s.data["scenario"]["hash"] == smoke("pgbench.runs=3").hash
    assert s.data["timings"]["bench_s"] == 1.0 and s.data["timings"]["total_s"] > 0
    assert set(s.data["timings"]) >= set(sample.TIMINGS)


def test_the_boot_dir_holds_the_scenario_and_a_reproducible_console_log(tmp_path: Path) -> None:
    s = take(tmp_path, smoke("guest.append=quiet"))
    boot_dir = Path(str(s.boot_dir))
    assert boot_dir.parent == tmp_path / "run" / "boots"
    assert json.loads((boot_dir / "scenario.json").read_text()) == smoke("guest.append=quiet").data
    log = (boot_dir / "console.log").read_text()
    assert log.startswith("# reproduce: ") and "kbisect-guest: phase init" in log
    [call] = fake_calls(tmp_path / "fake.toml")
    assert call["append"] == ["quiet", "preempt=full"]  # the scenario's extras come first


@pytest.mark.parametrize(
    ("mode", "overrides", "error", "status", "message"),
    [
        ("panic", [], BootError, "boot-failed", "kernel panic or oops: .*Kernel panic"),
        ("noharness", [], BootError, "boot-failed", "never reached the harness"),
        ("hang", SHORT, BootError, "boot-failed", "printed nothing for 1s"),
        (
            "spin",
            ["timeouts.boot_s=1", "timeouts.idle_s=30"],
            BootError,
            "boot-failed",
            "did not reach the harness within 1s",
        ),
        ("pgfail", [], BenchmarkError, "benchmark-failed", "initdb failed"),
    ],
)
def test_failures_raise_and_store_a_failed_sample(
    tmp_path: Path,
    mode: str,
    overrides: list[str],
    error: type[Exception],
    status: str,
    message: str,
) -> None:
    with pytest.raises(error, match=message) as info:
        take(tmp_path, smoke(*overrides), mode=mode)
    assert "console.log" in str(info.value)
    [s] = stored(tmp_path / "run")
    assert (s.status, s.tps, s.label) == (status, None, "A")
    assert s.error == str(info.value)


def test_a_kernel_of_another_arch_is_refused_before_booting(tmp_path: Path) -> None:
    target = registry.get(str(fake_target(tmp_path)))
    kernel = Kernel(fake_image(tmp_path / "k"), {"arch": "arm64"})
    with pytest.raises(UserError, match="built for arm64, but target fake runs x86_64"):
        sample.take(target, sample.Boot(kernel, smoke(), tmp_path / "run"))
    assert fake_calls(tmp_path / "fake.toml") == [] and not (tmp_path / "run").exists()


def test_a_half_written_result_is_a_boot_failure_not_a_crash(tmp_path: Path) -> None:
    boot = tmp_path / "boot"
    boot.mkdir()
    (boot / "guest-result.json").write_text('{"status": "o')
    assert sample._guest_result(boot / "guest-result.json") == {}


def test_old_samples_are_read_in_todays_shape(tmp_path: Path) -> None:
    s = take(tmp_path, smoke(), cv=0.0)
    old = {k: v for k, v in s.data.items() if k != "target"}
    old.update(version=1, accel="tcg")
    path = tmp_path / "old"
    results.write_sample(path, Sample(old))
    [read] = results.load_samples(path)
    assert read.target == {"kind": "vng", "name": "vng", "arch": None, "accel": "tcg"}
    with pytest.raises(results.InvalidResult, match="target: is missing"):
        results.validate({**old, "version": 2}, "sample")
