"""The one door for files: what each bad file and each bad field becomes."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbisect.core import reading
from kbisect.core.exceptions import EXIT_INFRA, EXIT_USER


def place(path: Path, content: bytes | str | None) -> Path:
    """Nothing at path (None), a directory ("dir"), a fifo ("fifo"), or a file of these bytes."""
    if content == "dir":
        path.mkdir()
    elif content == "fifo":
        os.mkfifo(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no such file"),
        ("dir", "is a directory, not a file"),
        (b"a = \xe9", "not UTF-8 text (byte 4)"),
        (b"a = ", "invalid TOML: "),
        (b"[a]\n[a]\n", "invalid TOML: "),
        (b"a = " + b"[" * 100_000, "invalid TOML: nested too deeply"),
        ("fifo", "is not a regular file"),
    ],
)
def test_a_users_file_that_cannot_be_read_is_one_line_exit_2(
    tmp_path: Path, content: bytes | str | None, problem: str
) -> None:
    path = place(tmp_path / "x.toml", content)
    with pytest.raises(reading.BadInput) as info:
        reading.toml(path)
    assert str(info.value).startswith(f"{path}: {problem}")
    assert info.value.exit_code == EXIT_USER and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no such file"),
        ("dir", "is a directory, not a file"),
        (b'{"a": "\xff"}', "not UTF-8 text (byte 7)"),
        (b'{"a": [1, 2', "truncated or not JSON"),
        (b"", "truncated or not JSON"),
        (b"[1]", "must hold a JSON object, got list"),
        (b"[" * 100_000, "not JSON kbisect wrote (nested too deeply)"),
    ],
)
def test_a_file_of_kbisects_own_that_cannot_be_read_is_exit_3_with_recovery(
    tmp_path: Path, content: bytes | str | None, problem: str
) -> None:
    path = place(tmp_path / "state.json", content)
    with pytest.raises(reading.CorruptFile) as info:
        reading.json_table(path, "start again")
    line = str(info.value)
    assert line.startswith(f"{path}: {problem}") and line.endswith("; start again")
    assert info.value.exit_code == EXIT_INFRA and "\n" not in line


def fields(**data: Any) -> reading.Fields:
    return reading.Fields(data, "s.toml", "top.")


@pytest.mark.parametrize(
    ("data", "read", "message"),
    [
        ({}, lambda f: f.integer("n"), "top.n is missing"),
        ({"n": True}, lambda f: f.integer("n"), "top.n must be an integer, got true"),
        ({"n": 1.0}, lambda f: f.integer("n"), "top.n must be an integer, got 1.0"),
        ({"n": -1}, lambda f: f.integer("n"), "top.n must be at least 0, got -1"),
        ({"n": 9}, lambda f: f.integer("n", high=8), "top.n must be 0 to 8, got 9"),
        ({"x": math.nan}, lambda f: f.number("x"), "top.x must be a finite number, got nan"),
        ({"x": -math.inf}, lambda f: f.number("x"), "top.x must be a finite number, got -inf"),
        ({"x": "1"}, lambda f: f.number("x"), 'top.x must be a number, got "1"'),
        ({"s": 1}, lambda f: f.string("s"), "top.s must be a string, got 1"),
        ({"b": 1}, lambda f: f.flag("b"), "top.b must be true or false, got 1"),
        (
            {"l": ["a", 1]},
            lambda f: f.strings("l"),
            'top.l must be a list of strings, got ["a", 1]',
        ),
        ({"t": 1}, lambda f: f.table("t"), "top.t must be a table, got 1"),
        ({"t": {"u": 1}}, lambda f: f.table("t").done(), "top.t.u is not a known field"),
        ({"n": 1, "m": 2}, lambda f: (f.integer("n"), f.done()), "top.m is not a known field"),
    ],
)
def test_each_field_is_typed_finite_and_in_range(
    data: dict[str, Any], read: Any, message: str
) -> None:
    with pytest.raises(reading.BadInput) as info:
        read(fields(**data))
    assert str(info.value).startswith(f"s.toml: {message}")


def test_defaults_and_good_values_pass() -> None:
    f = fields(n=3, x=2, s="a", b=False, l=["a"])
    assert (f.integer("n"), f.number("x"), f.string("s"), f.flag("b")) == (3, 2.0, "a", False)
    assert f.strings("l") == ("a",) and f.strings("none") == ()
    assert f.integer("absent", None) is None and f.number("absent2", 0.5) == 0.5
    f.done()


def test_finite_looks_inside_lists_and_tables() -> None:
    assert reading.finite({"a": [1, 2.5, {"b": "c"}]})
    assert not reading.finite({"a": [1, {"b": math.inf}]})


# --- the value rules, one per kind, shared by options and files ------------------------

CONTROL = st.sampled_from([chr(c) for c in range(32)] + ["\x7f"])


@given(st.text(), CONTROL, st.text())
def test_a_line_never_holds_a_control_character(head: str, control: str, tail: str) -> None:
    problem = reading.line(head + control + tail)
    assert problem is not None and "control character" in problem and "\n" not in problem


@given(st.text(st.characters(min_codepoint=0x20, exclude_characters="\x7f", codec="utf-8")))
def test_printable_utf8_text_is_a_line(text: str) -> None:
    assert reading.line(text) is None


@given(st.text(), st.integers(0x80, 0xFF))
def test_bytes_that_are_not_utf8_are_refused_everywhere(text: str, byte: int) -> None:
    bad = text + os.fsdecode(bytes([byte]))  # how argv gives them (surrogateescape)
    for rule in (reading.utf8, reading.line, reading.label, reading.tag, reading.name):
        assert rule(bad) is not None


@pytest.mark.parametrize("text", ["", " ", "\t"])
def test_a_label_or_a_tag_is_not_empty(text: str) -> None:
    assert reading.label(text) and reading.tag(text)


@pytest.mark.parametrize("text", ["../x", "a/b", ".x", "-x", "x" * 65, "a b", "é", "x\n"])
def test_a_name_used_as_a_path_is_short_and_plain(text: str) -> None:
    assert reading.name(text)


FRACTIONS = [(0, True), (0.02, True), (0.999, True), (1, False), (1.0, False), (-1e-300, False)]


@pytest.mark.parametrize(("value", "ok"), [*FRACTIONS, (math.nan, False)])
def test_a_fraction_is_in_zero_to_one(value: float, ok: bool) -> None:
    assert (reading.fraction(value) is None) == ok


def test_a_fields_rule_names_the_field() -> None:
    f = reading.Fields({"append": "a\nb", "min_effect": 1.0, "name": None}, "s.toml")
    with pytest.raises(reading.BadInput, match=r"^s.toml: append holds a control character"):
        f.string("append", "", reading.line)
    with pytest.raises(reading.BadInput, match=r"^s.toml: min_effect is not in \[0, 1\)"):
        f.fraction("min_effect", 0.02)
    assert f.string("name", None, reading.name) is None  # null where the default is None
