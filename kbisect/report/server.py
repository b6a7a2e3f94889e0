"""The PostgreSQL server each side ran, for the text report: the packaged one (the guest
root's Debian version and suite) or a build (its source, patches and key, and the sha256
of the binary that ran, which the guest took). Shown only when some side ran a build:
a run on packaged servers names its server in the machine section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kbisect.report.text import para


def describe(sample: Mapping[str, Any]) -> str | None:
    """One side's server, from one of its samples (None when it does not say)."""
    userland = sample.get("userland") or {}
    built = userland.get("build")
    if isinstance(built, Mapping):
        patches = [p.get("file", "?") for p in built.get("patches") or []]
        source = " + ".join([str(built.get("source", "?")), *patches])
        binary = str((sample.get("fingerprint") or {}).get("pg_binary_sha256") or "")[:12]
        ran = f", binary sha256 {binary}" if binary else ""
        return f"{source}: build {built.get('key', '?')}, {built.get('version', '?')}{ran}"
    if version := userland.get("postgres_debian_version"):
        major, suite = userland.get("postgres_major", "?"), userland.get("suite", "?")
        return f"Debian postgresql-{major} {version} ({suite})"
    return None


def lines(by_side: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """`  A: debian:18 (18.6-3): build pg18-..., 18.6, binary sha256 ...` per side, or []
    when no side ran a build."""
    firsts = {side: samples[0] for side, samples in by_side.items() if samples}
    if not any((s.get("userland") or {}).get("build") for s in firsts.values()):
        return []
    out: list[str] = []
    for side, sample in firsts.items():
        out += para(f"{side}: {describe(sample) or 'not recorded'}", "  ", "    ")
    return out
