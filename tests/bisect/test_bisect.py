"""`kbisect bisect`, end to end on generated histories: real git bisect run, real make
on the fake tree, the fake measurement of tests/bisect/test_step.py in place of boots.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
from pathlib import Path
from typing import Any

import pytest

from kbisect.bisect import request
from kbisect.bisect import state as bisect_state
from kbisect.bisect.git import log as bisect_log
from kbisect.bisect.git import run as bisect_git
from kbisect.commands import bisect as bisect_args
from kbisect.commands import bisect_step, cli
from kbisect.core import stale
from kbisect.source import worktree
from tests.bisect.test_step import calls, fake, fixed_dates, write_scenario
from tests.fakes import fake_calls, git, make_fake_kernel_repo, start_driver

ROOT = Path(__file__).resolve().parents[2]
FAST, SLOW = 1000, 750  # a 25% regression


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    fixed_dates(monkeypatch)
    return {
        "scenario": write_scenario(tmp_path),
        "log": fake(tmp_path, cv=0.05),
        "results": tmp_path / "results",
        "repo": tmp_path / "linux",
    }


def history(
    repo: Path,
    commits: int,
    culprit: int,
    broken: frozenset[int] = frozenset(),
    tps: tuple[int, int] = (FAST, SLOW),
) -> list[str]:
    """shas[1..commits]: fast before `culprit`, slow from it on; shas[0] is unused."""
    specs = [
        {"subject": f"commit {i}", "tps": tps[0] if i < culprit else tps[1], "broken": i in broken}
        for i in range(1, commits + 1)
    ]
    return make_fake_kernel_repo(repo, specs)


def kbisect(*argv: str) -> int:
    return cli.main(["bisect", *argv])


def bisect_argv(env: dict[str, Path], good: str, bad: str, *extra: str) -> list[str]:
    """The options of a bisection of the env fixture's tree on its fake target, then extra."""
    where = ["--tree", str(env["repo"]), "--scenario", str(env["scenario"])]
    return [*where, "--target", str(env["log"]), "--good", good, "--bad", bad, *extra]


def args(env: dict[str, Path], good: str, bad: str, *extra: str, method: str = "git") -> list[str]:
    """The command line of a bisection (these tests test git's method unless told)."""
    return bisect_argv(env, good, bad, "--method", method, "--references", "0", *extra)


def run_dirs(results: Path) -> list[Path]:
    return sorted(p.parent for p in results.glob(f"*/{bisect_state.STATE_FILE}"))


def summary(results: Path) -> dict[str, Any]:
    (run,) = run_dirs(results)
    data: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return data


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_finds_the_culprit_at_cv_10(env, monkeypatch, capsys, seed):
    # noise keyed by subject, not by sha: the shas change whenever tests/fakelinux does
    fake(env["scenario"].parent, cv=0.10, seed=seed, noise_key="subject")
    rng = random.Random(seed)
    n = rng.randint(16, 32)
    culprit = rng.randint(2, n)
    shas = history(env["repo"], n, culprit)
    assert kbisect(*args(env, shas[1], shas[-1])) == 0
    out = capsys.readouterr().out
    assert f"first bad commit: {shas[culprit]} commit {culprit}" in out
    s = summary(env["results"])
    assert s["first_bad"] == {"commit": shas[culprit], "subject": f"commit {culprit}"}
    # the revert check, not the re-check, confirmed it
    assert s["confirmed"] and s["verification"]["kind"] == "all" and "ratio" not in s["recheck"]
    for row in s["revisions"]:
        index = shas.index(row["commit"])
        assert row["verdict"] in ("good" if index < culprit else "bad", "skip")
    run = run_dirs(env["results"])[0]
    report = (run / "report.md").read_text().splitlines()
    assert report[2:5] == ["Reproduce:", "", f"    {s['command']}"]
    assert s["command"].startswith(f"kbisect bisect --tree {env['repo']} --good {shas[1]}")
    assert (run / "bisect.png").read_bytes()[:4] == b"\x89PNG"
    assert "git bisect start" in s["bisect_log"]
    assert s["kind"] == "bisect" and s["verdict"]["kind"] == "regression"
    (run / "report.md").unlink()
    assert cli.main(["report", str(run)]) == 0  # re-rendered from summary.json
    assert (run / "report.md").read_text().splitlines() == report


