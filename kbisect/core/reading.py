"""The one door every file kbisect reads comes through: text, TOML or JSON, for a named
kind, and typed fields out of what was read.

Whatever is wrong with a file (missing, a directory, unreadable, not UTF-8, truncated,
not TOML or JSON, a field of the wrong type, NaN or infinity, a count out of range, an
unknown key) becomes one line naming the file and the field. A file the user writes (a
scenario, a study, a target) raises `BadInput`, exit 2; a file kbisect wrote itself
(state.json, plan.json, summary.json, a sample, a cache) raises `CorruptFile`, exit 3,
whose line ends with how to recover.

The value rules are here too, one per kind of value (a kernel command line or a setting,
a label, a tag, a name used as a path, a fraction such as a minimum effect): a file's
field (`Fields`, rule=...) and an option (commands/options.py makes each an argparse
type) are held to the same one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from kbisect.core import paths
from kbisect.core.exceptions import InfraError, KbisectError, UserError

MISSING: Any = object()  # a getter's default when the field must be there
# A sample is written whole (by link): only damage from outside truncates one. Read by
# stats, measure, bisect and study alike, so the advice is said here, once.
SAMPLE_RECOVER = "move it out of the samples folder (its boot is lost) and run the command again"


# --- value rules: each gives the problem (a phrase after the value's name) or None ------

Rule = Callable[[Any], "str | None"]
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def utf8(text: str) -> str | None:
    """Text that is UTF-8: an argument's bytes that are not arrive as lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid UTF-8 text (character {exc.start + 1})"
    return None


def line(text: str) -> str | None:
    """One line of text (a kernel command line, a PostgreSQL setting, a scenario
    override): UTF-8, no newline, carriage return, NUL or other control character."""
    if bad := next((c for c in text if c < " " or c == "\x7f"), None):
        return f"holds a control character ({bad!a}): it must be one line of text"
    return utf8(text)


def label(text: str) -> str | None:
    """A label that names a thing in a report (a compare side, a study's kernel or
    level): one line, not empty."""
    return "is empty" if not text.strip() else line(text)


def tag(text: str) -> str | None:
    """A kernel tag (rc record): one word, not empty."""
    if problem := label(text):
        return problem
    return "holds a space: a tag is one word" if any(c.isspace() for c in text) else None


def name(text: str) -> str | None:
    """A name used as a path (a study, a machine, a pool): 1 to 64 letters, digits, '.',
    '_' or '-', starting with a letter or digit."""
    if NAME.fullmatch(text):
        return None
    return "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"


def fraction(value: float) -> str | None:
    """A relative amount in [0, 1): a minimum effect (--min-effect, a study's or a run's
    min_effect), a share of the host's CPUs."""
    return None if 0 <= value < 1 else "is not in [0, 1) (0.02 means 2%)"


class BadInput(UserError):
    """A file the user wrote (scenario, study, target) cannot be read, or has a wrong field."""


class CorruptFile(InfraError):
    """A file kbisect wrote (run state, plan, summary, sample, cache) cannot be read back."""


def _unreadable(path: Path) -> str | None:
    """Why `path` cannot be read as a file, before trying; None if it looks readable."""
    if (why := paths.why_not(path)) is not None:  # too long, a dangling link, a loop
        return why
    if path.is_dir():
        return "is a directory, not a file"
    if not path.exists():
        return "no such file"
    if not path.is_file():  # a fifo or a device: reading it could block or never end
        return "is not a regular file"
    return None


Error = Callable[[str], KbisectError]


def text(path: Path, recover: str | None = None, error: Error | None = None) -> str:
    """The file's text, UTF-8, its bytes as they are (a hash of `.encode()` is the
    file's); one line when it cannot be read (see `fail`)."""
    problem = _unreadable(path)
    if problem is None:
        try:
            return path.read_bytes().decode("utf-8")  # as written: no newline translation
        except UnicodeDecodeError as exc:
            problem = f"not UTF-8 text (byte {exc.start})"
        except OSError as exc:
            problem = f"cannot read: {exc.strerror or exc}"
    fail(path, problem, recover, error)


def fail(
    path: Path | str, problem: str, recover: str | None = None, error: Error | None = None
) -> NoReturn:
    """Raise the one line for `path`: `error` if given (a kind's own class), else
    BadInput for the user's file (no `recover`), CorruptFile for kbisect's own, whose
    line ends with `recover`."""
    line = f"{path}: {problem}" if recover is None else f"{path}: {problem}; {recover}"
    raise (error or (BadInput if recover is None else CorruptFile))(line)


