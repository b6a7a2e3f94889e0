"""A stand-in for pgbuild/build.py's `build`: no source is fetched, nothing is compiled.
It returns a key of the real shape (a hash of the source and the patch files' content) and
a manifest, and records every call, so a test can say how often a server was built."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kbisect.pgbuild import build, spec

FAKE_MAJOR = 20  # what a git tree's build says it is (the tests' trees are 20devel)


@dataclass
class Builds:
    """Every call of the stand-in: (the source as spec.describe() says, the patch paths)."""

    calls: list[tuple[str, tuple[Path, ...]]] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # what each call returned

    def build(
        self, source: spec.Spec, patch_files: Sequence[str | Path] = ()
    ) -> tuple[str, dict[str, Any]]:
        files = tuple(Path(p).expanduser() for p in patch_files)
        self.calls.append((source.describe(), files))
        major = source.major or FAKE_MAJOR
        inputs = [source.describe(), *(f.read_text() for f in files)]
        digest = hashlib.sha256("\n".join(inputs).encode()).hexdigest()[:12]
        key = f"pg{major}-{digest}"
        version = f"{major}.6" if source.major else f"{major}devel"
        manifest = {"key": key, "major": major, "version": version, "source": source.describe()}
        self.keys.append(key)
        return key, manifest


def install(monkeypatch: pytest.MonkeyPatch) -> Builds:
    """Replace build.build by a recording stand-in for the test."""
    builds = Builds()
    monkeypatch.setattr(build, "build", builds.build)
    return builds
