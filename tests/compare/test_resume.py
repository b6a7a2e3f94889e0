"""`kbisect compare`: bad options refused before any work, an interrupted compare resumed
with no sample lost or taken twice, and the report of a partial run (fake target)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.compare import schedule
from kbisect.core import paths, reading
from kbisect.core.exceptions import EXIT_INFRA, EXIT_OK, EXIT_USER
from kbisect.measure import results
from kbisect.measure.record import Sample
from tests.fakes import (
    ab_compare_argv,
    fake_calls,
    fake_image,
    fake_target,
    make_fake_kernel_repo,
    start_driver,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    return fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 800}, cv=0.02)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--boots", "0"], "--boots: 0 is not in 2..1000"),
        (["--boots", "1"], "--boots: 1 is not in 2..1000"),
        (["--retries", "-1"], "--retries: -1 is not in 0..20"),
        (["--min-effect", "nan"], "--min-effect: nan is not a finite number"),
        (["--min-effect", "inf"], "--min-effect: inf is not a finite number"),
        (["--min-effect", "-5"], "--min-effect: -5 is not in [0, 1)"),
        (["--base-config", "nosuch"], "--base-config nosuch: not one of"),
        (["--base", "HEAD"], "--kernel and --base both say which kernel"),
        (["--out", ""], "--out: '' names no directory"),  # not the current directory
    ],
)
def test_bad_options_are_one_line_and_exit_2_before_any_boot(
    tmp_path: Path,
    target: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    words: str,
) -> None:
    assert cli.main(ab_compare_argv(fake_image(tmp_path / "k"), target, *extra)) == EXIT_USER
    assert words in one_line(capsys.readouterr().err)
    assert fake_calls(target) == []


def test_out_that_is_a_file_or_already_holds_samples_is_refused(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = fake_image(tmp_path / "k")
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert cli.main(ab_compare_argv(image, target, "--out", str(afile))) == EXIT_INFRA
    assert f"--out {afile}: not a directory" in one_line(capsys.readouterr().err)
    assert cli.main(ab_compare_argv(image, target, "--out", "/proc/x")) == EXIT_INFRA
    assert "--out /proc/x: not writable" in one_line(capsys.readouterr().err)
    out = tmp_path / "cmp"
    assert cli.main(ab_compare_argv(image, target, "--out", str(out))) == 1  # B is 20% slower
    capsys.readouterr()
    assert cli.main(ab_compare_argv(image, target, "--out", str(out))) == EXIT_USER
    assert "already holds a run" in one_line(capsys.readouterr().err)
    assert len(fake_calls(target)) == 6


def test_rev_b_with_revert_is_refused(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "linux"
    shas = make_fake_kernel_repo(repo, [{"subject": "a"}, {"subject": "b"}])
    args = [
        "compare",
        "--tree",
        str(repo),
        "--base",
        shas[2],
        "--rev-b",
        shas[1],
        "--revert",
        shas[1],
        "--scenario",
        "smoke",
        "--target",
        str(target),
    ]
    assert cli.main(args) == EXIT_USER
    assert "--rev-b and --revert both say" in one_line(capsys.readouterr().err)
    assert not (paths.cache_dir() / "builds").exists()


def run_killed_at(call: int, tmp_path: Path, target: Path, out: Path, image: Path) -> None:
    """A real `kbisect compare` process, SIGKILLed by the fake target at boot `call`."""
    pid_file = tmp_path / "driver.pid"
    fake_target(
        tmp_path,
        append_tps={"x=1": 1000, "x=2": 800},
        cv=0.02,
        kill_at=call,
        kill_pid_file=str(pid_file),
    )
    driver = start_driver(ab_compare_argv(image, target, "--out", str(out)), pid_file)
    assert driver.wait(timeout=120) == -signal.SIGKILL
    fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 800}, cv=0.02)


@pytest.mark.parametrize("call", [1, 4, 6])
def test_a_killed_compare_resumes_without_losing_or_repeating_a_sample(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str], call: int
) -> None:
    image, out = fake_image(tmp_path / "k"), tmp_path / "cmp"
    run_killed_at(call, tmp_path, target, out, image)
    assert not (out / "summary.json").exists()
    stored_before = len(results.load_samples(out))
    assert stored_before == call - 1  # the killed boot left no sample
    assert cli.main(["report", str(out)]) in (EXIT_OK, EXIT_USER)  # partial, if 2 per side
    capsys.readouterr()
    assert cli.main(["compare", "--resume", str(out)]) == 1
    summary = results.load_summary(out)
    assert summary["resumed"] == 1 and summary["order"] == schedule.order(3)[0]
    samples = results.load_samples(out)
    assert [s.label for s in samples] == schedule.order(3)[0]  # the plan, once each
    assert len(fake_calls(target)) == len(samples) + 1  # only the killed boot was redone
    assert summary["verdict"]["kind"] == "regression"
    assert cli.main(["compare", "--resume", str(out)]) == EXIT_USER  # finished
    assert "has finished" in capsys.readouterr().err


def test_a_compare_killed_between_its_summary_and_its_report_is_finished_by_resume(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image, out = fake_image(tmp_path / "k"), tmp_path / "cmp"
    assert cli.main(ab_compare_argv(image, target, "--out", str(out))) == 1
    (out / "report.md").unlink()  # the kill came while the report was being written
    assert cli.main(["compare", "--resume", str(out)]) == 1  # the run's own exit code
    assert (out / "report.md").is_file() and len(fake_calls(target)) == 6
    assert cli.main(["compare", "--resume", str(out)]) == EXIT_USER
    assert "has finished" in capsys.readouterr().err


def test_a_partial_run_reports_marked_partial(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image, out = fake_image(tmp_path / "k"), tmp_path / "cmp"
    run_killed_at(6, tmp_path, target, out, image)  # A B B A A done
    assert cli.main(["report", str(out)]) == EXIT_OK
    text = (out / "report.md").read_text()
    assert text.startswith("# smoke: PARTIAL, ") and "**PARTIAL:**" in text
    assert "--resume" in text


def test_bare_resume_picks_the_newest_unfinished_compare(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["compare", "--resume"]) == EXIT_USER
    assert "no unfinished compare" in one_line(capsys.readouterr().err)
    out = paths.results_dir() / "x-compare-smoke"
    run_killed_at(3, tmp_path, target, out, fake_image(tmp_path / "k"))
    assert cli.main(["compare", "--resume"]) == 1
    assert (out / "summary.json").is_file()


def test_a_plan_the_samples_do_not_follow_is_refused(tmp_path: Path) -> None:
    stored = [Sample({"label": "B", "status": "ok", "tps": 1.0})]
    with pytest.raises(schedule.NotResumable, match="does not follow the plan"):
        schedule.standing(["A", "B"], 1, stored)
    st = schedule.standing(
        ["A", "B", "B", "A"],
        1,
        [
            Sample({"label": "A", "status": "ok", "tps": 5.0}),
            Sample({"label": "B", "status": "boot-failed"}),
            Sample({"label": "B", "status": "boot-failed"}),  # retries used up: on to the next B
            Sample({"label": "B", "status": "boot-failed"}),
        ],
    )
    assert (st.slot, st.todo[2], st.failed, st.tps["A"]) == (2, (1, 0), {"A": 0, "B": 3}, [5.0])
    (tmp_path / "plan.json").write_text(json.dumps({"kind": "compare-plan"}))
    with pytest.raises(reading.CorruptFile, match="not a whole compare plan"):
        schedule.load(tmp_path)
    (tmp_path / "plan.json").write_text(json.dumps({"kind": "odd"}))
    with pytest.raises(schedule.NotResumable, match="not a compare plan"):
        schedule.load(tmp_path)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("order", "ABBA", 'order must be a list, got "ABBA"'),
        ("order", ["A", "C"], 'order must be a list of sides A and B, got ["A", "C"]'),
        ("retries", -1, "retries must be 0 to 100, got -1"),
        ("retries", True, "retries must be an integer, got true"),
        ("min_effect", float("nan"), "min_effect must be a finite number, got nan"),
        ("sides", {"A": {}}, "sides.B is missing"),
        ("target", 3, "target must be a string, got 3"),
    ],
)
def test_a_plan_with_a_wrong_field_names_it_and_how_to_recover(
    tmp_path: Path, field: str, value: object, problem: str
) -> None:
    plan = json.loads((EXAMPLES / "demo" / "plan.json").read_text())
    (tmp_path / "plan.json").write_text(json.dumps({**plan, field: value}))
    with pytest.raises(reading.CorruptFile) as info:
        schedule.load(tmp_path)
    assert str(info.value) == f"{tmp_path}/plan.json: {problem}; {schedule.RECOVER}"


def test_a_resume_while_the_compare_still_runs_is_refused_naming_it(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 800}, cv=0.02, delay_s=60.0)
    running = start_driver(
        ab_compare_argv(fake_image(tmp_path / "k"), target, "--out", str(out)), tmp_path / "pid"
    )
    try:
        lock = out / ".compare.lock"
        deadline = time.monotonic() + 60
        while not (lock.is_file() and lock.read_text() == f"{running.pid}\n"):
            assert running.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        assert cli.main(["compare", "--resume", str(out)]) == EXIT_USER
        line = capsys.readouterr().err.strip().splitlines()[-1]  # after `resuming ...`
        assert f"{out}: a kbisect compare (pid {running.pid}) is still running there" in line
    finally:
        running.kill()
        running.wait()
