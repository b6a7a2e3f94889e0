"""`kbisect bisect --method posterior` end to end on generated histories (linear and with
merges): real git, real make on the fake tree, the fake target in place of boots."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kbisect.bisect import state as bisect_state
from kbisect.commands import cli
from tests.bisect.test_bisect import (
    FAST,
    ROOT,
    SLOW,
    bisect_argv,
    history,
    kbisect,
    run_dirs,
    summary,
)
from tests.bisect.test_step import fake, fixed_dates, write_scenario
from tests.fakes import fake_calls, git, make_fake_kernel_repo


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    fixed_dates(monkeypatch)
    return {
        "scenario": write_scenario(tmp_path),
        "log": fake(tmp_path, cv=0.05),
        "results": tmp_path / "results",
        "repo": tmp_path / "linux",
    }


def args(env: dict[str, Path], good: str, bad: str, *extra: str) -> list[str]:
    runs = ["--runs-min", "2", "--runs-max", "4", "--recheck-samples", "4"]
    return bisect_argv(env, good, bad, *runs, *extra)


def verify_boots(run: Path) -> int:
    """The boots the run's revert check took (the revert's and the bad endpoint's)."""
    return len(list(run.glob("verify/*/*/samples/*.json")))


def replay_names(repo: Path, run: Path) -> str:
    """What plain git says when it replays the run's log."""
    out = subprocess.run(
        ["git", "-C", str(repo), "bisect", "replay", str(run / "git-bisect.log")],
        capture_output=True,
        text=True,
        check=False,
    )
    git(repo, "bisect", "reset")
    return out.stdout + out.stderr


def test_a_fix_inside_the_range_is_told_not_blamed(env, capsys):
    """A regression at 7 that 12 fixes, the real culprit at 16: the driver names all three,
    says git's single answer is not the whole story, and exits 0 only with each change
    re-checked."""
    tps = [FAST if i < 7 or 12 <= i < 16 else SLOW for i in range(1, 21)]
    specs = [{"subject": f"commit {i}", "tps": t, "broken": False} for i, t in enumerate(tps, 1)]
    shas = make_fake_kernel_repo(env["repo"], specs)
    code = kbisect(
        *args(env, shas[1], shas[-1], "--references", "0", "--max-boots", "80", "--story", "full")
    )
    s = summary(env["results"])
    told = s["story"]
    assert told["kind"] == "several" and told["p_single"] < 0.05
    # each true change located (a named change is one commit, or a group of untestable ones)
    steps = sorted(told["steps"], key=lambda step: shas.index(step["commit"]))
    assert [step["commit"] for step in steps] == [shas[7], shas[12], shas[16]]
    assert steps[0]["ratio"] < 1 < steps[1]["ratio"] and steps[2]["ratio"] < 1
    assert code == (0 if s["confirmed"] else 1)
    assert s["confirmed"] == all(step["recheck"] == "confirmed" for step in told["steps"])
    run = run_dirs(env["results"])[-1]
    report = (run / "report.md").read_text()
    assert "## The whole range" in report and "not the whole story" in report
    assert "the whole range: several" in capsys.readouterr().out
    # the replay log closes with git's caveat and every change, as comments git skips
    log = (run / "git-bisect.log").read_text()
    caveat = log[log.index("# caveat: the samples do not support one step") :]
    assert all(line.startswith("#") for line in caveat.splitlines())
    for step in told["steps"]:
        assert f"[{step['commit']}]" in caveat
    replayed = replay_names(env["repo"], run)
    assert "error" not in replayed.lower() and "caveat" not in replayed


