"""Disturbed samples (kbisect/measure/retake.py, kbisect/report/disturbed.py): the fake
target scripts how much of the host other work used per boot (its `disturb` setting; a hog
also slows the guest by that share), so compare, bisect and study retake exactly those
samples once the host is quiet, keep them on disk, never count them (unless
--count-disturbed), list them in the report, and resume without retaking twice, taking a
slot left disturbed again first."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from kbisect.bisect import samples as bisect_samples
from kbisect.commands import cli
from kbisect.compare import schedule
from kbisect.core import arch
from kbisect.core.exceptions import BenchmarkError
from kbisect.doctor import doctor
from kbisect.measure import results, retake
from kbisect.scenario import scenario
from kbisect.study import report as study_report
from kbisect.targets.base import Kernel
from kbisect.targets.fake.target import FakeTarget
from tests.bisect.test_bisect import args as bisect_args
from tests.bisect.test_bisect import env as env
from tests.bisect.test_bisect import (
    history,
    kbisect,
    run_dirs,
)
from tests.doctor.test_doctor import FakeHost
from tests.fakes import ab_compare_argv, fake_calls, fake_image, fake_target, start_driver
from tests.study.test_cli import fake_target as study_target
from tests.study.test_cli import run_dir as study_run
from tests.study.test_cli import study_args

TPS = {"x=1": 1000, "x=2": 800}
HOG = 0.6  # of the host: well above the default share (0.25)


def compare(image: Path, target: Path, out: Path, *extra: str) -> int:
    return cli.main(ab_compare_argv(image, target, "--out", str(out), *extra))


def hog_target(folder: Path, name: str, disturb: list[float], **more: Any) -> Path:
    """noise_nth "stored": a boot draws the noise of the good samples before it, so a
    retaken slot gets what the quiet run's same slot got."""
    return fake_target(
        folder, name, append_tps=TPS, cv=0.02, noise_nth="stored", disturb=disturb, **more
    )


def statuses(out: Path) -> list[str]:
    return [s.status for s in results.load_samples(out)]


def counted_tps(out: Path) -> dict[str, list[float]]:
    got: dict[str, list[float]] = {"A": [], "B": []}
    for s in results.load_samples(out):
        if s.status == "ok":
            got[str(s.label)].append(s.data["tps"])
    return got


def quiet_run(tmp_path: Path, image: Path) -> Path:
    out = tmp_path / "quiet"
    assert compare(image, hog_target(tmp_path, "quiet", []), out) == 1
    assert statuses(out) == ["ok"] * 6
    return out


def test_the_second_sample_disturbed_is_retaken_and_the_verdict_is_the_quiet_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = fake_image(tmp_path / "k")
    quiet = quiet_run(tmp_path, image)
    target, out = hog_target(tmp_path, "hog", [0.0, HOG]), tmp_path / "hog"
    assert compare(image, target, out) == 1
    assert "retake 1 of 2" in capsys.readouterr().err
    samples = results.load_samples(out)
    assert statuses(out) == ["ok", "disturbed", *["ok"] * 5]  # exactly the 2nd, kept
    assert [s.label for s in samples if s.status == "ok"] == schedule.order(3)[0]
    kept = samples[1]
    assert kept.disturbance["disturbed"] and kept.disturbance["others_peak"] == HOG
    assert kept.tps == pytest.approx(samples[2].data["tps"] * (1 - HOG), rel=0.1)  # slowed
    assert len(fake_calls(target)) == 7
    assert counted_tps(out) == counted_tps(quiet)
    assert results.load_summary(out)["verdict"] == results.load_summary(quiet)["verdict"]
    report = (out / "report.md").read_text()
    section = report.split("## Disturbed samples")[1].split("## Boots")[0]
    assert "| B |" in section and "60%" in section and "retaken (kept on disk" in section
    assert "None: no sample" in (quiet / "report.md").read_text()


