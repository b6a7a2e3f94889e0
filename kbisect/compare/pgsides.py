"""A compare's sides running PostgreSQL builds (`--pg-build[-a|-b]`, `--pg-patch[-a|-b]`):
each side's build is made (or found in the cache: pgbuild/request.py) and named in the
side's scenario (`postgres.build`, with the build's major), so the plan, a resume and
every sample carry it like any other side difference."""

from __future__ import annotations

from kbisect.compare.sides import ConflictingOptions, Side, Spec
from kbisect.core import progress
from kbisect.pgbuild.request import Request
from kbisect.scenario import scenario, server


def asked(spec: Spec) -> bool:
    """Does a side ask for a PostgreSQL build (a --pg-build or --pg-patch option)? A
    compare without one does no PostgreSQL build work at all (run.py)."""
    options = (spec.pg_build, spec.pg_build_a, spec.pg_build_b)
    return any(options) or any((spec.pg_patch, spec.pg_patch_a, spec.pg_patch_b))


def wanted(spec: Spec, name: str, scen: scenario.Scenario) -> Request | None:
    """A side's server (source and patches: the shared ones first), None for the
    scenario's own. `--pg-patch*` without a `--pg-build` patches the scenario's own
    server: both sides then build Debian's source of its major (`debian:MAJOR`), so they
    differ by the patches alone."""
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
    return Request(source, (*spec.pg_patch, *own_patches)) if source else None


def check(spec: Spec, scen: scenario.Scenario) -> None:
    """Every --pg-build parses and every --pg-patch reads (one line, exit 2) before
    anything is built."""
    for name in ("A", "B"):
        if (request := wanted(spec, name, scen)) is not None:
            request.check()


def apply(spec: Spec, sides: tuple[Side, Side]) -> None:
    """Build each side's PostgreSQL (a patch that does not apply: one line, exit 2, before
    its build) and point the side's scenario at it."""
    built: dict[str, str] = {}
    for side in sides:
        if (request := wanted(spec, side.name, side.scen)) is None:
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
        # one kernel on both sides (B took A's revision): B is named by A's kernel too
        same_kernel = b.rev is not None and (b.rev, b.patches) == (a.rev, a.patches)
        kernel_b = a.label if (b.label == b.name and same_kernel) else b.label
        for side, kernel, given in ((a, a.label, spec.label_a), (b, kernel_b, spec.label_b)):
            if not given:
                side.label = ", ".join(filter(None, [kernel, built.get(side.name)]))
