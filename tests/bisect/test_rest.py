"""Bisecting the rest (rule.Rest): the answer's revert restores part of the gap, or none
of it, and the posterior search goes on at once with it reverted on every revision that
contains it; end to end on the fake tree and target (real git reverts, real make, real
state.json)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kbisect.commands import cli
from tests.bisect import test_posterior_method
from tests.bisect.test_bisect import FAST, kbisect, run_dirs
from tests.bisect.test_posterior_method import killed_at
from tests.bisect.test_step import fake
from tests.bisect.test_verify import args, only_run, with_factors
from tests.fakes import fake_calls, make_fake_kernel_repo

env = test_posterior_method.env  # the fixture: the fake tree and target, 5% noise


def two_steps(repo: Path) -> list[str]:
    """Two regressions that both stay: x0.7 at 4 and x0.8 at 9 (each revert removes its
    own factor)."""
    specs: list[dict[str, Any]] = [{"subject": "commit 1", "tps": FAST, "files": with_factors()}]
    for i in range(2, 13):
        slow = {4: {"slow/a": "0.7\n"}, 9: {"slow/b": "0.8\n"}}.get(i, {})
        specs.append({"subject": f"commit {i}", "files": slow})
    return make_fake_kernel_repo(repo, specs)


def test_part_then_the_rest_found_with_it_reverted_then_all(env, capsys):
    """The first answer explains part of the gap; the rest, bisected with it reverted,
    names the other regression, whose revert (the first reverted too) restores the rest:
    exit 0, both listed with their figures."""
    shas = two_steps(env["repo"])
    code = kbisect(*args(env, shas[1], shas[-1], "posterior"))
    run, s, st = only_run(env)
    said = capsys.readouterr()
    (first,) = s["passes"]
    found = {first["culprit"], s["verification"]["culprit"]}
    assert found == {shas[4], shas[9]}, said.err
    # each boot of the rest's endpoint check: its tps, the boots left at most, their time
    gap = [x for x in said.err.splitlines() if "the rest's good" in x or "the rest's bad" in x]
    assert gap and all(re.search(r"at most \d+ a side: \d+ boots, ~\d+ s left", x) for x in gap)
    # the rest's boots go on from the first pass's and its endpoint check's: the revert
    # check's samples it reads as bad's are not its boots (nor charged to --max-boots)
    lines = said.err.splitlines()
    at = [i for i, x in enumerate(lines) if x in gap]
    nums = [(i, int(m[1])) for i, x in enumerate(lines) if (m := re.search(r"\bboot (\d+) of", x))]
    before = [n for i, n in nums if i < at[0]]
    after = [n for i, n in nums if i > at[-1]]
    assert before and after and after[0] == before[-1] + len(gap) + 1, (before, len(gap), after)
    assert first["kind"] == "part" and first["low"] > 0 and first["high"] < 1
    last = s["verification"]
    assert last["kind"] == "all" and last["without"] == [first["culprit"]]
    assert code == 0 and s["confirmed"] and st["exit"] == 0
    x, y = first["culprit"][:12], last["culprit"][:12]
    assert s["first_bad"]["commit"] == last["culprit"]
    explains = f"{x} explains {first['share'] * 100:.0f}%; the rest is elsewhere"
    rest = f"reverting {y} on bad {shas[-1][:12]} ({x} reverted) restores"
    report = (run / "report.md").read_text()
    for text in (said.out, report):
        assert explains in text and rest in text and text.index(explains) < text.index(rest)
    # the rest's revisions with x were built with it reverted: their own store folders
    store = Path(st["store"])
    own = [d for d in store.iterdir() if d.is_dir() and d.name not in shas]
    assert own and all(list(d.glob("samples/*.json")) for d in own)
    assert not list(store.glob(f"{shas[-1]}/samples/*.json"))[6:]  # bad: its endpoint boots
    for form in ("text", "mbox"):
        assert cli.main(["report", str(run), "--format", form]) == 0
        shown = " ".join(capsys.readouterr().out.split())  # the text wraps its lines
        assert explains in shown and rest in shown


def test_none_then_the_rest_names_the_commit_that_is_why_bad_is_slow(env, capsys):
    """A regression at 7; commit 10 fixes it and, in other code, slows tps by as much
    again: reverting 7 on bad restores nothing (never exit 0 on it); the rest, with 7
    reverted from 7 on, names 10, whose revert restores the rest: exit 0 on 10."""
    specs: list[dict[str, Any]] = [{"subject": "commit 1", "tps": FAST, "files": with_factors()}]
    for i in range(2, 13):
        files = {7: {"slow/a": "0.75\n"}, 10: {"fixed/a": "\n", "slow/b": "0.75\n"}}
        specs.append({"subject": f"commit {i}", "files": files.get(i, {})})
    shas = make_fake_kernel_repo(env["repo"], specs)
    code = kbisect(*args(env, shas[1], shas[-1], "posterior"))
    run, s, _ = only_run(env)
    said = capsys.readouterr()
    (first,) = s["passes"]
    assert first["culprit"] == shas[7] and first["kind"] == "none", said.err
    assert s["verification"]["culprit"] == shas[10] and s["verification"]["kind"] == "all"
    assert s["first_bad"]["commit"] == shas[10] and code == 0 and s["confirmed"]
    assert f"{shas[7][:12]} is not why bad is slow" in said.out
    assert f"({shas[7][:12]} reverted) restores" in (run / "report.md").read_text()


def test_resume_in_the_middle_of_the_rest(env, monkeypatch, tmp_path):
    """Killed at the rest's last search boot, `--resume` rebuilds the rest (its revert
    made again, the reverted revisions' samples read from their own folders) and ends
    as the uninterrupted run did: only the killed boot is taken again."""
    shas = two_steps(env["repo"])
    argv = args(env, shas[1], shas[-1], "posterior")
    reference = tmp_path / "reference"
    monkeypatch.setenv("KBISECT_RESULTS", str(reference))
    fake(tmp_path, cv=0.05)
    assert kbisect(*argv) == 0
    (ref,) = run_dirs(reference)
    want = json.loads((ref / "summary.json").read_text())
    total = len(fake_calls(env["log"]))
    last = want["verification"]["culprit"]
    checked = len(list(ref.glob(f"verify/{last}/*/samples/*.json")))
    (tmp_path / "fake-state" / "calls.jsonl").unlink()

    monkeypatch.setenv("KBISECT_RESULTS", str(env["results"]))
    _, saved = killed_at(env, tmp_path, argv, total - checked)
    assert saved.phase == "bisecting" and len(saved.passes) == 1
    assert saved.passes[0].verification.culprit == want["passes"][0]["culprit"]
    fake(tmp_path, cv=0.05)
    assert kbisect("--resume") == 0
    _, s, st = only_run(env)
    assert s["passes"] == want["passes"] and s["verification"]["culprit"] == last
    assert s["confirmed"] and st["phase"] == "done"
    assert len(fake_calls(env["log"])) == total + 1  # the killed boot again