def test_retakes_0_leaves_the_slot_out_and_the_verdict_says_n_per_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = fake_image(tmp_path / "k")
    target, out = hog_target(tmp_path, "hog", [0.0, HOG], host_busy=0.8), tmp_path / "hog"
    compare(image, target, out, "--retakes", "0")
    err = capsys.readouterr().err
    assert err.count("host busy: 80% of CPU used by other processes") == 1  # at the start
    assert "not counted, and no retakes left" in err
    assert "side B: 2 of 3 boots count: 1 slot(s) left disturbed" in err
    samples = results.load_samples(out)
    assert statuses(out) == ["ok", "disturbed", *["ok"] * 4]
    assert samples[1].disturbance["last_try"] and samples[1].slot == 1
    assert json.loads((out / schedule.PLAN).read_text())["retakes"] == 0
    verdict = results.load_summary(out)["verdict"]
    assert (verdict["a"]["n"], verdict["b"]["n"]) == (3, 2)  # the disturbed one left out
    report = (out / "report.md").read_text()
    assert ", 3 + 2 boots;" in report and "side B: 2 of 3 boots count" in report
    assert "not counted, no retakes left (kept on disk)" in report


def test_count_disturbed_keeps_the_old_behaviour(tmp_path: Path) -> None:
    image = fake_image(tmp_path / "k")
    target, out = hog_target(tmp_path, "hog", [0.0, HOG]), tmp_path / "hog"
    compare(image, target, out, "--retakes", "0", "--count-disturbed")
    samples = results.load_samples(out)
    assert statuses(out) == ["ok"] * 6 and samples[1].disturbance["counted"]
    assert [retake.counts(s) for s in samples] == [True] * 6
    assert "kept and counted, flagged (--count-disturbed)" in (out / "report.md").read_text()
    assert json.loads((out / schedule.PLAN).read_text())["count_disturbed"] is True
    assert results.load_summary(out)["verdict"]["b"]["n"] == 3


def test_a_machine_is_judged_by_its_steal_time_not_by_the_host_driving_it(
    tmp_path: Path,
) -> None:
    """runs_here false: the fake plays a machine target. A hog on the driving host (call
    3) is recorded and not judged; steal time inside the machine (call 2) is retaken."""
    image = fake_image(tmp_path / "k")
    target = hog_target(
        tmp_path, "machine", [0.0, 0.0, HOG], steal=[0.0, 0.5], runs_here=False, busy_polls=9
    )
    out = tmp_path / "machine"
    compare(image, target, out)  # busy_polls: a machine's retake waits for no host poll
    samples = results.load_samples(out)
    assert statuses(out) == ["ok", "disturbed", *["ok"] * 5]
    robbed, hogged = samples[1].disturbance, samples[2].disturbance
    assert robbed["judged_on"] == "machine" and robbed["inside"]["steal_share"] == 0.5
    assert robbed["disturbed"] and not robbed["host_disturbed"]
    assert hogged["host_disturbed"] and not hogged["disturbed"]
    assert retake.counts(samples[2])  # the driving host's hog does not disturb a machine
    section = (out / "report.md").read_text().split("## Disturbed samples")[1]
    assert "50% stolen inside; retaken (kept on disk" in section


def test_a_retake_waits_for_a_quiet_host_and_stops_at_the_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = fake_image(tmp_path / "k")
    target = hog_target(tmp_path, "hog", [0.0, HOG, HOG, HOG], busy_polls=2)
    out = tmp_path / "hog"
    compare(image, target, out, "--retakes", "2")
    err = capsys.readouterr().err
    assert err.count("waiting for it to be quiet before the next sample") == 1  # 2 polls, 1 line
    assert statuses(out) == ["ok", "disturbed", "disturbed", "disturbed", *["ok"] * 4]
    samples = results.load_samples(out)
    assert [s.slot for s in samples] == [0, 1, 1, 1, 2, 3, 4, 5]
    assert [bool(s.disturbance.get("last_try")) for s in samples[1:4]] == [False, False, True]
    assert not any(retake.counts(s) for s in samples[1:4])  # the third try does not count
    assert results.load_summary(out)["verdict"]["b"]["n"] == 2
    lenient, out2 = hog_target(tmp_path, "lenient", [0.0, HOG]), tmp_path / "lenient"
    compare(image, lenient, out2, "--disturbed-share", "0.7")
    assert statuses(out2) == ["ok"] * 6
    assert not any(s.disturbance["disturbed"] for s in results.load_samples(out2))


