"""A bisection's state (kbisect/bisect/state.py): the typed Run reads every state.json
kbisect wrote, the committed examples' included, and writes the same keys and values."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from kbisect.bisect import state
from kbisect.bisect.posterior.story import ALONE, Change, Story
from kbisect.bisect.request import Options
from kbisect.bisect.state import Recheck, Run
from kbisect.core import reading
from kbisect.core.exceptions import EXIT_INFRA

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
WITH_STATE = sorted(f.parent.name for f in EXAMPLES.glob(f"*/{state.STATE_FILE}"))


@pytest.mark.parametrize("name", WITH_STATE)
def test_an_example_state_loads_and_saves_as_it_was(name: str, tmp_path: Path) -> None:
    run_dir = Path(shutil.copytree(EXAMPLES / name, tmp_path / name))
    saved = (run_dir / state.STATE_FILE).read_bytes()
    run = state.load(run_dir)
    assert run.phase == "done" and run.options.method == "posterior"
    assert run.bisect_t0 is not None and run.visited[:2] == [run.good, run.bad]
    assert run.answer is not None
    checked = {*run.rechecks, *([run.verification.culprit] if run.verification else [])}
    assert run.answer["candidates"][0]["commit"] in checked  # re-checked, or its revert
    state.save(run_dir, run)  # byte for byte: the story, re-checks, revert check typed
    assert (run_dir / state.STATE_FILE).read_bytes() == saved


def git_state(**more: object) -> dict[str, object]:
    """A state as the git method left it before the posterior existed."""
    options: dict[str, object] = {
        "tree": None,
        "good": "v1",
        "bad": "v2",
        "scenario": "smoke",
        "threshold": None,
        "higher_is_better": True,
        "append": "",
        "runs_min": 3,
        "runs_max": 10,
        "recheck_samples": 8,
        "configs": [],
        "arch": "x86_64",
    }
    return {
        "version": 1,
        "created": "20261101T000000Z",
        "options": options,
        "scenario": {"name": "smoke", "hash": "abc"},
        "tree": "/src/linux",
        "good": "a" * 40,
        "bad": "b" * 40,
        "store": "/results/store",
        "phase": "recheck",
        "threshold": 866.0,
        "threshold_source": "given",
        "bisect_log": "git bisect start\n",
        "endpoints": {"kind": "regression"},
        "kind": state.STATE_KIND,
        **more,
    }


def test_an_old_git_state_resumes_as_the_git_method(tmp_path: Path) -> None:
    (tmp_path / state.STATE_FILE).write_text(json.dumps(git_state(later_key=[1, 2])))
    run = state.load(tmp_path)
    assert run.options.method == "git" and run.options.references == 0
    assert run.phase == "recheck" and run.threshold == 866.0 and not run.escalated
    assert run.bisect_t0 is None and run.later == {"later_key": [1, 2]}
    written = run.as_dict()
    assert "visited" not in written and "recheck" not in written and "exit" not in written
    assert written["later_key"] == [1, 2]  # a key of a later kbisect is kept as it was
    assert written["options"]["method"] == "git"


def test_a_new_state_has_the_keys_it_always_had() -> None:
    opts = Options("/src", "v1", "v2", "smoke")
    run = Run(opts, {"name": "smoke", "hash": "h"}, Path("/src"), "a", "b", Path("/s"))
    first = "version created options scenario tree good bad store phase threshold bisect_log"
    assert sorted(run.as_dict()) == sorted(first.split())
    run.exit = 0
    assert run.as_dict()["exit"] == 0


def test_confirmed_needs_every_change_rechecked_and_not_partial() -> None:
    run = Run(Options("/src", "v1", "v2", "smoke"), {}, Path("/src"), "a", "b", Path("/s"))
    step = Change(("c4",), 0.99, 0.75, 0.7, 0.8, 1.0)
    told = run.story = Story("single", (step,), 0.97, 0.9, 0.01)
    assert not run.confirmed(0.95)
    run.rechecks = {"c4": Recheck("c3", "confirmed", confirmed=True)}
    assert run.confirmed(0.95)
    for doubt in ({"p_single": ALONE - 0.01}, {"kind": "contradicted"}, {"against": ("c7",)}):
        run.story = replace(told, **doubt)  # type: ignore[arg-type]
        assert not run.confirmed(0.95)
    run.rechecks["c4"].partial = True
    run.story = told
    assert not run.confirmed(0.95)
    # each of several changes is part of good -> bad by definition: partial is expected
    other = Change(("c9",), 0.97, 0.75, 0.7, 0.8, 1.0)
    run.story = Story("several", (step, other), 0.0, 0.9, 0.01)
    assert not run.confirmed(0.95)
    run.rechecks["c9"] = Recheck("c8", "confirmed", confirmed=True)
    assert run.confirmed(0.95)


def test_unknown_options_are_refused_in_one_line(tmp_path: Path) -> None:
    broken = git_state()
    broken["options"] = {**broken["options"], "no_such_option": 1}  # type: ignore[dict-item]
    (tmp_path / state.STATE_FILE).write_text(json.dumps(broken))
    with pytest.raises(reading.CorruptFile, match="its options do not parse") as info:
        state.load(tmp_path)
    assert info.value.exit_code == EXIT_INFRA and "run the same kbisect bisect again" in str(
        info.value
    )


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("good", 5, "good must be a string, got 5"),
        ("options.runs_min", -2, "options.runs_min must be at least 0, got -2"),
        ("options.confidence", math.nan, "options.confidence must be a finite number, got nan"),
        ("options", "x", 'options must be a table, got "x"'),
        ("options.sets", "a", 'options.sets must be a list, got "a"'),
        ("visited", {}, "visited must be a list, got {}"),
        ("options.threshold", True, "options.threshold must be a number, got true"),
        # a phase resume would pass over, rewriting the state and summary
        ("phase", "zzz", 'phase "zzz" is none of endpoints, bisecting, verifying, done'),
        ("phase", "recheck", 'phase "recheck" is none of endpoints, bisecting, verifying, done'),
        ("answer", None, "phase done without its answer"),
        # the rest's passes (rule.Rest), each checked as the verification is
        ("passes", "x", 'passes must be a list, got "x"'),
        ("passes", [3], "passes.0 must be a table, got 3"),
        (
            "passes",
            [{"answer": {}, "verification": {"culprit": 5}}],
            "passes.0.verification.culprit must be a string, got 5",
        ),
    ],
)
def test_a_state_with_a_wrong_field_names_it_and_how_to_recover(
    tmp_path: Path, field: str, value: object, problem: str
) -> None:
    data = json.loads((EXAMPLES / "demo-bisect-posterior" / state.STATE_FILE).read_text())
    *parents, last = field.split(".")
    node = data
    for part in parents:
        node = node[part]
    node[last] = value
    (tmp_path / state.STATE_FILE).write_text(json.dumps(data))
    with pytest.raises(reading.CorruptFile) as info:
        state.load(tmp_path)
    assert str(info.value) == f"{tmp_path}/state.json: {problem}; {state.RECOVER}"


@pytest.mark.parametrize(("phase", "recheck"), [("DONE", {"confirmed": True}), ("done", None)])
def test_a_git_state_of_no_phase_it_has_is_damaged(
    tmp_path: Path, phase: str, recheck: object
) -> None:
    (tmp_path / state.STATE_FILE).write_text(json.dumps(git_state(phase=phase, recheck=recheck)))
    with pytest.raises(reading.CorruptFile, match="phase") as info:
        state.load(tmp_path)
    assert info.value.exit_code == EXIT_INFRA
