"""The one key of a set of inputs: the sha256 of their JSON text (keys sorted), in hex,
cut to `length` digits. Cache directories, stores and stored identities are named by
it, so its text must never change: `compact` and `ascii` keep the JSON spelling each
stored key was first made with."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def key(obj: Any, length: int = 64, *, compact: bool = False, ascii: bool = True) -> str:
    """sha256 hex of `obj` as JSON with sorted keys (compact: no spaces after , and :;
    ascii=False: non-ASCII characters as they are, not escaped), its first `length` digits."""
    separators = (",", ":") if compact else None
    text = json.dumps(obj, sort_keys=True, separators=separators, ensure_ascii=ascii)
    return hashlib.sha256(text.encode()).hexdigest()[:length]
