"""The revert check that ends every bisection (kbisect/bisect/verify.py), both methods,
end to end on the fake tree and target: real git, real make, real state.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kbisect.bisect import verify
from kbisect.commands import cli
from tests.bisect import test_posterior_method
from tests.bisect.test_bisect import FAST, SLOW, bisect_argv, history, kbisect, run_dirs
from tests.bisect.test_posterior_method import killed_at, verify_boots
from tests.bisect.test_step import fake
from tests.fakes import FAKELINUX, fake_calls, make_fake_kernel_repo

env = test_posterior_method.env  # the fixture: the fake tree and target, 5% noise


def args(env: dict[str, Path], good: str, bad: str, method: str, *extra: str) -> list[str]:
    runs = ["--runs-min", "3", "--runs-max", "6", "--recheck-samples", "6"]
    return bisect_argv(env, good, bad, "--method", method, "--references", "0", *runs, *extra)


def only_run(env: dict[str, Path]) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    (run,) = run_dirs(env["results"])
    s = json.loads((run / "summary.json").read_text())
    return run, s, json.loads((run / "state.json").read_text())


@pytest.mark.parametrize("method", ["posterior", "git"])
def test_a_culprit_whose_revert_restores_everything_is_confirmed(env, capsys, method):
    shas = history(env["repo"], 12, 7)
    assert kbisect(*args(env, shas[1], shas[-1], method)) == 0
    said = capsys.readouterr()
    run, s, st = only_run(env)
    v = s["verification"]
    assert v["culprit"] == shas[7] and v["kind"] == "all" and s["confirmed"]
    assert v["low"] > 0 and v["low"] <= 1 <= v["high"]
    figure = f"reverting {shas[7][:12]} on bad {shas[-1][:12]} restores"
    assert figure in said.out and figure in (run / "report.md").read_text()
    assert st["verification"]["kind"] == "all" and st["phase"] == "done"
    assert f"# first bad commit: [{shas[7]}]" in s["bisect_log"]  # git's single answer
    # every boot of the check said what it measured and the share restored so far
    boots = [line for line in said.err.splitlines() if "verify: " in line]
    assert len(boots) == verify_boots(run) and len(v["reverted_tps"]) >= 2
    assert "restores" in boots[-1] and "of the gap so far" in boots[-1]
    for form in ("text", "mbox"):  # the mail and the text lead with it too
        assert cli.main(["report", str(run), "--format", form]) == 0
        shown = capsys.readouterr().out
        assert figure in shown and shown.index(figure) < shown.index("reproduce:")


# The fake tree's Makefile, its image's tps times the first line of each file slow/NAME
# that has no fixed/NAME: a regression (slow/NAME) and a later fix of it in other code
# (fixed/NAME), after which reverting the regression changes nothing. Written by the
# histories below in their first commit (tests/fakelinux stays as it is: a change there
# changes every commit id of every test's history, and the noise seeded by them).
TPS_LINE = (
    "if [ -e $(srctree)/TPS ]; then "
    """printf '%s\\n' "$$(head -n 1 $(srctree)/TPS)"; else echo; fi;"""
)
FACTORS = (
    """if [ -e $(srctree)/TPS ]; then tps="$$(head -n 1 $(srctree)/TPS)"; """
    """for f in $(srctree)/slow/*; do [ -f "$$f" ] && [ ! -e "$(srctree)/fixed/$${f##*/}" ] """
    """&& tps="$$(awk -v a="$$tps" -v b="$$(head -n 1 "$$f")" 'BEGIN { print a * b }')"; """
    """done; printf '%s\\n' "$$tps"; else echo; fi;"""
)


def with_factors() -> dict[str, str]:
    """The first commit's files: the Makefile that reads slow/ and fixed/."""
    makefile = (FAKELINUX / "Makefile").read_text()
    assert TPS_LINE in makefile
    return {"Makefile": makefile.replace(TPS_LINE, FACTORS)}


def fixed_later(repo: Path) -> list[str]:
    """A regression at 4 that other code fixes at 8 (reverting 4 then changes nothing),
    and the regression that stays, at 11: git's first midpoint falls in 4..7, so git
    names 4."""
    specs: list[dict[str, Any]] = [{"subject": "commit 1", "tps": FAST, "files": with_factors()}]
    for i in range(2, 13):
        files = {4: {"slow/a": "0.75\n", "a.c": "a\n"}, 8: {"fixed/a": "\n"}}.get(i, {})
        files = {11: {"slow/b": "0.75\n"}}.get(i, files)
        specs.append({"subject": f"commit {i}", "files": files})
    return make_fake_kernel_repo(repo, specs)


def test_a_regression_fixed_later_in_the_range_never_exits_0(env, capsys):
    """git's single answer is the fixed step: reverting it restores nothing, exit 1."""
    shas = fixed_later(env["repo"])
    assert kbisect(*args(env, shas[1], shas[-1], "git")) == 1
    run, s, _ = only_run(env)
    v = s["verification"]
    assert s["first_bad"]["commit"] == shas[4] and v["culprit"] == shas[4]
    assert not s["confirmed"] and v["kind"] == "none" and v["low"] <= 0 and v["high"] < 1
    said = capsys.readouterr()
    assert f"{shas[4][:12]} is not why bad is slow" in said.out
    assert "the revert check does NOT confirm" in said.err
    report = (run / "report.md").read_text()
    assert "**Revert check: reverting" in report and "not confirmed" in report


