"""Make a directory in the cache once, so that it is whole or absent: `make` builds it
under a scratch name beside its place, and only a finished one is renamed into place (the
old one, if any, removed first), durably. The caller holds the lock that keeps a second
kbisect from making it at the same time, and looks again for a finished one under it.

Two kinds of scratch: a fixed `<final>.partial` (build_with_manifest: a failed build stays
there to be looked at, and the next one removes it), or by default a fresh temporary
directory `.<final.name>.*` beside it, removed whatever happens.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kbisect.core import atomic

T = TypeVar("T")


def build(final: Path, make: Callable[[Path], T], *, scratch: Path | None = None) -> T:
    """`make(path)` builds into `path`, which does not exist yet (make creates it); the
    path then replaces `final`, and make's result is returned. `path` is `scratch` (a
    leftover removed first) or, by default, one inside a fresh temporary directory
    beside `final`, whose other files make may use and which is removed afterwards."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
        return _replace(final, make, scratch)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        return _replace(final, make, tmp / final.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _replace(final: Path, make: Callable[[Path], T], scratch: Path) -> T:
    result = make(scratch)
    shutil.rmtree(final, ignore_errors=True)
    scratch.rename(final)
    atomic.fsync_dir(final.parent)
    return result


def build_with_manifest(
    final: Path, manifest: Path, make: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    """build() through the scratch `<final>.partial`, where `make` returns the manifest:
    the old manifest goes before the old tree, the new one (JSON) is written last, so a
    tree without one is unfinished."""

    def made(scratch: Path) -> dict[str, Any]:
        data = make(scratch)
        manifest.unlink(missing_ok=True)
        return data

    data = build(final, made, scratch=final.with_name(f"{final.name}.partial"))
    atomic.write_json(manifest, data)
    return data
