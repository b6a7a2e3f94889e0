"""The preemption model asked for against the one in effect (kbisect/measure/preempt.py),
pure, then through `kbisect run` and `kbisect compare` on the fake target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbisect.bisect.report import files, markdown
from kbisect.commands import cli
from kbisect.compare import report
from kbisect.compare import text as compare_text
from kbisect.core.exceptions import EXIT_OK
from kbisect.measure import preempt, results
from kbisect.measure.record import Sample
from kbisect.study import analysis
from tests.fakes import ab_compare_argv, fake_image, fake_target

# -- asked ------------------------------------------------------------------------------


def test_asked_on_the_command_line_wins_over_the_fragment() -> None:
    assert preempt.asked(
        ["quiet", "preempt=none"], ["base/core.config", "preempt-full.config"]
    ) == (
        "none",
        "preempt=none on the command line",
    )


def test_the_last_preempt_token_wins() -> None:
    assert preempt.from_cmdline(["preempt=full", "x=1", "preempt=lazy"]) == "lazy"


def test_asked_by_the_fragment_alone() -> None:
    names = ["base/core.config", "arch/x86_64.config", "preempt-voluntary.config"]
    assert preempt.asked([], names) == ("voluntary", "--config preempt-voluntary")


def test_a_fragment_given_as_a_path_names_its_model() -> None:
    assert preempt.from_fragments(["/home/me/preempt-lazy.config"]) == "lazy"


def test_asked_nothing() -> None:
    assert preempt.asked(["x=1"], ["base/core.config", "debug-sched.config"]) is None
    assert preempt.from_fragments(["preempt-bogus.config"]) is None


def test_read_config(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("# header\nCONFIG_PREEMPT_DYNAMIC=y\n# CONFIG_PREEMPT_NONE is not set\n")
    assert preempt.read_config(path) == {"CONFIG_PREEMPT_DYNAMIC": "y"}
    assert preempt.read_config(tmp_path / "absent") == {}


# -- effective against asked --------------------------------------------------------------

LAZY_72 = {"preempt": "lazy", "preempt_source": "debugfs", "uname_r": "7.2.13-amd64"}
DYNAMIC_LAZY = {"CONFIG_PREEMPT_DYNAMIC": "y", "CONFIG_ARCH_HAS_PREEMPT_LAZY": "y"}


def test_none_asked_on_72_got_lazy_says_both_models_and_why() -> None:
    record = preempt.check(["preempt=none"], [], DYNAMIC_LAZY, LAZY_72)
    assert record is not None
    text = preempt.message("side A", record)
    assert text == (
        "side A asked for preempt none (preempt=none on the command line) but its kernel "
        "ran lazy, read from debugfs (since 7.0, 7dadeaa6e851, a kernel with "
        "ARCH_HAS_PREEMPT_LAZY refuses none and keeps its default): its numbers measure "
        "lazy, not none"
    )


def test_without_the_config_the_release_tells_the_refusal() -> None:
    record = preempt.check(["preempt=voluntary"], [], {}, LAZY_72)
    assert record is not None and record["dynamic"] is None
    assert "refuses voluntary" in (preempt.message("x", record) or "")
    older = {**LAZY_72, "preempt": "full", "uname_r": "6.12.48"}
    assert "refuses" not in (
        preempt.message("x", preempt.check(["preempt=none"], [], {}, older)) or ""
    )


def test_no_preempt_dynamic_ignores_the_command_line() -> None:
    config = {"CONFIG_PREEMPT_VOLUNTARY": "y"}
    fp = {"preempt": "voluntary", "preempt_source": "kmsg", "uname_r": "6.1.0"}
    text = preempt.message("side B", preempt.check(["preempt=full"], [], config, fp))
    assert text is not None
    assert "ran voluntary, read from kmsg (built without PREEMPT_DYNAMIC" in text


def test_got_what_was_asked_says_nothing() -> None:
    fp = {"preempt": "full", "preempt_source": "debugfs", "uname_r": "6.12.0"}
    assert preempt.message("A", preempt.check(["preempt=full"], [], {}, fp)) is None


def test_nothing_asked_says_nothing_and_stores_nothing() -> None:
    assert preempt.check(["x=1"], ["base/core.config"], DYNAMIC_LAZY, LAZY_72) is None
    assert preempt.message("A", None) is None


def test_a_boot_without_a_fingerprint_is_not_judged() -> None:
    assert preempt.check(["preempt=none"], [], {}, None) is None
    assert preempt.check(["preempt=none"], [], {}, {}) is None


def test_unknown_is_said_as_unknown_not_as_a_mismatch() -> None:
    fp = {"preempt": None, "preempt_source": None, "uname_r": "6.12.0"}
    text = preempt.message("side A", preempt.check([], ["preempt-none.config"], {}, fp))
    assert text is not None
    assert "the model in effect is unknown" in text
    assert "--config preempt-none" in text
    assert "ran" not in text and "not none" not in text


@given(
    asked=st.sampled_from(preempt.MODELS),
    got=st.sampled_from([*preempt.MODELS, None]),
    dynamic=st.sampled_from([True, False, None]),
    release=st.sampled_from(["6.1.0", "7.2.13", None]),
)
def test_a_message_exactly_when_the_models_differ_or_one_is_unknown(
    asked: str, got: str | None, dynamic: bool | None, release: str | None
) -> None:
    config = {} if dynamic is None else {"CONFIG_PREEMPT_DYNAMIC": "y" if dynamic else "n"}
    fp = {"preempt": got, "preempt_source": "debugfs" if got else None, "uname_r": release}
    text = preempt.message("side A", preempt.check([f"preempt={asked}"], [], config, fp))
    assert (text is None) == (got == asked)
    if text is not None:
        assert text.startswith("side A asked for preempt " + asked)
        assert ("unknown" in text) == (got is None)


def test_first_warnings_one_line_per_label_with_how_many_boots() -> None:
    bad = preempt.check(["preempt=none"], [], {}, LAZY_72)
    good = preempt.check(["preempt=full"], [], {}, {**LAZY_72, "preempt": "full"})
    samples = [
        Sample({"label": "A", "preempt": bad}),
        Sample({"label": "B", "preempt": good}),
        Sample({"label": "A", "preempt": bad}),
        Sample({"label": "A", "preempt": None}),
    ]
    [line] = preempt.first_warnings(samples, [("A", "side A"), ("B", "side B")])
    assert line.startswith("side A asked for preempt none")
    assert line.endswith("(2 of 3 boots)")


# -- on the fake target -----------------------------------------------------------------


def run_compare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, *sides: str) -> Path:
    """A compare on a fake target that reports `model`, its sides' --append `sides`."""
    argv = ab_compare_argv(fake_image(tmp_path / "k"), target(tmp_path, monkeypatch, model))
    argv[argv.index("x=1")], argv[argv.index("x=2")] = sides
    assert cli.main([*argv, "--out", str(tmp_path / "run")]) in (EXIT_OK, 1)
    return tmp_path / "run"


