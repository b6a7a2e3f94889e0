"""A compare's sides running PostgreSQL builds (`--pg-build[-a|-b]`, `--pg-patch[-a|-b]`):
each side's build is made (or found in the cache) and named in the side's scenario
(`postgres.build`, with the build's major), so the plan, a resume and every sample carry
it like any other side difference."""

from __future__ import annotations

from pathlib import Path

from kbisect.compare.sides import ConflictingOptions, Side, Spec
from kbisect.core import progress
from kbisect.pgbuild import build
from kbisect.pgbuild import spec as pgspec
from kbisect.scenario import scenario, server


def wanted(spec: Spec, name: str, scen: scenario.Scenario) -> tuple[str | None, tuple[Path, ...]]:
    """A side's (source, patches): the shared ones first. `--pg-patch*` without a
    `--pg-build` patches the scenario's own server: both sides then build Debian's source
    of its major (`debian:MAJOR`), so they differ by the patches alone."""
    own_source = spec.pg_build_a if name == "A" else spec.pg_build_b
    own_patches = spec.pg_patch_a if name == "A" else spec.pg_patch_b
    source = own_source or spec.pg_build
    if source is None and (spec.pg_patch or spec.pg_patch_a or spec.pg_patch_b):
        if server.source(scen.data) == server.HOST:
            raise ConflictingOptions(
                "--pg-patch needs a PostgreSQL source to patch: --pg-build (the scenario "
                "runs the host's own server)"
            )
        source = f"debian:{scen.data['postgres']['major']}"
    return source, (*spec.pg_patch, *own_patches)


def check(spec: Spec, scen: scenario.Scenario) -> None:
    """Every --pg-build parses (one line, exit 2) before anything is built."""
    for name in ("A", "B"):
        source, _ = wanted(spec, name, scen)
        if source:
            pgspec.parse(source)


def apply(spec: Spec, sides: tuple[Side, Side]) -> None:
    """Build each side's PostgreSQL (a patch that does not apply: one line, exit 2, before
    its build) and point the side's scenario at it."""
    built: dict[str, str] = {}
    for side in sides:
        source, patches = wanted(spec, side.name, side.scen)
        if not source:
            continue
        progress.step(f"side {side.name}: PostgreSQL from {source}, {len(patches)} patch(es)")
        key, manifest = build.build(pgspec.parse(source), patches)
        extra = [f"postgres.build={key}", f"postgres.major={manifest['major']}"]
        side.overrides += extra
        side.sets += extra
        side.scen = side.scen.with_overrides(side.sets)
        built[side.name] = " + ".join(
            [f"PostgreSQL {manifest['version']}", *(p.name for p in patches)]
        )
    a, b = sides
    if built and built.get("A") != built.get("B"):
        # one kernel on both sides (B took A's revision): B is named by A's kernel too
        same_kernel = b.rev is not None and (b.rev, b.patches) == (a.rev, a.patches)
        kernel_b = a.label if (b.label == b.name and same_kernel) else b.label
        for side, kernel, given in ((a, a.label, spec.label_a), (b, kernel_b, spec.label_b)):
            if not given:
                side.label = ", ".join(filter(None, [kernel, built.get(side.name)]))
