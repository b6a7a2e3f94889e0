"""A cache directory made once, whole or absent: built under a scratch name beside its
place and renamed there (replacing an old one) only when finished, durably. The caller
holds the lock that keeps a second kbisect out, and looks for a finished one under it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kbisect.core import atomic

T = TypeVar("T")


def build(final: Path, make: Callable[[Path], T], *, scratch: Path | None = None) -> T:
    """`make(path)` builds into `path`, which does not exist yet; the path then replaces
    `final`; make's result. `path`: `scratch` (a leftover removed first, a failed one kept
    for a look), by default one in a fresh temporary directory `.<final.name>.*` beside
    `final`, whose other files make may use, removed whatever happens."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if scratch is None:
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        try:
            return build(final, make, scratch=tmp / final.name)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    result = make(scratch)
    shutil.rmtree(final, ignore_errors=True)
    scratch.rename(final)
    atomic.fsync_dir(final.parent)
    return result


def build_with_manifest(
    final: Path, manifest: Path, make: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    """build() through `<final>.partial`, `make` returning the manifest: the old manifest
    goes before the old tree, the new one (JSON) is written last: a tree without one is
    unfinished."""

    def made(scratch: Path) -> dict[str, Any]:
        data = make(scratch)
        manifest.unlink(missing_ok=True)
        return data

    data = build(final, made, scratch=final.with_name(f"{final.name}.partial"))
    atomic.write_json(manifest, data)
    return data