def toml(path: Path, error: Error | None = None) -> dict[str, Any]:
    """A TOML file the user wrote, as a table; one line (`error`, else BadInput) when it
    cannot be read or parsed."""
    try:
        return tomllib.loads(text(path, None, error))
    except tomllib.TOMLDecodeError as exc:
        fail(path, f"invalid TOML: {exc}", None, error)
    except RecursionError:
        fail(path, "invalid TOML: nested too deeply", None, error)


def json_file(path: Path, recover: str, error: Error | None = None) -> Any:
    """A JSON file kbisect wrote; CorruptFile (or `error`) naming it and how to recover
    when it is missing, truncated or not JSON. NaN and Infinity load (kbisect's own
    statistics may write them, as json.dumps does); `finite` tells them."""
    try:
        return json.loads(text(path, recover, error))
    except ValueError as exc:  # JSONDecodeError is one
        fail(path, f"truncated or not JSON ({exc})", recover, error)
    except RecursionError:
        fail(path, "not JSON kbisect wrote (nested too deeply)", recover, error)


def json_table(path: Path, recover: str, error: Error | None = None) -> dict[str, Any]:
    """As json_file, for a file that holds one JSON object."""
    data = json_file(path, recover, error)
    if not isinstance(data, dict):
        fail(path, f"must hold a JSON object, got {type(data).__name__}", recover, error)
    return data


def got(value: Any) -> str:
    return json.dumps(value, default=str)[:80]


class Fields:
    """Typed access to a table read from `source`: each getter refuses a wrong type (a
    boolean is not a number), NaN and infinity, and a value out of range, naming the
    field's dotted path; `done()` refuses the keys no getter asked for."""

    def __init__(
        self,
        data: Any,
        source: str,
        prefix: str = "",
        error: Error = BadInput,
    ) -> None:
        self.source, self.prefix, self.error = source, prefix, error
        if not isinstance(data, dict):
            where = prefix.rstrip(".") or "the file"
            raise error(f"{source}: {where} must be a table, got {got(data)}")
        self.data: dict[str, Any] = data
        self.asked: set[str] = set()

    def fail(self, key: str, problem: str) -> NoReturn:
        raise self.error(f"{self.source}: {self.prefix}{key} {problem}")

    def _get(self, key: str, default: Any) -> Any:
        self.asked.add(key)
        if key in self.data:
            return self.data[key]
        if default is MISSING:
            self.fail(key, "is missing")
        return default

    def _given(self, key: str, default: Any) -> tuple[Any, bool]:
        """The field's value, and whether it is to be checked: given, and not a null where
        the default is None (an optional field kbisect wrote as null)."""
        value = self._get(key, default)
        return value, key in self.data and not (value is None and default is None)

    def value(self, key: str, default: Any = MISSING) -> Any:
        """The field as it is, of any type (its own reader checks it)."""
        return self._get(key, default)

    def integer(
        self, key: str, default: Any = MISSING, low: int = 0, high: int | None = None
    ) -> Any:
        """An integer in low..high (a boolean is not one)."""
        return self._number(key, default, (int,), low, high)

    def number(
        self, key: str, default: Any = MISSING, low: float = 0.0, high: float | None = None
    ) -> Any:
        """A finite number in low..high (an integer too; a boolean is not one)."""
        return self._number(key, default, (int, float), low, high)

    def fraction(self, key: str, default: Any = MISSING) -> Any:
        """A number in [0, 1) by the rule an option's fraction obeys (--min-effect)."""
        return self._ruled(key, self._number(key, default, (int, float), -math.inf, None), fraction)

    def _ruled(self, key: str, value: Any, rule: Rule | None) -> Any:
        if rule and key in self.data and value is not None and (problem := rule(value)):
            self.fail(key, f"{problem}, got {got(value)}")
        return value

    def _number(
        self, key: str, default: Any, kinds: tuple[type, ...], low: float, high: float | None
    ) -> Any:
        value, check = self._given(key, default)
        if not check:
            return value
        if type(value) not in kinds:  # a boolean is not a number
            kind = "an integer" if kinds == (int,) else "a number"
            self.fail(key, f"must be {kind}, got {got(value)}")
        if not number(value):
            self.fail(key, f"must be a finite number, got {str(value)[:80]}")
        if value < low or (high is not None and value > high):
            span = f"at least {low}" if high is None else f"{low} to {high}"
            self.fail(key, f"must be {span}, got {value}")
        return value

    def string(self, key: str, default: Any = MISSING, rule: Rule | None = None) -> Any:
        """A string that obeys `rule` when given (and not null)."""
        value = self._typed(key, default, str, "a string")
        return value if value is None else self._ruled(key, value, rule)

    def flag(self, key: str, default: Any = MISSING) -> Any:
        return self._typed(key, default, bool, "true or false")

    def items(self, key: str, default: Any = MISSING) -> Any:
        return self._typed(key, default, list, "a list")

    def _typed(self, key: str, default: Any, kind: type, name: str) -> Any:
        value, check = self._given(key, default)
        if check and not isinstance(value, kind):
            self.fail(key, f"must be {name}, got {got(value)}")
        return value

    def strings(self, key: str, rule: Rule | None = None) -> tuple[str, ...]:
        """A list of strings, each obeying `rule` when given; empty when absent."""
        value = self._get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(key, f"must be a list of strings, got {got(value)}")
        for item in value:
            self._ruled(key, item, rule)
        return tuple(value)

    def table(self, key: str, required: bool = False) -> Fields:
        """The sub-table `key` (when not required, an empty one if absent), as Fields of
        its own."""
        data = self._get(key, MISSING if required else {})
        return Fields(data, self.source, f"{self.prefix}{key}.", self.error)

    def done(self) -> None:
        """Refuse any key no getter asked for."""
        if unknown := sorted(set(self.data) - self.asked):
            known = ", ".join(sorted(self.asked)) or "none"
            self.fail(unknown[0], f"is not a known field (known here: {known})")