def test_skipped_neighbours_give_a_range_and_are_never_blamed(env, monkeypatch, capsys):
    shas = history(env["repo"], 12, 7, broken=frozenset({6}))
    fake(env["scenario"].parent, cv=0.05, boot_fail=[shas[7]])
    assert kbisect(*args(env, shas[1], shas[-1], "--recheck-samples", "4")) == 0
    out = capsys.readouterr().out
    assert "first bad commit: one of 3" in out
    s = summary(env["results"])
    assert s["first_bad"] is None
    assert [c["commit"] for c in s["candidates"]] == [shas[8], shas[7], shas[6]]
    assert s["recheck"]["parent"] == shas[5] and s["recheck"]["culprit"] == shas[8]
    assert s["confirmed"]
    marks = {r["commit"]: r["verdict"] for r in s["revisions"]}
    assert marks.get(shas[6]) == "skip" and marks.get(shas[7]) == "skip"
    report = (run_dirs(env["results"])[0] / "report.md").read_text()
    assert "one of these" in report and "build failed" in report


def test_skips_away_from_the_culprit_do_not_hide_it(env, monkeypatch):
    shas = history(env["repo"], 16, 11, broken=frozenset({4, 8, 14}))
    fake(env["scenario"].parent, cv=0.05, boot_fail=[shas[6], shas[13]])
    assert kbisect(*args(env, shas[1], shas[-1], "--recheck-samples", "4")) == 0
    s = summary(env["results"])
    assert s["first_bad"]["commit"] == shas[11]
    failing = {shas[i] for i in (4, 6, 8, 13, 14)}
    assert all(r["verdict"] == "skip" for r in s["revisions"] if r["commit"] in failing)


def test_second_pass_remeasures_unclear_neighbours(env, monkeypatch, capsys, tmp_path):
    """Commit 4 sits exactly on the threshold (no noise): unclear in both passes."""
    fake(env["scenario"].parent, cv=0)
    specs = [
        {"subject": f"commit {i}", "tps": {4: 900, 5: SLOW}.get(i, FAST if i < 5 else SLOW)}
        for i in range(1, 9)
    ]
    shas = make_fake_kernel_repo(env["repo"], specs)
    argv = args(
        env, shas[1], shas[-1], "--threshold", "900", "--runs-max", "4", "--recheck-samples", "3"
    )
    assert kbisect(*argv) == 0
    s = summary(env["results"])
    assert s["second_pass"] and "skip" in s["first_pass_log"]
    assert [c["commit"] for c in s["candidates"]] == [shas[5], shas[4]]
    assert [i for c, i in calls(env["log"]) if c == shas[4]] == list(range(8))
    report = (run_dirs(env["results"])[0] / "report.md").read_text()
    assert "Second pass" in report and "up to 8 samples" in report


def one_error_line(err: str) -> str:
    errors = [
        line for line in err.splitlines() if line.startswith(("kbisect: ", "kbisect bisect: error"))
    ]
    assert len(errors) == 1, err
    return errors[0]


def test_bad_endpoints_are_refused_in_one_line(env, capsys, tmp_path):
    shas = history(env["repo"], 8, 5)
    git(env["repo"], "checkout", "-q", "-b", "side", shas[3])
    git(env["repo"], "commit", "-q", "--allow-empty", "-m", "side")
    side = git(env["repo"], "rev-parse", "HEAD")
    notkernel = tmp_path / "notkernel"
    notkernel.mkdir()
    git(notkernel, "init", "-q")
    cases = [
        (args(env, shas[2], shas[2]), "same commit"),
        (args(env, shas[-1], shas[1]), "swapped"),
        (args(env, side, shas[-1]), "not an ancestor"),
        (args(env, shas[1], "no-such-rev"), "unknown revision"),
        (
            ["--tree", str(notkernel), "--good", "a", "--bad", "b", "--scenario", "x"],
            "not a kernel tree",
        ),
        (args(env, shas[1], shas[-1], "--runs-min", "5", "--runs-max", "4"), "runs-min"),
    ]
    for argv, words in cases:
        assert kbisect(*argv) == 2, words
        assert words in one_error_line(capsys.readouterr().err)
    assert calls(env["log"]) == [] and run_dirs(env["results"]) == []