def test_finds_the_culprit_and_git_replays_it(env, capsys):
    shas = history(env["repo"], 16, 9)
    assert kbisect(*args(env, shas[1], shas[-1], "--references", "0", "--story", "full")) == 0
    got = capsys.readouterr()
    out = got.out
    assert f"first bad commit: {shas[9]} commit 9 (P = " in out
    # each round's boot of those the rule expects (plain lines: not on a terminal)
    rounds = re.findall(r"\] (boot \d+ of .*): [0-9a-f]{12} \(\w+\)", got.err)
    assert rounds[0] == "boot 1 of at most 100"  # no rate before the first boot
    later = [re.sub(r"~\d+ s left", "~N s left", r) for r in rounds[1:]]
    assert later and all(
        re.fullmatch(r"boot \d+ of ~\d+ \(at most 100\), ~N s left", r) for r in later
    )
    expected = [int(re.search(r"of ~(\d+)", r).group(1)) for r in later]  # type: ignore[union-attr]
    assert all(
        e > int(r.split()[1]) + 5 for e, r in zip(expected, later, strict=True)
    )  # + re-check
    s = summary(env["results"])
    assert s["method"] == "posterior" and s["answer"]["kind"] == "culprit"
    assert s["first_bad"]["commit"] == shas[9] and s["confirmed"]
    assert s["answer"]["probability"] >= 0.95
    assert s["recheck"]["kind"] == "confirmed" and s["recheck"]["high"] < 1
    assert s["recheck"]["parent"] == shas[8] and 3 <= s["recheck"]["n"] <= 4
    # far fewer boots than the 16 commits' worth (the probes of the story apart: they
    # check the stretches the search did not split); each revision's verdict is right
    probed = sum(1 for r in s["samples"] if r["commit"] in s["probes"] and r["role"] == "test")
    assert s["story"]["kind"] == "single" and s["story"]["steps"][0]["commit"] == shas[9]
    assert s["boots"] - probed < 16
    for row in s["revisions"]:
        i = shas.index(row["commit"])
        assert row["verdict"] in ("good" if i < 9 else "bad", "unclear")
    run = run_dirs(env["results"])[0]
    assert f"{shas[9]} is the first bad commit" in replay_names(env["repo"], run)
    report = (run / "report.md").read_text()
    for words in (
        "Reproduce:",
        "(P ",
        "Re-check, fresh pairs",
        "posterior.png",
        "Every sample, in time order",
        "git bisect replay",
    ):
        assert words in report
    for png in ("posterior.png", "bisect.png", "tps-time.png"):
        assert (run / png).read_bytes()[:4] == b"\x89PNG"
    # every sample is in the report, endpoints included
    stored = list(env["results"].glob("bisect-store/*/*/samples/*.json"))
    stored += list(run.glob("recheck/*/*/samples/*.json"))
    assert len(s["samples"]) == len(stored) == len(fake_calls(env["log"])) - verify_boots(run)
    # re-rendered from summary.json alone, byte for byte
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.suffix in (".md", ".png")}
    for p in before:
        (run / p).unlink()
    assert cli.main(["report", str(run)]) == 0
    assert {p: (run / p).read_bytes() for p in before} == before
    assert cli.main(["report", str(run), "--format", "text"]) == 0
    assert f"commit {shas[9][:12]}" in capsys.readouterr().out


def test_broken_commits_are_never_blamed_and_a_range_replays(env, capsys):
    shas = history(env["repo"], 10, 6, broken=frozenset({5}))
    fake(env["scenario"].parent, cv=0.05, boot_fail=[shas[6]])
    code = kbisect(*args(env, shas[1], shas[-1], "--references", "0"))
    s = summary(env["results"])
    assert s["answer"]["kind"] == "range", s["answer"]
    assert {c["commit"] for c in s["candidates"]} == {shas[5], shas[6], shas[7]}
    # every commit of the fake history edits one file: the revert does not apply on bad,
    # so the re-check says the range is a step, and that alone never confirms it
    assert s["verification"]["kind"] == "no-revert" and s["recheck"]["confirmed"]
    assert code == 1 and not s["confirmed"]
    assert s["recheck"]["culprit"] == shas[7] and s["recheck"]["parent"] == shas[4]
    verdicts = {r["commit"]: r["verdict"] for r in s["revisions"]}
    assert verdicts.get(shas[5]) in ("skip", None) and verdicts.get(shas[6]) in ("skip", None)
    out = replay_names(env["repo"], run_dirs(env["results"])[0])
    assert "could be any of" in out and shas[7] in out and shas[5] in out
    assert "one of 3" in capsys.readouterr().out


def merge_history(repo: Path) -> dict[str, str]:
    """main: c1 (good) <- m1 <- m2 <- M <- m3 (bad); topic from c1: t1 <- t2 <- t3,
    merged at M. The culprit t2 (750 from it on, on the topic and after the merge)."""
    names = {}
    shas = make_fake_kernel_repo(repo, [{"subject": "c1", "tps": 1000}])
    names["c1"] = shas[1]
    main = git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    for name in ("m1", "m2"):
        names[name] = make_commit(repo, name, 1000)
    git(repo, "checkout", "-q", "-b", "topic", names["c1"])
    for name, tps in (("t1", 1000), ("t2", 750), ("t3", 750)):
        names[name] = make_commit(repo, name, tps)
    git(repo, "checkout", "-q", main)
    git(repo, "merge", "-q", "--no-ff", "-X", "theirs", "-m", "M", "topic")
    names["M"] = git(repo, "rev-parse", "HEAD")
    names["m3"] = make_commit(repo, "m3", 750)
    return names


def make_commit(repo: Path, subject: str, tps: int) -> str:
    (repo / "TPS").write_text(f"{tps}\n")
    git(repo, "commit", "-q", "--allow-empty", "-am", subject)
    return git(repo, "rev-parse", "HEAD")


