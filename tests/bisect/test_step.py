"""bisect-step and bisect/run: git's exit codes, the sample store, the fake measurement.

Real git, real make on the fake tree (tests/fakelinux); only the boot is replaced, by the
fake target (kbisect/targets/fake.py), which reads the scripted tps from the image.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kbisect.bisect import samples as bisect_samples
from kbisect.bisect.git import judge as bisect_judge
from kbisect.bisect.git import liveness
from kbisect.bisect.git import step as bisect_step
from kbisect.commands import bisect_step as step_command
from kbisect.core import paths, progress
from kbisect.core.exceptions import BootError
from kbisect.measure import results, sample
from kbisect.measure.record import Sample
from kbisect.scenario import scenario
from kbisect.stats import sequential
from kbisect.targets import registry
from kbisect.targets.base import Kernel
from tests.fakes import fake_calls, fake_target, git, make_fake_kernel_repo

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "bisect" / "run"

SCENARIO = """\
name = "fakebench"
description = "a scenario for tests: the fake measurement never runs it"
[postgres]
major = 15
[postgres.settings]
shared_buffers = "128MB"
huge_pages = "off"
max_connections = 20
[pgbench]
builtin = "select-only"
scale = 1
clients = 2
threads = 1
duration_s = 5
runs = 1
protocol = "prepared"
[guest]
vcpus = 1
memory_mb = 512
pgdata_size_mb = 128
"""


def write_scenario(folder: Path) -> Path:
    path = folder / "fakebench.toml"
    path.write_text(SCENARIO)
    return path


def fake(folder: Path, **settings: Any) -> Path:
    """The fake target these tests boot (kbisect/targets/fake.py): the tps figure of the
    fake image, with 2% noise unless said; its TOML sits next to the scenario."""
    return fake_target(folder, **{"cv": 0.02, **settings})


def fixed_dates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same commit ids on every run, so that the seeded noise is the same too."""
    for var in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
        monkeypatch.setenv(var, "2025-01-01T00:00:00+0000")


def calls(target: Path) -> list[tuple[str, int]]:
    """(commit, how many boots of that commit came before) for every boot, in order."""
    return [(c["commit"], c["nth"]) for c in fake_calls(target)]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    fixed_dates(monkeypatch)
    monkeypatch.setenv("KBISECT_BISECT_STORE", str(tmp_path / "store"))
    return {
        "scenario": write_scenario(tmp_path),
        "log": fake(tmp_path),
        "store": tmp_path / "store",
    }