def test_threshold_outside_the_endpoints_is_refused(env, capsys):
    shas = history(env["repo"], 8, 5)
    assert kbisect(*args(env, shas[1], shas[-1], "--threshold", "1200")) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--threshold 1200 is outside the endpoints' range" in line
    (run,) = run_dirs(env["results"])
    assert kbisect("--resume", str(run)) == 2
    assert "was refused: --threshold 1200" in one_error_line(capsys.readouterr().err)
    assert kbisect("--resume") == 2
    assert "no unfinished bisect run" in one_error_line(capsys.readouterr().err)


def test_equal_endpoints_are_refused_with_the_numbers(env, capsys):
    shas = history(env["repo"], 8, 5, tps=(FAST, FAST))
    assert kbisect(*args(env, shas[1], shas[-1], "--runs-max", "4")) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "do not differ significantly: good" in line and "ratio" in line
    assert len(calls(env["log"])) == 8  # runs-max samples of each endpoint


def test_better_bad_endpoint_is_refused(env, capsys):
    shas = history(env["repo"], 8, 5, tps=(SLOW, FAST))
    assert kbisect(*args(env, shas[1], shas[-1])) == 2
    assert "bad is better than good" in one_error_line(capsys.readouterr().err)


def snapshot(repo: Path) -> dict[str, object]:
    gd = repo / ".git"
    files = ["HEAD", "index", "ORIG_HEAD", *sorted(p.name for p in gd.glob("BISECT_*"))]
    return {
        "files": {f: (gd / f).read_bytes() for f in files if (gd / f).exists()},
        "refs": git(repo, "for-each-ref"),
        "status": git(repo, "status", "--porcelain=v2", "--branch"),
        "worktree": (repo / "TPS").read_bytes(),
    }


def test_users_checkout_and_bisect_are_untouched(env):
    shas = history(env["repo"], 8, 5)
    repo = env["repo"]
    git(repo, "bisect", "start", shas[-1], shas[1])
    git(repo, "bisect", "good")
    (repo / "TPS").write_text("123\n")
    git(repo, "add", "TPS")
    (repo / "VERSION").write_text("dirty\n")
    before = snapshot(repo)
    assert kbisect(*args(env, shas[1], shas[-1], "--recheck-samples", "3")) == 0
    assert snapshot(repo) == before
    assert (repo / "VERSION").read_text() == "dirty\n"


def test_resume_after_a_kill_gives_the_same_answer(env, monkeypatch, tmp_path):
    shas = history(env["repo"], 12, 8)
    argv = args(env, shas[1], shas[-1], "--recheck-samples", "3")
    reference = tmp_path / "reference"
    monkeypatch.setenv("KBISECT_RESULTS", str(reference))
    assert kbisect(*argv) == 0
    expected = summary(reference)
    (tmp_path / "fake-state" / "calls.jsonl").unlink()

    monkeypatch.setenv("KBISECT_RESULTS", str(env["results"]))
    pid_file = tmp_path / "driver.pid"
    # the 10th boot (after the endpoints, inside git bisect run) kills the driver and git
    fake(tmp_path, cv=0.05, kill_at=10, kill_pid_file=str(pid_file))
    driver = start_driver(["bisect", *argv], pid_file)
    assert driver.wait(timeout=120) == -signal.SIGKILL
    assert stale.wait_gone(worktree.path_for(env["repo"], bisect_git.SLOT)) is None  # reaped
    (run,) = run_dirs(env["results"])
    state = bisect_state.load(run)
    assert state.phase == "bisecting" and "git bisect start" in state.bisect_log

    fake(tmp_path, cv=0.05)
    assert kbisect("--resume") == 0
    got = summary(env["results"])
    assert got["first_bad"] == expected["first_bad"] == {"commit": shas[8], "subject": "commit 8"}
    assert got["bisect_log"] == expected["bisect_log"]
    stored = list(env["results"].glob("bisect-store/*/*/samples/*.json"))
    stored += list(run.glob("recheck/*/samples/*.json"))
    stored += list(run.glob("verify/*/*/samples/*.json"))
    assert len(fake_calls(env["log"])) == len(stored) + 1  # only the killed boot was redone
    assert bisect_state.load(run).phase == "done"
    # killed after its state said done, before its summary and report: --resume writes them
    (run / "report.md").unlink()
    (run / "summary.json").unlink()
    boots = len(fake_calls(env["log"]))
    assert kbisect("--resume", str(run)) == 0
    again = summary(env["results"])
    assert [again[k] for k in ("first_bad", "bisect_log", "recheck")] == [
        got[k] for k in ("first_bad", "bisect_log", "recheck")
    ]
    assert len(fake_calls(env["log"])) == boots  # nothing measured again
    assert kbisect("--resume", str(run)) == 2  # finished runs are not resumed