def resume_argv(image: Path, target: Path, out: Path, retakes: str) -> list[str]:
    return ab_compare_argv(image, target, "--out", str(out), "--retakes", retakes)


def test_a_kill_between_a_disturbed_sample_and_its_retake_resumes_within_the_bound(
    tmp_path: Path,
) -> None:
    image, out, pid_file = fake_image(tmp_path / "k"), tmp_path / "hog", tmp_path / "pid"
    disturb = [0.0, HOG, 0.0, HOG]  # call 3 is killed; the resumed retake (call 4) is hit
    target = hog_target(tmp_path, "hog", disturb, kill_at=3, kill_pid_file=str(pid_file))
    argv = resume_argv(image, target, out, "1")
    assert start_driver(argv, pid_file).wait(timeout=120) == -signal.SIGKILL
    assert statuses(out) == ["ok", "disturbed"]
    hog_target(tmp_path, "hog", disturb)
    cli.main(["compare", "--resume", str(out)])
    assert (out / "report.md").is_file()
    # the slot's one retake was used before the kill: the disturbed retake is its last try
    assert statuses(out) == ["ok", "disturbed", "disturbed", *["ok"] * 4]
    assert results.load_samples(out)[2].disturbance["last_try"]
    assert len(fake_calls(target)) == 8  # 2 + the killed one + its last try + 4
    assert results.load_summary(out)["verdict"]["b"]["n"] == 2  # never the disturbed one


def test_a_hog_mid_compare_then_a_resume_on_a_quiet_host_retakes_the_slot_first(
    tmp_path: Path,
) -> None:
    """The real run this reproduces (tests/data/disturbed-demo): a hog during side B's
    first slot outlasts its retakes, the run is killed later and resumed on a quiet host.
    The resume takes the slot left disturbed first, and the verdict is the quiet run's,
    from undisturbed samples only."""
    image = fake_image(tmp_path / "k")
    quiet = quiet_run(tmp_path, image)
    out, pid_file = tmp_path / "hog", tmp_path / "pid"
    target = hog_target(tmp_path, "hog", [0.0, HOG, HOG], kill_at=5, kill_pid_file=str(pid_file))
    argv = resume_argv(image, target, out, "1")
    assert start_driver(argv, pid_file).wait(timeout=120) == -signal.SIGKILL
    assert statuses(out) == ["ok", "disturbed", "disturbed", "ok"]  # slot 1 left, slot 2 done
    st = schedule.standing(schedule.order(3)[0], 1, results.load_samples(out))
    assert (st.slot, st.open) == (3, {1: 0})
    hog_target(tmp_path, "hog", [])  # a quiet host
    assert cli.main(["compare", "--resume", str(out)]) == 1
    samples = results.load_samples(out)
    assert [s.slot for s in samples] == [0, 1, 1, 2, 1, 3, 4, 5]  # slot 1 first
    assert statuses(out)[4:] == ["ok"] * 4
    assert {k: sorted(v) for k, v in counted_tps(out).items()} == {
        k: sorted(v) for k, v in counted_tps(quiet).items()
    }
    summary = results.load_summary(out)
    assert (summary["verdict"]["a"]["n"], summary["verdict"]["b"]["n"]) == (3, 3)
    assert summary["verdict"]["ratio"] == pytest.approx(
        results.load_summary(quiet)["verdict"]["ratio"]
    )
    assert "boots count" not in (out / "report.md").read_text()


