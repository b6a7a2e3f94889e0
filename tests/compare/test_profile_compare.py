"""A compare with the scenario's [profile] on, through the fake target whose guest runs
the harness's profile code with a fake perf (tests/fakeperf/perf): the first boot of
each side is profiled, its profile is in the sample and never in tps, and the report
(again with `kbisect report`) has the difference table and a flame graph per side."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core.exceptions import EXIT_BOOT, EXIT_OK
from kbisect.measure import results
from tests.compare.test_compare import compare_argv
from tests.fakes import fake_image, fake_target

FAKE_PERF = Path(__file__).resolve().parent.parent / "fakeperf" / "perf"
PROFILED = ["--set", "profile.enabled=true"]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))


def test_profiled_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake_target(tmp_path, perf=str(FAKE_PERF), cv=0.002)
    out = tmp_path / "cmp"
    assert cli.main(compare_argv(fake_image(tmp_path / "k"), out, *PROFILED)) == EXIT_OK
    samples = results.load_samples(out)  # validated against the schema
    with_profile = [s for s in samples if "profile" in s.data]
    assert sorted(str(s.label) for s in with_profile) == ["A", "B"]  # boots_per_side = 1
    first = {s.label: s for s in reversed(samples)}  # each side's first boot
    assert all("profile" in first[x].data for x in "AB")
    for s in with_profile:
        assert s.tps == s.runs[-1]["tps"]  # the profiled run is not among the runs
        assert s.profile["run"]["tps"] > 0
        assert (Path(str(s.boot_dir)) / "profile.folded").is_file()
    tops = {s.label: s.profile["top"][0]["symbol"] for s in with_profile}
    assert tops == {"A": "pv_native_safe_halt", "B": "s_lock"}  # the real capture: idle
    report = (out / "report.md").read_text()
    assert "## Profiles" in report
    assert "| symbol | A % | B % | B − A (points) |" in report
    assert "![flame graph of B](profile-B.svg)" in report
    (out / "report.md").unlink()
    (out / "profile-A.svg").unlink()
    assert cli.main(["report", str(out)]) == EXIT_OK  # rendered again from the samples
    assert "## Profiles" in (out / "report.md").read_text()
    assert (out / "profile-A.svg").is_file()
    capsys.readouterr()
    assert cli.main(["report", str(out), "--format", "text"]) == EXIT_OK
    assert "profile (self %" in capsys.readouterr().out


def test_more_boots_per_side(tmp_path: Path) -> None:
    fake_target(tmp_path, perf=str(FAKE_PERF), cv=0.002)
    out = tmp_path / "cmp"
    argv = compare_argv(fake_image(tmp_path / "k"), out, *PROFILED)
    assert cli.main([*argv, "--set", "profile.boots_per_side=2"]) == EXIT_OK
    labels = [str(s.label) for s in results.load_samples(out) if "profile" in s.data]
    assert sorted(labels) == ["A", "A", "B", "B"]


def test_unprofiled_compare_has_no_profile(tmp_path: Path) -> None:
    fake_target(tmp_path, perf=str(FAKE_PERF), cv=0.002)
    out = tmp_path / "cmp"
    assert cli.main(compare_argv(fake_image(tmp_path / "k"), out)) == EXIT_OK
    assert not any("profile" in s.data for s in results.load_samples(out))
    assert "## Profiles" not in (out / "report.md").read_text()


def test_no_perf_on_the_machine_fails_the_boot(tmp_path: Path) -> None:
    fake_target(tmp_path, cv=0.002)  # no perf
    out = tmp_path / "cmp"
    argv = compare_argv(fake_image(tmp_path / "k"), out, *PROFILED, "--retries", "0")
    assert cli.main(argv) == EXIT_BOOT  # too few boots count
    failed = [s for s in results.load_samples(out) if s.status == "benchmark-failed"]
    assert failed and "profile.enabled needs perf" in str(failed[0].error)