@pytest.mark.parametrize("how", [("git", 0.95, 100, 0), ("posterior", 0.99, 40, 2)])
def test_reproduce_line_parses_back(how):
    sets = ("pgbench.clients=4", "guest.vcpus=1")
    opts = request.Options(
        "/t",
        "v1",
        "v2",
        "smoke",
        812.5,
        False,
        "preempt=full",
        3,
        10,
        8,
        ("preempt-none",),
        "arm64",
        "vng",
        sets,
        "defconfig",
        *how,
    )
    ns = cli.build_parser().parse_args(opts.argv())
    assert bisect_args.options_from_args(ns) == opts


def test_step_args_pass_every_option_to_the_step():
    opts = request.Options(
        None,
        "g",
        "b",
        "smoke",
        None,
        False,
        "a b",
        4,
        9,
        8,
        ("x",),
        "arm64",
        "/t/m.toml",
        ("pgbench.clients=4",),
        "allnoconfig",
    )
    step_args = opts.step_argv(812.25, Path("/s"), 18)
    cmd = bisect_git.run_command(Path("/wt"), Path("/k/bisect/run"), step_args)
    assert cmd[:6] == ["git", "-C", "/wt", "bisect", "run", "/k/bisect/run"]
    assert step_args[step_args.index("--threshold") + 1] == "812.25"
    assert step_args[step_args.index("--append") + 1] == "a b"
    assert {"--lower-is-better", "--config", "x", "--store", "/s"} <= set(step_args)
    assert step_args[step_args.index("--runs-max") + 1] == "18"
    assert step_args[step_args.index("--runs-min") + 1] == "4"
    ns = bisect_step_parser().parse_args(step_args)
    assert (ns.threshold, ns.append, ns.config, ns.arch) == (812.25, "a b", ["x"], "arm64")
    assert ns.target == "/t/m.toml" and ns.set == ["pgbench.clients=4"]
    assert ns.base_config == "allnoconfig"


def bisect_step_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    bisect_step.configure(parser)
    return parser


LOG_FOUND = """\
# bad: [bbbb] slow
# good: [aaaa] fast
git bisect start 'bbbb' 'aaaa'
# good: [cccc] mid
git bisect good cccc
# first bad commit: [dddd] culprit
"""

LOG_RANGE = """\
# skip: [eeee] broken
git bisect skip eeee
# bad: [ffff] x
git bisect bad ffff
# only skipped commits left to test
# possible first bad commit: [ffff] x
# possible first bad commit: [eeee] broken
"""


