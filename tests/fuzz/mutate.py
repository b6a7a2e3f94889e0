"""Corruptions of one file, drawn by hypothesis: as bytes (truncated, not UTF-8, empty,
gone, a directory in its place, bad syntax) or through its structure (a JSON or TOML
value deleted, retyped, made NaN, inf, negative or huge, an unknown key added). Each
returns a one-line description of what it did, for the failure message.
"""

from __future__ import annotations

import json
import math
import shutil
import tomllib
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# values a field may be given instead of its own
ODD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    -(10**6),
    10**30,
    1.5,
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    "",
    "x",
    "ü\u202e",
    "../../etc/passwd",
    [],
    {},
    [1, "a"],
    {"x": 1},
]
BYTE_KINDS = ["truncate", "empty", "not-utf8", "gone", "directory", "garbage"]
STRUCT_KINDS = ["delete", "retype", "unknown-key"]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside value (dict keys and list indices), depth first."""
    out: list[tuple[Any, ...]] = []
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else []
    )
    for k, v in items:
        out.append((*prefix, k))
        out += paths(v, (*prefix, k))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path[:-1]:
        doc = doc[k]
    return doc


def show(path: tuple[Any, ...]) -> str:
    return "$" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path)


def corrupt(data: st.DataObject, file: Path, structured: bool = True) -> str:
    """Corrupt file in place; what was done, in one line."""
    draw = data.draw
    raw = file.read_bytes()
    fmt = "json" if file.suffix == ".json" else "toml" if file.suffix == ".toml" else ""
    kinds = BYTE_KINDS + (STRUCT_KINDS * 2 if fmt and structured else [])
    how = draw(st.sampled_from(kinds), label="corruption")
    name = file.name
    if how == "truncate":
        n = draw(st.integers(0, max(0, len(raw) - 1)), label="keep bytes")
        file.write_bytes(raw[:n])
        return f"{name}: truncated to {n} of {len(raw)} bytes"
    if how == "empty":
        file.write_bytes(b"")
        return f"{name}: empty"
    if how == "not-utf8":
        at = draw(st.integers(0, len(raw)), label="at byte")
        file.write_bytes(raw[:at] + b"\xff\xfe\xc3(" + raw[at:])
        return f"{name}: bytes ff fe c3 28 (not UTF-8) inserted at byte {at}"
    if how == "gone":
        file.unlink()
        return f"{name}: deleted"
    if how == "directory":
        file.unlink()
        file.mkdir()
        return f"{name}: a directory in its place"
    if how == "garbage":
        junk = draw(
            st.sampled_from(
                [
                    b"= =\n[[\n",
                    b"{",
                    b"\x00\x00",
                    b"null",
                    b"[]",
                    b"42",
                    b'"x"',
                    b"NaN",
                    b"[x]\n[x]\n",
                ]
            )
        )
        append = draw(st.booleans())
        file.write_bytes(raw + b"\n" + junk if append else junk)
        return f"{name}: {'appended' if append else 'replaced by'} {junk!r}"
    doc = json.loads(raw) if fmt == "json" else tomllib.loads(raw.decode())
    where = paths(doc)
    if not where or not isinstance(doc, dict):
        file.write_bytes(b"")
        return f"{name}: empty"
    path = draw(st.sampled_from(where), label="field")
    parent = _parent(doc, path)
    if how == "delete":
        del parent[path[-1]]
        what = f"{name}: {show(path)} deleted"
    elif how == "retype":
        values = ODD_VALUES if fmt == "json" else [v for v in ODD_VALUES if v is not None]
        value = draw(st.sampled_from(values), label="value")
        parent[path[-1]] = value
        what = f"{name}: {show(path)} := {value!r}"
    else:
        target = parent if isinstance(parent, dict) else doc
        target["fuzz_unknown"] = draw(st.sampled_from(ODD_VALUES[1:]), label="value")
        what = f"{name}: unknown key fuzz_unknown added next to {show(path)}"
    file.write_text(json.dumps(doc, indent=1) if fmt == "json" else toml(doc), encoding="utf-8")
    return what


def replace_file(file: Path, backup: Path) -> None:
    """Put back a file (or a dir that replaced it) from backup."""
    if file.is_dir() and not file.is_symlink():
        shutil.rmtree(file)
    else:
        file.unlink(missing_ok=True)
    shutil.copy2(backup, file)


# --- a small TOML writer: every table inline, so any structure round-trips --------------


def toml(doc: dict[str, Any]) -> str:
    return "".join(f"{_key(k)} = {_value(v)}\n" for k, v in doc.items())


def _key(k: str) -> str:
    return _string(str(k))


def _string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    return _string(str(v))  # dates: as text
