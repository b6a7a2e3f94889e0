"""The fake target's machine (kbisect/targets/fake/guest.py), a script of its own: its
command line parsed once into a Call. Its boots: tests/measure/test_sample.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kbisect.targets.fake import guest


def test_the_command_line_is_parsed_once_into_a_frozen_call() -> None:
    argv = ["--settings", "/s.json", "--image", "/k/bzImage", "--boot-dir", "/r/boots/1-A"]
    call = guest.parse([*argv, "--commit", "abc", "--append", "a=1", "--append", "b"])
    assert call == guest.Call(
        settings=Path("/s.json"),
        image=Path("/k/bzImage"),
        boot_dir=Path("/r/boots/1-A"),
        commit="abc",
        subject="",
        append=("a=1", "b"),
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.commit = "other"  # type: ignore[misc]
    settings = {"script": [], "boot_fail": ["ab"], "mode": "ok", "append_tps": {"b": 7}}
    assert guest.mode_of(settings, 0, call) == "panic"  # a commit scripted to fail
    assert guest.base_tps(settings, call) == 7.0  # an --append scripted to a tps
    fingerprint = guest.fingerprint(call, 0.25)
    assert fingerprint["cmdline"] == "a=1 b"
    assert fingerprint["cpu_during_runs"]["steal_share"] == 0.25


@pytest.mark.parametrize(
    ("setting", "append", "model"),
    [
        ("none", ("preempt=full",), "none"),  # a model: whatever was asked
        ("lazy", (), "lazy"),
        ("asked", ("preempt=full", "preempt=lazy"), "lazy"),  # the last token wins
        ("asked", ("x=1",), "none"),
        ("unknown", ("preempt=none",), None),
    ],
)
def test_the_preemption_model_it_reports(
    setting: str, append: tuple[str, ...], model: str | None
) -> None:
    call = guest.parse(["--settings", "/s", "--image", "/i", "--boot-dir", "/b"])
    call = dataclasses.replace(call, append=append)
    got = guest.preempt_model({"preempt": setting}, call)
    assert got == model
    fingerprint = guest.fingerprint(call, 0.0, got)
    assert (fingerprint["preempt"], fingerprint["preempt_source"]) == (
        model,
        "debugfs" if model else None,
    )
