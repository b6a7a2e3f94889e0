"""The steps demo history (two synthetic regressions and a fix between them) on small
fake trees, and `kbisect demo --variant`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.source import demo, tree
from tests.fakes import git
from tests.source.test_demo import AF_UNIX, function_of, tiny_default_tree

CHECKOUT = Path(__file__).resolve().parents[2]

# The fake af_unix.c with unix_stream_sendmsg()'s successful return (the second delay's
# anchor) after its last line.
_TAIL = "\twait_for_unix_gc(scm.fp);\n}\n"
AF_UNIX_STEPS = (
    AF_UNIX[: AF_UNIX.rindex(_TAIL)]
    + "\twait_for_unix_gc(scm.fp);\n\n\tscm_destroy(&scm);\n\n\treturn sent;\n}\n"
)
PLANTED = [(10, demo.REGRESSION_1, "regression"), (15, demo.FIX_1, "fix")]
PLANTED += [(19, demo.REGRESSION_2, "regression")]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kbisect's cache (its scratch repositories) under the test's directory."""
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))


def steps_tree(path: Path) -> Path:
    return tiny_default_tree(path, AF_UNIX_STEPS)


# -- the edits -------------------------------------------------------------------------


def test_steps_are_24_edits_with_three_labeled_changes_at_40_60_80_percent() -> None:
    edits = demo.STEPS.edits
    assert len(edits) == 24 and len({e.subject for e in edits}) == 24
    assert [(edits.index(e) + 1, e, kind) for _, e, kind in PLANTED] == PLANTED
    assert [(c.edit, c.kind) for c in demo.STEPS.changes] == [(e, k) for _, e, k in PLANTED]
    assert "SYNTHETIC REGRESSION 1" in demo.REGRESSION_1.subject
    assert "SYNTHETIC FIX of 1" in demo.FIX_1.subject
    assert "SYNTHETIC REGRESSION 2" in demo.REGRESSION_2.subject
    planted = {e for _, e, _ in PLANTED}
    harmless = [e for e in edits if e not in planted]
    assert all(e.old == "" and "udelay" not in e.new for e in harmless)
    assert all("SYNTHETIC" not in e.subject for e in harmless)
    assert not {e.subject for e in edits} & {e.subject for e in demo.EDITS}  # told apart
    for regression in (demo.REGRESSION_1, demo.REGRESSION_2):
        assert f"udelay({demo.DELAY_US})" in regression.new  # the default's known size
        assert "SYNTHETIC REGRESSION" in regression.new  # labeled in the source too


def test_steps_edits_apply_in_turn_in_unix_stream_sendmsg(tmp_path: Path) -> None:
    path = tmp_path / "net/unix/af_unix.c"
    path.parent.mkdir(parents=True)
    path.write_text(AF_UNIX_STEPS)
    demo.apply(tmp_path, demo.INCLUDE)
    demo.apply(tmp_path, demo.REGRESSION_1)
    text = path.read_text()
    assert text.count("udelay(") == 1 and "SYNTHETIC REGRESSION 1" in text
    assert function_of(text, "udelay(") == "unix_stream_sendmsg"
    assert text.index("udelay(") < text.rindex("scm_send(")  # before scm_send
    demo.apply(tmp_path, demo.FIX_1)
    fixed = path.read_text()
    assert fixed.replace("#include <linux/delay.h>\n", "") == AF_UNIX_STEPS  # removed
    demo.apply(tmp_path, demo.REGRESSION_2)
    text = path.read_text()
    assert text.count("udelay(") == 1 and "SYNTHETIC REGRESSION 2" in text
    assert function_of(text, "udelay(") == "unix_stream_sendmsg"
    assert text.index("udelay(") > text.rindex("scm_send(")  # another hunk: at the return
    assert text.replace(demo.REGRESSION_2.new, demo.REGRESSION_2.old) == fixed


def test_default_variant_is_the_original_history() -> None:
    assert demo.DEFAULT.edits == tuple(demo.EDITS) and demo.DEFAULT.branch == demo.BRANCH
    assert [(c.edit, c.kind) for c in demo.DEFAULT.changes] == [(demo.REGRESSION, "regression")]
    assert demo.STEPS.branch == "kbisect-demo-steps" != demo.BRANCH
    assert demo.STEPS.edits_id != demo.DEFAULT.edits_id


# -- the branch ------------------------------------------------------------------------


