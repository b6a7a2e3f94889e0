"""Every numeric or structured option goes through a typed helper of commands/options.py:
a bad value (nan, inf, negative, out of range, not a number) is one line and exit 2 while
the command line is parsed, before any work."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbisect.commands import cli, compare, options
from kbisect.core.exceptions import UserError
from kbisect.study import spec

PARSER = cli.build_parser()


def parsers(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*words, name))


def typed_options() -> Iterator[tuple[tuple[str, ...], str, argparse.Action]]:
    for words, parser in parsers(PARSER):
        for action in parser._actions:
            if action.option_strings and action.type is not None:
                yield words, action.option_strings[-1], action


def test_no_option_is_a_bare_int_or_float() -> None:
    """int and float take nan, inf, negatives and 1e999 alike: every number goes through
    options.count/seed/fraction/confidence/positive/hours instead."""
    bare = [f"{' '.join(w)} {o}" for w, o, a in typed_options() if a.type in (int, float)]
    assert bare == []


NUMERIC = [
    (w, o)
    for w, o, a in typed_options()
    if a.type not in (int, float)
    and getattr(a.type, "__name__", "")
    not in ("Path", "str", "out_path", "line", "label", "tag", "name", "target")  # not a number
]


@pytest.mark.parametrize(("words", "option"), NUMERIC, ids=[" ".join((*w, o)) for w, o in NUMERIC])
@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "-1", "1e999", "x", "", "1/0"])
def test_a_bad_number_is_one_line_and_exit_2(
    words: tuple[str, ...], option: str, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        PARSER.parse_args([*words, f"{option}={bad}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0], err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["study", "--min-effect", "nan"], "nan is not a finite number"),
        (["study", "--min-effect", "1"], "1 is not in [0, 1)"),
        (["study", "--budget", "nan"], "nan is not a finite number"),
        (["study", "--budget", "inf"], "inf is not a finite number"),
        (["study", "--budget", "-1"], "-1 must be above 0"),
        (["study", "--budget", "0"], "0 must be above 0"),
        (["study", "--budget", "1e6"], "more than a year"),
        (["study", "--share", "3/2"], "expected I/N with 1 <= I <= N"),
        (["study", "--runners", "0"], "0 is not in 1..1000"),
        (["study", "--seed", "-1"], "-1 is not in 0.."),
        (["compare", "--seed", "nan"], "'nan' is not a whole number"),
        (["bisect", "--confidence", "1.5"], "1.5 is not between 0.5 and 1"),
        (["bisect", "--confidence", "nan"], "nan is not a finite number"),
        (["bisect", "--confidence", "0.5"], "0.5 is not between 0.5 and 1"),
        (["emu", "up", "--cpus", "0"], "0 is not in 1..1024"),
        (["image", "--pg-major", "-3"], "-3 is not in 10..99"),
        (["rc", "record", "--tps", "nan"], "nan is not a finite number"),
    ],
)
def test_the_audited_values(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        PARSER.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("parse", "text", "value"),
    [
        (options.hours, "2", 2.0),
        (options.confidence, "0.95", 0.95),
        (options.share, "2/3", "2/3"),
        (options.seed, "0", 0),
        (options.fraction, "0", 0.0),
    ],
)
def test_good_values_pass(parse: object, text: str, value: object) -> None:
    assert callable(parse) and parse(text) == value


def test_patch_options_repeat_in_order_and_are_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sides = ["--patch", "both.diff", "--patch-b", "b1.patch", "--patch-b", "b2.mbox"]
    ns = PARSER.parse_args(["compare", "--base", "v1", "--scenario", "smoke", *sides])
    given = compare.spec(ns)
    assert given.patch == (tmp_path / "both.diff",) and given.patch_a == ()
    assert given.patch_b == (tmp_path / "b1.patch", tmp_path / "b2.mbox")
    for words in (["build"], ["bisect"], ["bisect-step", "--scenario", "smoke"]):
        ns = PARSER.parse_args([*words, "--patch", "a.diff", "--patch", "b.diff"])
        assert options.paths(ns.patch) == (tmp_path / "a.diff", tmp_path / "b.diff")


RULED = [
    (w, o)
    for w, o, a in typed_options()
    if getattr(a.type, "__name__", "") in ("line", "label", "tag", "name", "target")
]


@pytest.mark.parametrize(("words", "option"), RULED, ids=[" ".join((*w, o)) for w, o in RULED])
@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\x00b", "a\x1bb", "a\x7fb"])
def test_a_control_character_in_a_ruled_option_is_one_line_and_exit_2(
    words: tuple[str, ...], option: str, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kernel command line, a setting, a label, a tag, a name, --target: no control
    character (a newline went through to the boot)."""
    with pytest.raises(SystemExit) as exc:
        PARSER.parse_args([*words, option, bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0], err
    assert option == "--name" or "control character" in err[0], err  # a name: its letters


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--append", "x=\udcff"],
        ["compare", "--label-a", "\udce9"],
        ["run", "--scenario", "/tmp/s\udcffmoke.toml"],
        ["study", "\udcff.toml"],
        ["rc", "record", "--tag", "v6.13-rc\udcff"],
    ],
)
def test_text_that_is_not_utf8_anywhere_in_argv_is_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not valid UTF-8" in err[0] and "\\udc" in err[0], err


@pytest.mark.parametrize("value", [0, 0.02, 0.5, 0.999, 1, 1.0, 1.5, -0.01, 100])
def test_a_study_files_min_effect_obeys_the_min_effect_rule(value: float) -> None:
    """One rule: the study file refuses exactly what --min-effect refuses (1.0 was taken,
    and a 0.69x step reported as no significant step)."""
    data = {"name": "s", "scenario": "smoke", "kernels": {"revs": ["v1"]}, "min_effect": value}
    try:
        options.fraction(str(value))
        option_ok = True
    except argparse.ArgumentTypeError:
        option_ok = False
    if option_ok:
        assert spec.from_dict(data, "s.toml").min_effect == value
    else:
        with pytest.raises(spec.StudyFileError, match=r"^s.toml: min_effect is not in \[0, 1\)"):
            spec.from_dict(data, "s.toml")


def test_a_study_image_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    data = {"name": "s", "scenario": "smoke", "kernels": {"images": [str(tmp_path / "typo")]}}
    with pytest.raises(spec.StudyFileError, match=r"kernels\.images names no such image"):
        spec.from_dict(data, "s.toml")


def test_two_sides_with_one_label_are_refused() -> None:
    ns = PARSER.parse_args(["compare", "--kernel", "k", "--scenario", "smoke",
                            "--label-a", "x", "--label-b", "x"])  # fmt: skip
    with pytest.raises(UserError, match="--label-a and --label-b are both 'x'"):
        compare.spec(ns)
