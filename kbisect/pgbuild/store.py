"""Where PostgreSQL builds live in the cache, and their manifests:

    $cache/pg-builds/<key>/install/kbisect/pg/   the installed server (prefix /kbisect/pg)
    $cache/pg-builds/<key>/build/                the build dir (kept: rebuilds are incremental)
    $cache/pg-builds/<key>/manifest.json         written last: a build without one is unfinished

The key is a hash of every input (source commit with its patches, configure line, build
root); a scenario names its build by it (`postgres.build`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kbisect.core import paths, reading
from kbisect.core.exceptions import UserError
from kbisect.scenario import server

PREFIX = Path("/kbisect/pg")  # --prefix, and where the guest sees the build
MANIFEST = "manifest.json"
KEY = re.compile(server.BUILD_KEY)


class NoBuild(UserError):
    """A scenario names a PostgreSQL build this cache does not hold."""


def builds_dir() -> Path:
    return paths.cache_dir() / "pg-builds"


def dir_for(key: str) -> Path:
    return builds_dir() / key


def install_dir(key: str) -> Path:
    """The host directory the guest sees as PREFIX."""
    return dir_for(key) / "install" / PREFIX.relative_to("/")


def manifest(key: str) -> dict[str, Any] | None:
    path = dir_for(key) / MANIFEST
    if not path.exists():
        return None
    return reading.json_table(path, f"remove {path.parent} and build it again")


def find(key: str) -> dict[str, Any]:
    """A finished build's manifest, or a one-line error saying how to make one."""
    found = manifest(key)
    if found is None:
        raise NoBuild(
            f"postgres.build = {key}: no such PostgreSQL build in {builds_dir()} "
            "(make one with `kbisect pg-build SPEC [--patch FILE]`, which prints its key)"
        )
    return found
