"""A PostgreSQL server as asked for (kbisect/pgbuild/request.py), shared by compare's sides,
bisect and the study axis: checked before any build, made once into the overrides that
name it (build.py stood in by tests/pgbuild/fakebuild.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.compare import pgsides, sides
from kbisect.core.exceptions import UserError
from kbisect.pgbuild import request, spec
from kbisect.scenario import scenario
from kbisect.source.patches import NotAPatch
from tests.pgbuild import fakebuild
from tests.pgbuild.test_pgbuild import BATCH


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    path = tmp_path / "0001-batch.patch"
    path.write_text(BATCH)
    return path


def test_a_request_is_checked_then_made_into_the_overrides_naming_it(
    batch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds = fakebuild.install(monkeypatch)
    asked = request.given("debian:17", [batch])
    assert asked == request.Request("debian:17", (batch,)) and builds.calls == []
    made = asked.make()
    assert builds.calls == [("debian:17", (batch,))]
    assert made.sets == (f"postgres.build={made.key}", "postgres.major=17")
    assert made.describe() == "PostgreSQL 17.6 + 0001-batch.patch"
    smoke = scenario.load("smoke").with_overrides(list(made.sets))
    assert smoke.data["postgres"]["build"] == made.key
    assert request.given(None, []) is None


def test_what_cannot_be_built_is_one_line_before_any_build(
    tmp_path: Path, batch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds = fakebuild.install(monkeypatch)
    notes = tmp_path / "notes.txt"
    notes.write_text("no diff here\n")
    for source, files, error, message in (
        (None, [batch], request.NoSource, "--pg-patch needs a PostgreSQL source to patch"),
        ("debian:16", [], spec.BadBuildSpec, "--pg-build debian:16: no Debian suite"),
        ("debian:17", [tmp_path / "nosuch.patch"], NotAPatch, "nosuch.patch"),
        ("debian:17", [notes], NotAPatch, "notes.txt: not a patch"),
    ):
        with pytest.raises(error) as info:
            request.given(source, files)
        assert isinstance(info.value, UserError)
        assert message in str(info.value) and "\n" not in str(info.value)
    assert builds.calls == []


def test_compare_checks_a_sides_patches_before_any_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds = fakebuild.install(monkeypatch)
    given = sides.Spec(
        scenario="smoke", kernel="k", pg_build="debian:17", pg_patch_b=(tmp_path / "x.patch",)
    )
    with pytest.raises(NotAPatch, match=r"x\.patch"):
        pgsides.check(given, scenario.load("smoke"))
    assert builds.calls == []


def test_a_source_that_would_break_the_line_is_shown_escaped() -> None:
    with pytest.raises(spec.BadBuildSpec) as info:
        request.given("no\nwhere\x1c", [])
    message = str(info.value)
    assert len(message.splitlines()) == 1 and "no\\nwhere\\x1c" in message
    assert request.shown("debian:17 ß") == "debian:17 ß"