def test_a_step_whose_slowness_a_later_commit_replaced_is_not_why_bad_is_slow(env, capsys):
    """A regression at 7; commit 10 fixes it and, in other code, slows tps by as much
    again: one step, which the re-check confirms, yet reverting it on bad restores
    nothing. Never exit 0 on it (the git method stops there; the posterior bisects the
    rest with it reverted: test_rest.py)."""
    method = "git"
    specs: list[dict[str, Any]] = [{"subject": "commit 1", "tps": FAST, "files": with_factors()}]
    for i in range(2, 13):
        files = {7: {"slow/a": "0.75\n"}, 10: {"fixed/a": "\n", "slow/b": "0.75\n"}}
        specs.append({"subject": f"commit {i}", "files": files.get(i, {})})
    shas = make_fake_kernel_repo(env["repo"], specs)
    assert kbisect(*args(env, shas[1], shas[-1], method)) == 1
    run, s, st = only_run(env)
    v = s["verification"]
    assert s["first_bad"]["commit"] == shas[7] and v["culprit"] == shas[7]
    assert v["kind"] == "none" and v["low"] <= 0 < v["high"] < 1 and not s["confirmed"]
    said = capsys.readouterr()
    assert f"{shas[7][:12]} is not why bad is slow" in said.out and "NOT confirm" in said.err
    assert s["verdict"]["kind"] == "not confirmed" and st["exit"] == s["exit"] == 1
    report = (run / "report.md").read_text()
    assert report.index("**Revert check: reverting") < report.index("First bad commit")


@pytest.mark.parametrize("method", ["posterior", "git"])
def test_a_revert_that_does_not_apply_falls_back_to_the_recheck(env, capsys, method):
    """The culprit's lines changed again later: its revert conflicts on bad. One line says
    so; the culprit/parent re-check then says whether it is a step (the git method takes
    it now, the posterior's search took it), and the answer is not confirmed: a
    regression a later commit undid is a step too."""
    specs: list[dict[str, Any]] = [
        {"subject": f"commit {i}", "tps": FAST if i < 7 else SLOW} for i in range(1, 10)
    ]
    specs += [{"subject": "commit 10", "files": {"TPS": f"{SLOW}.0\n"}}]  # same tps
    specs += [{"subject": f"commit {i}"} for i in (11, 12)]
    shas = make_fake_kernel_repo(env["repo"], specs)
    code = kbisect(*args(env, shas[1], shas[-1], method))
    run, s, st = only_run(env)
    said = capsys.readouterr()
    line = f"the revert of {shas[7][:12]} does not apply on bad {shas[-1][:12]}"
    assert line in said.err and line in said.out
    assert s["verification"]["kind"] == "no-revert" and "share" not in s["verification"]
    assert s["recheck"]["culprit"] == shas[7] and s["recheck"]["parent"] == shas[6]
    assert code == 1 and not s["confirmed"] and s["recheck"]["confirmed"]
    report = (run / "report.md").read_text()
    assert f"{line}: {verify.UNVERIFIED}" in report
    assert ("Re-check with fresh samples" if method == "git" else "Re-check, fresh") in report
    assert st["verification"]["kind"] == "no-revert" and st["phase"] == "done"
    assert not list(run.glob("verify/*/*/samples/*.json"))  # nothing booted for it


def test_resume_in_the_middle_of_the_revert_check(env, monkeypatch, tmp_path):
    """Killed during the revert check, `--resume` goes on from its stored samples: only
    the killed boot is taken again."""
    shas = history(env["repo"], 10, 6)
    argv = args(env, shas[1], shas[-1], "posterior")
    reference = tmp_path / "reference"
    monkeypatch.setenv("KBISECT_RESULTS", str(reference))
    assert kbisect(*argv) == 0
    (ref,) = run_dirs(reference)
    total, checked = len(fake_calls(env["log"])), verify_boots(ref)
    assert 2 <= checked <= 2 * 10
    (tmp_path / "fake-state" / "calls.jsonl").unlink()

    monkeypatch.setenv("KBISECT_RESULTS", str(env["results"]))
    run, saved = killed_at(env, tmp_path, argv, total - checked + 2)  # its second boot
    assert saved.phase == "bisecting" and saved.verification is not None
    assert saved.verification.kind == "running" and saved.verification.culprit == shas[6]
    assert verify_boots(run) == 1
    fake(tmp_path, cv=0.05)
    assert kbisect("--resume") == 0
    _, s, st = only_run(env)
    assert st["phase"] == "done" and s["verification"]["kind"] == "all" and s["confirmed"]
    assert s["verification"]["culprit"] == shas[6]
    boots = len(fake_calls(env["log"]))
    assert boots == len(s["samples"]) + verify_boots(run) + 1  # the killed one again


def test_a_culprit_that_explains_part_of_the_gap_says_the_rest_is_elsewhere(env, capsys):
    """Two regressions that both stay (x0.7 at 4, x0.85 at 9): git names the first, whose
    revert restores about 69% of the gap on the log; the answer says so and exits 1."""
    specs: list[dict[str, Any]] = [{"subject": "commit 1", "tps": FAST, "files": with_factors()}]
    for i in range(2, 13):
        slow = {4: {"slow/a": "0.7\n"}, 9: {"slow/b": "0.85\n"}}.get(i, {})
        specs.append({"subject": f"commit {i}", "files": slow})
    shas = make_fake_kernel_repo(env["repo"], specs)
    assert kbisect(*args(env, shas[1], shas[-1], "git")) == 1
    run, s, _ = only_run(env)
    v = s["verification"]
    assert v["culprit"] == shas[4] and v["kind"] == "part" and 0 < v["low"] < v["high"] < 1
    explains = f"{shas[4][:12]} explains {v['share'] * 100:.0f}%; the rest is elsewhere"
    assert explains in capsys.readouterr().out and explains in (run / "report.md").read_text()
    assert not s["confirmed"] and s["verdict"]["kind"] == "not confirmed"
