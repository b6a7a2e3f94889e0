"""The one door for files: what each bad file and each bad field becomes."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

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
