"""A PostgreSQL server as a command line asks for it: a source (spec.py: `PATH[@REV]` or
`debian:MAJOR`) and patch files, applied in order.

`check` reads both before anything is built (a source that names none, a patch file that
is missing, unreadable or holds no diff: one line, exit 2); `make` builds the server once
(build.py, cached) and names it in the scenario overrides every sample of it carries,
`postgres.build=KEY` and `postgres.major=MAJOR`. Compare's sides (compare/pgsides.py), a
bisection's every revision (bisect/driver.py, bisect-step) and a study's `postgres` axis
(study/pgaxis.py) all go through here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core.exceptions import UserError
from kbisect.pgbuild import build, spec
from kbisect.source import patches

# A key of a build's shape, for checking before any build that a scenario can run one
# (not one pinning postgres.version, or source = "host"): with_overrides([*sets, STAND_IN]).
STAND_IN = "postgres.build=pg0-000000000000"


class NoSource(UserError):
    """--pg-patch without a --pg-build to apply it on."""


@dataclass(frozen=True)
class Made:
    """A finished build: its key and manifest (build.py)."""

    key: str
    manifest: dict[str, Any]
    patch_names: tuple[str, ...] = ()

    @property
    def sets(self) -> tuple[str, ...]:
        """The scenario overrides that run this server."""
        return (f"postgres.build={self.key}", f"postgres.major={self.manifest['major']}")

    def describe(self) -> str:
        """`PostgreSQL 20devel + 0001-batch.patch`."""
        return " + ".join([f"PostgreSQL {self.manifest['version']}", *self.patch_names])


@dataclass(frozen=True)
class Request:
    """A server to build: a source and the patch files applied on it."""

    source: str  # what spec.parse takes
    patches: tuple[Path, ...] = ()  # in the order applied

    def check(self) -> None:
        """The source parses and every patch file reads as a patch (UserError, one line:
        what of the text given would break the line is shown escaped)."""
        try:
            spec.parse(self.source)
            patches.read_all(self.patches)
        except UserError as exc:
            if (message := shown(str(exc))) == str(exc):
                raise
            raise type(exc)(message) from None

    def named(self) -> str:
        """The source as a run saves it: a tree by its absolute path and revision (a
        resumed run may start elsewhere), debian:MAJOR as it is."""
        return spec.parse(self.source).describe()

    def make(self) -> Made:
        """The server built (or found in the cache), checked first."""
        self.check()
        key, manifest = build.build(spec.parse(self.source), self.patches)
        return Made(key, manifest, tuple(p.name for p in self.patches))


def shown(text: str) -> str:
    """`text` for a one-line message: a character that would not print (a line break, a
    tab, a control) escaped as Python writes it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def given(source: str | None, patch_files: Sequence[Path]) -> Request | None:
    """The server `--pg-build SOURCE` and `--pg-patch FILE...` ask for, checked; None
    without --pg-build (and --pg-patch alone is one line, exit 2)."""
    if source is None:
        if patch_files:
            raise NoSource("--pg-patch needs a PostgreSQL source to patch: --pg-build")
        return None
    request = Request(source, tuple(patch_files))
    request.check()
    return request