@pytest.fixture
def repo(tmp_path: Path, env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """fake linux, fast (1000), slow (600), broken; cwd is the repo."""
    shas = make_fake_kernel_repo(
        tmp_path / "linux",
        [
            {"subject": "fast", "tps": 1000},
            {"subject": "slow", "tps": 600},
            {"subject": "broken", "broken": True},
        ],
    )
    monkeypatch.chdir(tmp_path / "linux")
    git(tmp_path / "linux", "bisect", "start")  # bisect/run refuses to run outside one
    return shas


def step(scenario: Path, *extra: str, threshold: str = "800") -> int:
    """One step on the fake target whose TOML is next to the scenario."""
    target = scenario.parent / "fake.toml"
    return step_command.entry(
        ["--scenario", str(scenario), "--threshold", threshold, "--target", str(target), *extra]
    )


def at(rev: str) -> None:
    git(Path.cwd(), "checkout", "-q", "--detach", rev)


def test_logs_name_the_command_that_reproduces_a_step(repo, env):
    at(repo[1])
    assert step(env["scenario"]) == bisect_step.GOOD
    [log] = list(paths.cache_dir().glob(f"builds/*/*/{repo[1]}/build.log"))
    first = log.read_text().splitlines()[0]
    assert first.startswith("# reproduce: kbisect bisect-step --scenario "), first
    assert progress.reproduce_line(["x"]) == "kbisect x"  # restored for what runs next


def test_good_and_bad(repo, env):
    at(repo[1])
    assert step(env["scenario"]) == bisect_step.GOOD
    at(repo[2])
    assert step(env["scenario"]) == bisect_step.BAD
    assert [c for c, _ in calls(env["log"])] == [repo[1]] * 3 + [repo[2]] * 3
    record = json.loads((env["store"] / repo[2] / "step.json").read_text())
    assert record["verdict"] == "bad" and record["skip"] is None and record["n"] == 3


def test_lower_is_better_flips_the_verdict(repo, env):
    at(repo[1])
    assert step(env["scenario"], "--lower-is-better") == bisect_step.BAD


def test_build_failure_is_a_skip_not_bad(repo, env):
    at(repo[3])
    assert step(env["scenario"]) == bisect_step.SKIP
    record = json.loads((env["store"] / repo[3] / "step.json").read_text())
    assert record["verdict"] == "skip" and record["skip"] == "build"
    assert record["reason"].startswith("build failed")
    assert calls(env["log"]) == []


def test_boot_failure_is_a_skip_and_is_not_retried(repo, env, monkeypatch):
    fake(env["scenario"].parent, boot_fail=[repo[2]])
    at(repo[2])
    assert step(env["scenario"]) == bisect_step.SKIP  # the boot failed, and its one retry
    assert step(env["scenario"]) == bisect_step.SKIP  # the stored failure is not retried
    assert calls(env["log"]) == [(repo[2], 0), (repo[2], 1)]
    tps, failures = bisect_samples.stored(env["store"] / repo[2])
    assert tps == [] and "boot" in failures[0]


def test_a_step_interrupted_before_its_retry_owes_it(repo, env):
    # The fault suite's case: a boot failed (stored), then the driver was killed before
    # the one retry. The next step must give that retry, not skip the commit.
    fake(env["scenario"].parent, boot_fail=[repo[2]])
    at(repo[2])
    assert step(env["scenario"]) == bisect_step.SKIP
    samples_dir = env["store"] / repo[2] / results.SAMPLES
    _, second = sorted(samples_dir.glob("[0-9]*-*.json"))
    second.unlink()  # as if killed after the failed boot was stored, before its retry
    fake(env["scenario"].parent)  # the one-off failure is gone
    assert step(env["scenario"]) == bisect_step.BAD  # "slow": 600 tps against 800
    tps, failures = bisect_samples.stored(env["store"] / repo[2])
    assert len(failures) == 1 and len(tps) >= 3
    assert bisect_samples.retry_owed(env["store"] / repo[2], [], failures)


def test_unclear_after_runs_max_is_a_skip(repo, env, monkeypatch):
    fake(env["scenario"].parent, cv=0)  # every sample exactly on the threshold
    at(repo[1])
    assert step(env["scenario"], "--runs-max", "6", threshold="1000") == bisect_step.SKIP
    assert len(calls(env["log"])) == 6
    record = json.loads((env["store"] / repo[1] / "step.json").read_text())
    assert record["verdict"] == "skip" and record["skip"] == "unclear"
    assert "contains threshold 1000.0 after 6" in record["reason"]


def test_a_missing_target_aborts(repo, env, tmp_path):
    at(repo[1])
    assert step(env["scenario"], "--target", str(tmp_path / "no-such.toml")) == bisect_step.ABORT
    assert calls(env["log"]) == []


def test_bad_setup_aborts(repo, env, tmp_path, monkeypatch, capsys):
    at(repo[1])
    assert step(tmp_path / "missing.toml") == bisect_step.ABORT
    assert step_command.entry(["--scenario", str(env["scenario"])]) == bisect_step.ABORT
    assert "--threshold" in capsys.readouterr().err
    assert step(env["scenario"], "--runs-min", "1") == bisect_step.ABORT
    monkeypatch.chdir(tmp_path)
    assert step(env["scenario"]) == bisect_step.ABORT
    assert calls(env["log"]) == []


def test_a_bug_aborts_rather_than_blames(repo, env, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(bisect_step, "judge", boom)
    at(repo[2])
    assert step(env["scenario"]) == bisect_step.ABORT


def test_outside_a_bisect_bisect_run_aborts_without_measuring(repo, env, capsys):
    git(Path.cwd(), "bisect", "reset")
    at(repo[1])
    assert step(env["scenario"]) == bisect_step.ABORT
    assert "no `git bisect` in progress" in capsys.readouterr().err
    assert calls(env["log"]) == []


@pytest.mark.parametrize(
    "extra",
    [("--threshold", "inf"), ("--threshold", "nan"), ("--runs-max", "-1"), ("--runs-min", "1")],
)
def test_bad_numbers_abort_without_measuring(repo, env, extra):
    at(repo[1])
    argv = ["--scenario", str(env["scenario"]), "--threshold", "800", "--target", str(env["log"])]
    assert step_command.entry([*argv, *extra]) == bisect_step.ABORT
    assert calls(env["log"]) == []


def test_dead_driver_aborts(repo, env, monkeypatch):
    proc = subprocess.Popen(["true"])  # a pid that has exited
    proc.wait()
    monkeypatch.setenv(liveness.DRIVER_ENV, str(proc.pid))
    at(repo[1])
    assert step(env["scenario"]) == bisect_step.ABORT


def test_revisit_reuses_samples_and_only_adds(repo, env):
    at(repo[1])
    assert step(env["scenario"]) == bisect_step.GOOD
    assert step(env["scenario"]) == bisect_step.GOOD
    assert calls(env["log"]) == [(repo[1], i) for i in range(3)]
    # A threshold inside the stored samples' interval needs more: the stored three count.
    stored = [float(s.data["tps"]) for s in results.load_samples(env["store"] / repo[1])]
    threshold = f"{min(stored):.1f}"
    assert step(env["scenario"], threshold=threshold) in (bisect_step.GOOD, bisect_step.SKIP)
    indices = [i for _, i in calls(env["log"])]
    assert indices[:3] == [0, 1, 2] and indices[3:] == list(range(3, len(indices)))
    assert len(indices) > 3


def test_sample_until_stops_at_the_first_clear_verdict():
    draws = iter([1000.0, 1002.0, 998.0, 1001.0, 999.0])
    tps: list[float] = []
    policy = bisect_judge.Policy(800.0, True, 3, 10)
    d = bisect_judge.sample_until(tps, lambda: next(draws), policy)
    assert d.verdict == "good" and d.n == 3 and tps == [1000.0, 1002.0, 998.0]


def test_sample_until_gives_up_at_runs_max():
    values = iter([900.0, 1100.0] * 10)
    tps: list[float] = []
    d = bisect_judge.sample_until(
        tps, lambda: next(values), bisect_judge.Policy(1000.0, True, 3, 6)
    )
    assert d.verdict == "unclear" and len(tps) == 6
    assert bisect_step.EXIT_FOR[d.verdict] == bisect_step.SKIP


def test_describe_logs_the_numbers():
    d = sequential.Decision("bad", "mean 600.0 tps, CI [590.0, 610.0] ...: bad", 600, 590, 610, 3)
    assert bisect_step.describe("a" * 40, d) == (
        "step: aaaaaaaaaaaa bad: mean 600.0 tps, CI [590.0, 610.0] ...: bad"
    )


def test_bisect_run_script_under_git(repo, env):
    """The shell script, run by `git bisect run`: finds the slow commit; usage error: 128."""
    top = Path.cwd()
    git(top, "checkout", "-q", repo[2])
    git(top, "bisect", "start", repo[2], repo[1])
    result = subprocess.run(
        [
            "git",
            "bisect",
            "run",
            str(RUN),
            "--scenario",
            str(env["scenario"]),
            "--threshold",
            "800",
            "--target",
            str(env["log"]),
        ],
        cwd=top,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{repo[2]} is the first bad commit" in result.stdout
    git(top, "bisect", "reset")
    bad_usage = subprocess.run(
        [str(RUN), "--threshold", "nope"], cwd=top, check=False, capture_output=True, text=True
    )
    assert bad_usage.returncode == 128
    assert "bisect-step:" in bad_usage.stderr


class FlakyBoots:
    """Stands in for sample.take: its boots fail `fails` times, then give 900 tps."""

    def __init__(self, fails: int) -> None:
        self.fails = fails
        self.calls = 0

    def __call__(self, *args: object, **kwargs: object) -> Sample:
        self.calls += 1
        if self.calls <= self.fails:
            raise BootError("Oops: int3")
        return Sample.of({"tps": 900.0})


def _revision(tmp_path: Path) -> tuple[bisect_samples.Context, bisect_samples.Revision]:
    ctx = bisect_samples.Context(scenario.load("smoke"), "", registry.get("fake"))
    kernel = Kernel(tmp_path / "img")
    return ctx, bisect_samples.Revision("c0ffee", kernel, tmp_path / "out")


def test_a_one_off_boot_failure_is_retried_once(tmp_path, monkeypatch):
    ctx, rev = _revision(tmp_path)
    flaky = FlakyBoots(fails=1)
    monkeypatch.setattr(sample, "take", flaky)
    assert bisect_samples.draw(ctx, rev) == 900.0
    assert flaky.calls == 2


def test_a_boot_that_fails_twice_is_a_boot_failure(tmp_path, monkeypatch):
    ctx, rev = _revision(tmp_path)
    flaky = FlakyBoots(fails=2)
    monkeypatch.setattr(sample, "take", flaky)
    with pytest.raises(BootError):
        bisect_samples.draw(ctx, rev)
    assert flaky.calls == 2