def test_a_finished_compare_with_a_slot_left_disturbed_resumes_it(tmp_path: Path) -> None:
    image = fake_image(tmp_path / "k")
    target, out = hog_target(tmp_path, "hog", [0.0, HOG]), tmp_path / "hog"
    compare(image, target, out, "--retakes", "0")
    assert results.load_summary(out)["verdict"]["b"]["n"] == 2
    assert cli.main(["compare", "--resume", str(out)]) == 1  # the quiet retake of slot 1
    assert statuses(out) == ["ok", "disturbed", *["ok"] * 5]
    assert results.load_samples(out)[-1].slot == 1
    assert results.load_summary(out)["verdict"]["b"]["n"] == 3
    assert cli.main(["compare", "--resume", str(out)]) == 2  # nothing left: finished


def test_bisect_draw_retakes_and_counts_stored_retakes(tmp_path: Path) -> None:
    state = tmp_path / "state"
    fake = FakeTarget("fake", arch.get("x86_64"), {"disturb": [HOG, HOG], "state": str(state)})
    ctx = bisect_samples.Context(scenario.load("smoke"), "", fake, retake.Policy(2))
    image = Kernel.find(fake_image(tmp_path / "k", 900))
    rev = bisect_samples.Revision("c0ffee", image, tmp_path / "rev")
    tps = bisect_samples.draw(ctx, rev)
    stored = results.load_samples(rev.out)
    assert [s.status for s in stored] == ["disturbed", "disturbed", "ok"]
    assert bisect_samples.stored(rev.out) == ([tps], [])  # retaken: neither tps nor failure
    assert retake.trailing(stored) == 0 and retake.trailing(stored[:2]) == 2


def test_a_bisect_draw_whose_retakes_run_out_fails_and_counts_nothing(tmp_path: Path) -> None:
    fake = FakeTarget(
        "fake", arch.get("x86_64"), {"disturb": [HOG] * 4, "state": str(tmp_path / "s")}
    )
    ctx = bisect_samples.Context(scenario.load("smoke"), "", fake, retake.Policy(1))
    image = Kernel.find(fake_image(tmp_path / "k", 900))
    rev = bisect_samples.Revision("c0ffee", image, tmp_path / "rev")
    with pytest.raises(BenchmarkError, match="2 samples in a row disturbed"):
        bisect_samples.draw(ctx, rev)
    stored = results.load_samples(rev.out)
    assert [s.status for s in stored] == ["disturbed", "disturbed"]
    assert bisect_samples.stored(rev.out) == ([], [])  # no figure, and no failed boot
    assert retake.trailing(stored) == 0  # the next draw starts with its retakes unused
    counting = bisect_samples.Context(ctx.scen, "", fake, retake.Policy(1, count=True))
    tps = bisect_samples.draw(counting, rev)
    assert bisect_samples.stored(rev.out) == ([tps], [])
    assert results.load_samples(rev.out)[-1].disturbance["counted"]


@pytest.mark.parametrize("method", ["git", "posterior"])
def test_bisect_retakes_a_disturbed_boot_and_lists_it(env, capsys, method):
    shas = history(env["repo"], 8, 5)
    target = fake_target(env["scenario"].parent, cv=0.05, disturb=[0.0, HOG])
    assert kbisect(*bisect_args(env, shas[1], shas[-1], method=method)) == 0
    assert f"first bad commit: {shas[5]}" in capsys.readouterr().out
    (run,) = run_dirs(env["results"])
    s = results.load_summary(run)
    assert [r["outcome"] for r in s["disturbed"]] == ["retaken (kept on disk, not counted)"]
    store = Path(json.loads((run / "state.json").read_text())["store"])
    found = [x for c in store.iterdir() for x in results.load_samples(c)]
    assert sum(x.status == "disturbed" for x in found) == 1
    assert fake_calls(target)[1]["index"] == 1
    assert "## Disturbed samples" in (run / "report.md").read_text()