def _getter(f: Fields, hint: Any) -> Callable[[str], Any] | None:
    """The getter that checks a field declared `hint`; None for a type it does not check."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return lambda key: check_dataclass(hint, f.table(key, required=True))
    origin = typing.get_origin(hint) or hint
    simple: dict[Any, Callable[[str], Any]] = {
        int: f.integer,
        float: f.number,
        str: f.string,
        Path: f.string,
        bool: f.flag,
        list: f.items,
        tuple: f.items,
        dict: f.table,
    }
    return simple.get(origin)


def check_dataclass(cls: type, f: Fields) -> None:
    """Each field of dataclass `cls` that `f` holds is of its declared type: a number
    finite and not negative, an optional one (`X | None`) may be null, a tuple or list a
    list, a dict or a dataclass a table (that one checked in turn), a Path a string."""
    for name, hint in typing.get_type_hints(cls).items():
        value, args = f.data.get(name), typing.get_args(hint)
        optional = isinstance(hint, types.UnionType) and type(None) in args
        if name not in f.data or (value is None and optional):
            continue
        if optional:
            hint = next(a for a in args if a is not type(None))
        if getter := _getter(f, hint):
            getter(name)


def own_fields(data: Any, path: Path, recover: str, prefix: str = "") -> Fields:
    """Fields of a file kbisect wrote (of its part at `prefix`): a wrong one is
    CorruptFile, ending with `recover`."""
    return Fields(data, str(path), prefix, lambda line: CorruptFile(f"{line}; {recover}"))


def number(value: Any) -> bool:
    """A finite number: an int or float (not a boolean), NaN, infinity and an int beyond
    any float (10**400, which JSON may hold) left out."""
    if type(value) not in (int, float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def unknown_key(settings: Mapping[str, Any], known: Iterable[str]) -> str | None:
    """ "unknown key 'k' (known: a, b)" for the first key of settings not in known, the
    settings' own order; None when every key is known."""
    names = list(known)
    for key in settings:
        if key not in names:
            return f"unknown key {key!r} (known: {', '.join(names)})"
    return None


def mapping(value: Any) -> Mapping[str, Any]:
    """A table read as it was written, or an empty one when it is not a table (an older
    or damaged record's field)."""
    return value if isinstance(value, Mapping) else {}


def finite(value: Any) -> bool:
    """False for a float NaN or infinity (anywhere in a list or table too)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list):
        return all(finite(v) for v in value)
    return True