def test_create_steps_makes_a_reproducible_branch_beside_the_default(tmp_path: Path) -> None:
    repo = steps_tree(tmp_path / "one")
    default = demo.create(repo)
    data = demo.create(repo, demo.STEPS)
    base, head = data["base"], data["head"]
    assert base == git(repo, "rev-parse", tree.DEFAULT_TAG)
    assert head == git(repo, "rev-parse", demo.STEPS.branch)
    assert set(data) == {"variant", "base", "head", "branch", "edits", "changes"}
    assert (data["variant"], data["branch"]) == ("steps", "kbisect-demo-steps")
    commits = git(repo, "rev-list", "--reverse", f"{base}..{head}").split()
    assert len(commits) == 24
    assert [(c["position"], c["kind"], c["subject"], c["commit"]) for c in data["changes"]] == [
        (n, kind, edit.subject, commits[n - 1]) for n, edit, kind in PLANTED
    ]
    for change in data["changes"]:
        touched = git(repo, "diff", "--name-only", f"{change['commit']}^", change["commit"])
        assert touched == "net/unix/af_unix.c"

    def delays(rev: str) -> int:
        return git(repo, "show", f"{rev}:net/unix/af_unix.c").count("udelay(")

    assert [delays(c) for c in commits] == [0] * 9 + [1] * 5 + [0] * 4 + [1] * 6
    assert json.loads((repo / ".git/kbisect-demo-steps.json").read_text()) == data
    assert demo.create(repo) == default  # the default history is untouched
    assert git(repo, "rev-parse", demo.BRANCH) == default["head"]
    assert git(repo, "rev-parse", "HEAD") == base  # the checkout did not move
    assert demo.create(repo, demo.STEPS) == data  # once
    other = demo.create(steps_tree(tmp_path / "two"), demo.STEPS)
    assert other == data  # the same ids on another machine


# -- the command -----------------------------------------------------------------------


def test_demo_variant_steps_json_and_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = steps_tree(tmp_path / "one")
    monkeypatch.setattr(tree, "default_tree", lambda: repo)
    assert cli.main(["demo", "--variant", "steps", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == demo.create(repo, demo.STEPS)
    assert cli.main(["demo", "--variant", "steps"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"base={data['base']}", f"head={data['head']}"]
    assert lines[2:] == [f"{c['kind']}={c['commit']} {c['subject']}" for c in data["changes"]]
    assert cli.main(["demo", "--json"]) == 0  # the default: its keys as before
    assert set(json.loads(capsys.readouterr().out)) == {
        "base",
        "head",
        "regression",
        "branch",
        "edits",
    }


def test_unknown_variant_is_one_line_and_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kbisect", "demo", "--variant", "nope"],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "--variant" in proc.stderr and "steps" in proc.stderr


# -- the heavy variant -------------------------------------------------------------------


def test_heavy_is_the_default_history_with_a_longer_delay(tmp_path: Path) -> None:
    heavy = demo.HEAVY
    assert len(heavy.edits) == len(demo.EDITS) == 16
    differs = [i for i, (a, b) in enumerate(zip(heavy.edits, demo.EDITS, strict=True)) if a != b]
    assert differs == [demo.EDITS.index(demo.REGRESSION)]  # only the regression differs
    assert f"udelay({demo.HEAVY_DELAY_US})" in demo.HEAVY_REGRESSION.new
    assert demo.HEAVY_DELAY_US > demo.DELAY_US
    assert "SYNTHETIC REGRESSION" in demo.HEAVY_REGRESSION.subject
    assert heavy.edits_id not in {demo.DEFAULT.edits_id, demo.STEPS.edits_id}
    repo = steps_tree(tmp_path / "one")
    default = demo.create(repo)
    data = demo.create(repo, heavy)
    assert (data["variant"], data["branch"]) == ("heavy", "kbisect-demo-heavy")
    commits = git(repo, "rev-list", "--reverse", f"{data['base']}..{data['head']}").split()
    [change] = data["changes"]
    assert (change["kind"], change["position"], change["commit"]) == ("regression", 10, commits[9])
    shown = git(repo, "show", f"{change['commit']}:net/unix/af_unix.c")
    assert shown.count(f"udelay({demo.HEAVY_DELAY_US})") == 1
    assert function_of(shown, "udelay(") == "unix_stream_sendmsg"
    assert demo.create(repo) == default and data["head"] != default["head"]


# -- the two variant ---------------------------------------------------------------------


def test_two_has_two_regressions_that_both_persist_to_the_head(tmp_path: Path) -> None:
    two = demo.TWO
    assert len(two.edits) == 24
    assert two.edits_id not in {v.edits_id for v in demo.VARIANTS.values() if v is not two}
    repo = steps_tree(tmp_path / "one")
    data = demo.create(repo, two)
    assert (data["variant"], data["branch"]) == ("two", "kbisect-demo-two")
    commits = git(repo, "rev-list", "--reverse", f"{data['base']}..{data['head']}").split()
    found = [(c["kind"], c["position"], c["commit"]) for c in data["changes"]]
    assert found == [("regression", 8, commits[7]), ("regression", 17, commits[16])]
    head = git(repo, "show", f"{data['head']}:net/unix/af_unix.c")
    assert head.count(f"udelay({demo.TWO_DELAY_US})") == 2  # both persist
    assert function_of(head, "udelay(") == "unix_stream_sendmsg"
    between = git(repo, "show", f"{commits[10]}:net/unix/af_unix.c")
    assert between.count(f"udelay({demo.TWO_DELAY_US})") == 1