def test_a_study_retakes_a_disturbed_boot(
    isolated_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernels = ",".join(
        str(fake_image(tmp_path / f"k{i}", t).parent) for i, t in enumerate((1000, 650))
    )
    study_target(isolated_env, disturb=[0.0, 0.0, HOG])
    assert cli.main(study_args(kernels)) == 0
    run = study_run(tmp_path / "results")
    got = [s.status for s in results.load_samples(run)]
    assert got.count("disturbed") == 1 and got.index("disturbed") == 2
    assert got.count("ok") == 12  # 2 kernels x 2 cells x 3 boots, none short
    report = (run / "report.md").read_text()
    assert "## Disturbed samples" in report and "retaken" in report
    analysis = study_report.load(run)
    assert all(p.failed == 0 and p.n == 3 for p in analysis.points.values())  # not a failure
    assert analysis.disturbed is not None and len(analysis.disturbed) == 1


def test_a_study_slot_left_disturbed_is_missing_until_a_resume_takes_it(
    isolated_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernels = ",".join(
        str(fake_image(tmp_path / f"k{i}", t).parent) for i, t in enumerate((1000, 650))
    )
    target = study_target(isolated_env, disturb=[0.0, 0.0, HOG, HOG])
    assert cli.main(study_args(kernels, "--retakes", "1")) == 5  # one slot left disturbed
    assert "still missing after retries (failed boots) or retakes" in capsys.readouterr().err
    run = study_run(tmp_path / "results")
    assert [s.status for s in results.load_samples(run)].count("ok") == 11
    analysis = study_report.load(run)
    assert sorted(p.n for p in analysis.points.values()) == [2, 3, 3, 3]  # 2: never the hog's
    target.write_text('kind = "fake"\n')  # a quiet host
    assert cli.main(["study", "--resume", str(run)]) == 0
    assert all(p.n == 3 for p in study_report.load(run).points.values())


def test_doctor_shows_the_host_load_row() -> None:
    rows = doctor.checks(FakeHost(), ["x86_64"])
    assert [r.name for r in rows].count("host load") == 1


def test_a_posterior_bisection_with_a_hog_from_halfway_keeps_its_culprit(env, capsys):
    """--retakes 0 --count-disturbed and a hog (half the host) from the 11th boot on, as
    scripts/drift-demo does for real: the posterior explains the slowed samples by their
    measured load."""
    shas = history(env["repo"], 12, 7)
    fake_target(env["scenario"].parent, cv=0.05, disturb=[0.0] * 10 + [0.5] * 80)
    argv = bisect_args(
        env,
        shas[1],
        shas[-1],
        "--retakes",
        "0",
        "--count-disturbed",
        "--references",
        "3",
        method="posterior",
    )
    assert kbisect(*argv) == 1
    said = capsys.readouterr()
    assert f"first bad commit: {shas[7]}" in said.out
    # the revert check has no load model: its first disturbed boot ends it; the re-check
    # (which the posterior's load model judged) says the answer is a step, and without a
    # measured revert the answer is not confirmed
    assert "revert check failed: it ran while other work took the host" in said.err
    (run,) = run_dirs(env["results"])
    s = results.load_summary(run)
    assert s["verification"]["kind"] == "no-revert" and not s["confirmed"]
    assert s["recheck"]["confirmed"]
    (line,) = [w for w in s["verdict"]["warnings"] if w.startswith("load:")]
    assert "ran while other work took 50% of the CPUs" in line
    assert s["stats"]["levels"]["load_beta"] < -0.3
    rows = json.loads((run / "state.json").read_text())["samples"]
    assert {r["load"] for r in rows if r["t"] >= 0} >= {0.0, 0.5}