def test_finds_a_culprit_on_a_topic_branch_across_a_merge(env):
    names = merge_history(env["repo"])
    assert kbisect(*args(env, names["c1"], names["m3"], "--references", "0")) == 0
    s = summary(env["results"])
    assert s["first_bad"]["commit"] == names["t2"] and s["confirmed"]
    assert f"{names['t2']} is the first bad commit" in replay_names(
        env["repo"], run_dirs(env["results"])[0]
    )


def test_the_budget_ends_an_undecided_search_with_its_candidates(env, capsys):
    fake(env["scenario"].parent, cv=0.10, noise_key="subject")
    shas = history(env["repo"], 12, 7, tps=(1000, 700))
    code = kbisect(
        *args(env, shas[1], shas[-1], "--references", "0", "--max-boots", "2", "--runs-max", "10")
    )
    s = summary(env["results"])
    assert code == 1 and s["boots"] <= 3  # a boot's retry may add one
    assert s["answer"]["kind"] == "undecided" and not s["confirmed"]
    assert len(s["candidates"]) > 1 and s["answer"]["probability"] >= 0.95
    assert "no commit holds 0.95" in capsys.readouterr().out


def test_a_stricter_confidence_takes_more_boots(env):
    shas = history(env["repo"], 16, 9)
    boots = []
    for conf in ("0.9", "0.999"):
        code = kbisect(*args(env, shas[1], shas[-1], "--references", "0", "--confidence", conf))
        runs = run_dirs(env["results"])
        data = json.loads((runs[-1] / "summary.json").read_text())
        assert data["first_bad"]["commit"] == shas[9]
        assert data["answer"]["probability"] >= float(conf)
        # The re-check's interval widens with the confidence too: with its few fresh pairs
        # and this noise it may be unclear (exit 1), which is about the re-check, not the
        # search this test counts; it must never refute the right culprit.
        assert code == 0 or (code == 1 and data["recheck"]["kind"] == "unclear"), data["recheck"]
        boots.append(data["boots"])
    assert boots[0] < boots[1]


def killed_at(
    env: dict[str, Path], tmp_path: Path, argv: list[str], boot: int
) -> tuple[Path, bisect_state.Run]:
    """`kbisect bisect argv` on the fake target, SIGKILLed when it starts boot number
    `boot`; its run dir and the state it had saved."""
    pid_file = tmp_path / "driver.pid"
    fake(tmp_path, cv=0.05, kill_at=boot, kill_pid_file=str(pid_file))
    driver = subprocess.Popen(
        [sys.executable, "-m", "kbisect", "bisect", *argv],
        cwd=ROOT,
        env=os.environ.copy(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid_file.write_text(str(driver.pid))
    assert driver.wait(timeout=120) == -signal.SIGKILL
    (run,) = run_dirs(env["results"])
    return run, bisect_state.load(run)


def test_resume_after_a_kill_reaches_the_same_answer(env, monkeypatch, tmp_path):
    shas = history(env["repo"], 12, 8)
    argv = args(env, shas[1], shas[-1], "--references", "3")
    # the 12th boot (after the endpoints' 4, inside the search) kills the driver
    run, saved = killed_at(env, tmp_path, argv, 12)
    assert saved.phase == "bisecting" and len(saved.visited) > 2
    before = len(saved.posterior["samples"])

    fake(tmp_path, cv=0.05)
    assert kbisect("--resume") == 0
    s = summary(env["results"])
    assert s["first_bad"]["commit"] == shas[8] and s["confirmed"]
    # nothing was lost: every stored sample is evidence, the killed boot was redone
    boots = len(fake_calls(env["log"]))
    assert len(s["samples"]) >= before and boots == len(s["samples"]) + verify_boots(run) + 1
    assert bisect_state.load(run).phase == "done"


def test_git_and_posterior_share_stored_samples(env):
    shas = history(env["repo"], 8, 5)
    assert kbisect(*args(env, shas[1], shas[-1], "--method", "git", "--references", "0")) == 0
    taken = len(fake_calls(env["log"]))
    assert kbisect(*args(env, shas[1], shas[-1], "--references", "0")) == 0
    s = json.loads((run_dirs(env["results"])[-1] / "summary.json").read_text())
    assert s["first_bad"]["commit"] == shas[5]
    reused = [r for r in s["samples"] if r["role"] in ("endpoint", "stored")]
    assert len(reused) >= 4  # the endpoints' and the git steps' samples
    fresh = len(fake_calls(env["log"])) - taken
    assert fresh == len(s["samples"]) - len(reused) + verify_boots(run_dirs(env["results"])[-1])


def test_endpoints_that_do_not_differ_are_refused(env, capsys):
    shas = history(env["repo"], 6, 3, tps=(1000, 1000))
    assert kbisect(*args(env, shas[1], shas[-1])) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("kbisect: ")]
    assert len(err) == 1 and "do not differ significantly" in err[0]


def summary_of(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return data
