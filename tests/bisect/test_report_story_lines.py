"""The posterior report's lines around the whole range: git's single answer's re-check
line and the replay log's caveat, from summaries written by hand."""

from __future__ import annotations

from typing import Any

from kbisect.bisect.report import answer, posterior

UNDECIDED = {"confirmed": False, "error": "no answer held the confidence: nothing re-checked"}


def step(commit: str, ratio: float, recheck: str | None) -> dict[str, Any]:
    return {
        "commit": commit,
        "subject": f"subject of {commit[:4]}",
        "ratio": ratio,
        "p": 0.99999,
        "recheck": recheck,
    }


def told(kind: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "p_single": 0.0, "steps": list(steps)}


def test_several_changes_all_confirmed_is_not_called_unconfirmed() -> None:
    story = told("several", step("a" * 40, 0.7, "confirmed"), step("b" * 40, 1.3, "confirmed"))
    [line, _] = answer._recheck(UNDECIDED, {"story": story, "confirmed": True})
    assert "not confirmed" not in line and "each is re-checked on its own" in line
    # the same first-bad answer without a confirmed story keeps the warning
    for s in ({"story": story, "confirmed": False}, {"story": None, "confirmed": True}):
        [line, _] = answer._recheck(UNDECIDED, s)
        assert "**The answer is not confirmed.**" in line
    single = told("single", step("a" * 40, 0.7, "confirmed"))
    [line, _] = answer._recheck(UNDECIDED, {"story": single, "confirmed": True})
    assert "**The answer is not confirmed.**" in line


def test_the_replay_log_caveat_names_every_change_as_comments() -> None:
    story = told("several", step("a" * 40, 0.7, "confirmed"), step("b" * 40, 1.3, None))
    text = posterior._log_caveat(story)
    lines = text.splitlines()
    assert all(line.startswith("#") for line in lines) and text.endswith("\n")
    assert "not the whole story" in lines[0]
    assert f"regression [{'a' * 40}]" in lines[2] and "re-check: confirmed" in lines[2]
    assert f"improvement [{'b' * 40}]" in lines[3] and "not re-checked" in lines[3]
    assert "x0.700" in lines[2] and "x1.300" in lines[3]
    assert "no change is located yet" in posterior._log_caveat(told("contradicted"))
    for quiet in (None, told("single", step("a" * 40, 0.7, "confirmed")), told("undecided")):
        assert posterior._log_caveat(quiet) == ""
