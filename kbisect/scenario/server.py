"""The PostgreSQL server a scenario pins: `[postgres] major`, optionally `version` (an
exact Debian version), and `source` ("image": a guest root carrying that server, made by
targets/vng/rootfs.py; "host": the host's own root). Which Debian suite carries which
major is data (SUITES)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# PostgreSQL majors and the Debian suite whose archive carries each (postgresql-N).
SUITES = {15: "bookworm", 17: "trixie", 18: "sid"}
HOST = "host"
IMAGE = "image"
DEBIAN_VERSION = r"[0-9][A-Za-z0-9.+~:-]*"  # postgres.version
BUILD_KEY = r"pg[0-9]+[a-z0-9.]*-[0-9a-f]{12}"  # postgres.build: what pgbuild/ names a build


@dataclass(frozen=True)
class Pin:
    """A packaged server: a major and, optionally, its exact Debian version (e.g.
    "17.12-0+deb13u1"; apt installs exactly that or refuses)."""

    major: int
    version: str | None = None
    # packages the root carries besides the server: ("linux-perf",) for a scenario whose
    # [profile] is enabled (profile.py); none, and the root keeps the key it always had
    extras: tuple[str, ...] = ()

    @classmethod
    def of(cls, data: dict[str, Any]) -> Pin:
        """From a scenario's data (its [postgres] table)."""
        pg = data["postgres"]
        return cls(int(pg["major"]), pg.get("version"))

    def problem(self) -> str | None:
        """Why no Debian root can carry it (one line), else None."""
        if self.major not in SUITES:
            known = ", ".join(f"{m} ({s})" for m, s in sorted(SUITES.items()))
            return (
                f"postgres.major = {self.major}: no Debian suite kbisect knows carries it "
                f'(it knows {known}); set postgres.source = "host" to run the host\'s own'
            )
        if self.version is not None and not (
            re.fullmatch(DEBIAN_VERSION, self.version) and self.version.startswith(f"{self.major}.")
        ):
            return (
                f"postgres.version = {self.version!r}: not a Debian version of PostgreSQL "
                f"{self.major} (e.g. {self.major}.1-1)"
            )
        return None

    @property
    def suite(self) -> str:
        return SUITES[self.major]

    @property
    def package(self) -> str:
        """The apt name of the server package (with =version when exact)."""
        name = f"postgresql-{self.major}"
        return f"{name}={self.version}" if self.version else name


DEFAULT_PIN = Pin(17)  # what the shipped measuring scenarios pin


def source(data: dict[str, Any]) -> str:
    """Where a scenario's server comes from: IMAGE (default) or HOST."""
    return str(data["postgres"].get("source", IMAGE))
