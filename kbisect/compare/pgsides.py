"""A compare's sides running PostgreSQL builds (`--pg-build[-a|-b]`, `--pg-patch[-a|-b]`):
each side's build is made (or found in the cache: pgbuild/request.py) and named in the
side's scenario (`postgres.build`, with the build's major), so the plan, a resume and
every sample carry it like any other side difference."""

from __future__ import annotations

from kbisect.compare.sides import Side, Spec
from kbisect.core import progress
from kbisect.pgbuild.request import Request


def wanted(spec: Spec, name: str) -> Request | None:
    """A side's server (source and patches: the shared ones first), None for the
    scenario's own."""
    own_source = spec.pg_build_a if name == "A" else spec.pg_build_b
    own_patches = spec.pg_patch_a if name == "A" else spec.pg_patch_b
    source = own_source or spec.pg_build
    return Request(source, (*spec.pg_patch, *own_patches)) if source else None


def check(spec: Spec) -> None:
    """Every --pg-build parses and every --pg-patch reads (one line, exit 2) before
    anything is built."""
    for name in ("A", "B"):
        if (request := wanted(spec, name)) is not None:
            request.check()


def apply(spec: Spec, sides: tuple[Side, Side]) -> None:
    """Build each side's PostgreSQL (a patch that does not apply: one line, exit 2, before
    its build) and point the side's scenario at it."""
    built: dict[str, str] = {}
    for side in sides:
        if (request := wanted(spec, side.name)) is None:
            continue
        progress.step(
            f"side {side.name}: PostgreSQL from {request.source}, {len(request.patches)} patch(es)"
        )
        made = request.make()
        side.overrides += made.sets
        side.sets += made.sets
        side.scen = side.scen.with_overrides(side.sets)
        built[side.name] = made.describe()
    a, b = sides
    if built and built.get("A") != built.get("B"):
        for side, given in ((a, spec.label_a), (b, spec.label_b)):
            if not given:
                side.label = ", ".join(filter(None, [side.label, built.get(side.name)]))