def test_unclear_skips_are_taken_out_of_the_log(tmp_path):
    store = tmp_path / "store"
    for commit, skip in (("eeee", "unclear"), ("ffff", None)):
        (store / commit).mkdir(parents=True)
        (store / commit / "step.json").write_text(json.dumps({"skip": skip}))
    ranged = bisect_log.parse(LOG_RANGE)
    assert bisect_log.unclear_skips(store, ranged) == ["eeee"]
    assert bisect_log.unclear_skips(store, bisect_log.parse(LOG_FOUND)) == []
    kept = bisect_log.without_skips(LOG_RANGE, ["eeee"])
    assert "eeee" not in kept.split("# only")[0] and "git bisect bad ffff" in kept


def test_parse_log():
    found = bisect_log.parse(LOG_FOUND)
    assert found.first_bad == "dddd" and found.candidates == ["dddd"]
    assert [(m.verdict, m.commit) for m in found.marks] == [
        ("bad", "bbbb"),
        ("good", "aaaa"),
        ("good", "cccc"),
    ]
    ranged = bisect_log.parse(LOG_RANGE)
    assert ranged.first_bad is None and ranged.candidates == ["ffff", "eeee"]
    unfinished = bisect_log.parse(LOG_FOUND.rsplit("#", 1)[0])
    assert not unfinished.finished


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--arch", "sparc"], "unknown arch 'sparc'"),
        (["--config", "nosuch"], "nosuch"),
        (["--threshold", "inf"], "--threshold: inf is not a finite number"),
        (["--recheck-samples", "2"], "--recheck-samples: 2 is not in 3..1000"),
        (["--target", "nowhere"], "unknown target 'nowhere'"),
    ],
)
def test_bad_options_leave_no_run_to_resume(env, capsys, extra, words):
    shas = history(env["repo"], 4, 3)
    assert kbisect(*args(env, shas[1], shas[-1]), *extra) == 2
    assert words in one_error_line(capsys.readouterr().err)
    assert run_dirs(env["results"]) == [] and calls(env["log"]) == []


def test_a_truncated_state_is_one_line_and_does_not_break_bare_resume(env, capsys):
    broken = env["results"] / "20260101T000000Z-bisect-x"
    broken.mkdir(parents=True)
    (broken / "state.json").write_text('{"version": 1, "kind": "bisect-sta')
    assert kbisect("--resume", str(broken)) == 3  # a file of kbisect's own: how to recover
    line = one_error_line(capsys.readouterr().err)
    assert "truncated or not JSON" in line and "run the same kbisect bisect again" in line
    (broken / "state.json").write_text('{"version": 1, "kind": "bisect-state"}')
    assert kbisect("--resume", str(broken)) == 3
    assert "incomplete (no options" in one_error_line(capsys.readouterr().err)
    assert kbisect("--resume") == 2  # skipped with a warning, then: nothing to resume
    err = capsys.readouterr().err
    assert f"skipping {broken}" in err and "no unfinished bisect run" in err


def test_a_damaged_summary_is_written_again_as_its_line_says(env, capsys):
    """`kbisect report` refuses a summary.json with a damaged field (exit 3); what its
    line says to do (remove report.md, resume the finished run) writes it again from the
    state and the stored samples, measuring nothing."""
    shas = history(env["repo"], 6, 4)
    assert kbisect(*args(env, shas[1], shas[-1], "--recheck-samples", "3")) == 0
    (run,) = run_dirs(env["results"])
    good = (run / "summary.json").read_text()
    damaged = json.loads(good)
    damaged["revisions"][0]["tps"][1] = None
    (run / "summary.json").write_text(json.dumps(damaged))
    capsys.readouterr()
    assert cli.main(["report", str(run)]) == 3
    line = capsys.readouterr().err.strip()
    assert "$.revisions[0].tps[1]: must be number, got null" in line
    assert line.endswith(
        f"remove {run}/report.md and run kbisect bisect --resume {run}: it writes "
        "summary.json again from state.json and the stored samples"
    )
    boots = len(fake_calls(env["log"]))
    (run / "report.md").unlink()
    assert kbisect("--resume", str(run)) == 0
    assert len(fake_calls(env["log"])) == boots
    again = json.loads((run / "summary.json").read_text())
    assert {**again, "created": None} == {**json.loads(good), "created": None}
    assert cli.main(["report", str(run)]) == 0