def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str) -> Path:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    return fake_target(tmp_path, preempt=model)


def run_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str) -> list[str]:
    """`kbisect run` of the smoke scenario on a fake target that reports `model`."""
    image = fake_image(tmp_path / "k")
    where = target(tmp_path, monkeypatch, model)
    return ["run", "--kernel", str(image), "--scenario", "smoke", "--target", str(where)]


def compare_run(out: Path) -> report.Run:
    return report.load(out, report.load_summary(out), None)


def test_compare_flags_the_side_that_did_not_get_its_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_compare(tmp_path, monkeypatch, "lazy", "preempt=none", "preempt=lazy")
    err = capsys.readouterr().err
    said = [x for x in err.splitlines() if "asked for preempt" in x]
    assert said == [
        "kbisect: warning: side A asked for preempt none (preempt=none on the command line) "
        "but its kernel ran lazy, read from debugfs: its numbers measure lazy, not none"
    ]
    stored = [s.preempt for s in results.load_samples(out) if s.label == "A"]
    assert [s and s["effective"] for s in stored] == ["lazy"] * 3
    run = compare_run(out)
    [line] = report.preempt_lines(run)
    assert line.startswith("side A asked for preempt none (preempt=none on the command line)")
    assert line.endswith("not none (all 3 boots)")
    md = (out / "report.md").read_text()
    assert f"- {line}" in md
    assert "asked for preempt none" in " ".join(compare_text.render(run).split())
    (out / "report.md").unlink()
    assert cli.main(["report", str(out)]) == EXIT_OK
    assert (out / "report.md").read_text() == md


def test_compare_that_got_what_it_asked_for_warns_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_compare(tmp_path, monkeypatch, "asked", "preempt=none", "preempt=full")
    assert "asked for preempt" not in capsys.readouterr().err
    assert report.preempt_lines(compare_run(out)) == []
    fps = {s.label: s.fingerprint["preempt"] for s in results.load_samples(out)}
    assert fps == {"A": "none", "B": "full"}


def test_run_prints_what_was_asked_and_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = run_argv(tmp_path, monkeypatch, "unknown")
    assert cli.main([*argv, "--append", "preempt=none", "--runs", "2"]) == EXIT_OK
    out, err = capsys.readouterr()
    assert out.count("(preempt=unknown, asked none)") == 2
    warned = [x for x in err.splitlines() if "asked for preempt" in x]
    assert len(warned) == 2  # at the first sample, then the run's summary of it
    assert warned[0].startswith("kbisect: warning: the boot asked for preempt none")
    assert warned[1].endswith("line in its log) (all 2 boots)")


def test_bisect_summary_names_the_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = run_argv(tmp_path, monkeypatch, "lazy")
    store, commit = tmp_path / "store", "c0ffee" * 6 + "abcd"
    assert cli.main([*argv, "--append", "preempt=none", "--out", str(store / commit)]) == 0
    capsys.readouterr()
    [line] = files.preempt_warnings(store, [commit, commit, "f" * 40])
    assert line.startswith(f"revision {commit[:12]} asked for preempt none")
    s = {"preempt": [line], "options": {}, "recheck": {}}
    assert markdown.preempt_lines(s) == [f"**Warning: {line}.**", ""]
    assert markdown.preempt_lines({}) == []


def test_study_analysis_names_the_cell() -> None:
    definition: dict[str, Any] = {
        "kernels": [{"label": "7.2"}],
        "cells": [{"label": "preempt=none"}],
        "axes": [],
    }
    bad = preempt.check(["preempt=none"], [], {}, LAZY_72)
    samples = [
        Sample(
            {"label": "k0-c0", "status": "ok", "tps": 10.0 + i, "preempt": bad, "fingerprint": {}}
        )
        for i in range(3)
    ]
    a = analysis.analyze(definition, samples)
    assert a.warnings[0].startswith("7.2 in preempt=none asked for preempt none")


def test_the_schema_requires_every_field_of_the_check() -> None:
    record = preempt.check(["preempt=none"], [], DYNAMIC_LAZY, LAZY_72)
    schema = json.loads((Path(results.__file__).parent / "schemas" / "sample.json").read_text())
    assert set(schema["properties"]["preempt"]["required"]) == set(record or {})
