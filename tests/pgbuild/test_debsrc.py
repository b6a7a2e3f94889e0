"""Debian's PostgreSQL source package as a build's source (`--pg-build debian:MAJOR`,
kbisect/pgbuild/debsrc.py): the private apt commands, the import (Debian's patch series
applied, one tagged commit), offline once imported, patches on top, and the one line a
mirror that lists a package but does not serve it gets. Against a local repository
(tests/fakeapt.py); the build itself is stood in (test_pgbuild.py's `builds`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.pgbuild import build, debsrc, spec, store
from kbisect.scenario import server
from kbisect.source import git as gitmod
from kbisect.source import release
from kbisect.source.patches import PatchDoesNotApply
from tests import fakeapt
from tests.pgbuild.test_pgbuild import builds  # noqa: F401  (a fixture)

NAME, VERSION = "postgresql-9", "9.1-1"
FREELIST = "src/backend/storage/buffer/freelist.c"


def errors(err: str) -> str:
    """stderr without its progress lines: what went wrong, and nothing else (no traceback)."""
    return "".join(line for line in err.splitlines(True) if not line.startswith("[kbisect "))


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local mirror whose suite "fake" carries postgresql-9's source; kbisect knows 9."""
    repo = fakeapt.source_repository(tmp_path, {NAME: VERSION})
    reg = fakeapt.registry(tmp_path, f"file:{repo}", {"9.9": "linux-source-9.9"})
    monkeypatch.setenv(release.REGISTRY_ENV, str(reg))
    monkeypatch.setitem(server.SUITES, 9, "fake")
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    return repo


def test_the_source_list_and_apt_are_private_and_signed() -> None:
    reg = release.registry(release.REGISTRY)
    assert debsrc.sources_list(reg, "trixie") == (
        f"deb-src [signed-by={reg.keyring}] {reg.mirror} trixie main\n"
    )
    state = Path("/c/apt/postgresql-17")
    cmd = debsrc.source_command(state, "postgresql-17")
    assert cmd[0] == "apt-get" and cmd[-3:] == ["source", "--download-only", "postgresql-17"]
    assert f"Dir::Etc::SourceList={state / 'sources.list'}" in cmd
    assert "Dir::Etc::SourceParts=/dev/null" in cmd
    assert debsrc.unpack_command(Path("/t/p.dsc"), Path("/t/src")) == [
        "dpkg-source", "--no-copy", "-x", "/t/p.dsc", "/t/src"
    ]  # fmt: skip


def test_the_import_applies_debians_patches_as_one_tagged_commit_then_works_offline(
    mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree, tag = debsrc.ensure(9)
    assert tree == debsrc.tree_dir(9) and tag == "debian/9.1-1"
    assert "int debian_patched = 1;" in (tree / FREELIST).read_text()  # the series applied
    assert (tree / "debian/changelog").is_file()
    assert gitmod.git(tree, "rev-list", "--count", tag) == "1"
    assert not gitmod.git(tree, "status", "--porcelain")
    first = gitmod.rev_parse(tree, tag)
    left = {p.name for p in tree.parent.iterdir()}
    assert left == {"debian-9", "debian-9.import.log", ".debian-9.lock"}  # no scratch left
    log = (tree.parent / "debian-9.import.log").read_text()
    assert log.startswith("# reproduce: kbisect pg-build debian:9")
    shutil.rmtree(mirror)  # offline: the imported tree is used as it is
    assert debsrc.ensure(9) == (tree, tag)
    # the same package gives the same commit on another machine (fixed identity and date)
    shutil.rmtree(tree)
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache2"))
    again = fakeapt.source_repository(tmp_path / "m2", {NAME: VERSION})
    reg = fakeapt.registry(tmp_path / "m2", f"file:{again}", {"9.9": "linux-source-9.9"})
    monkeypatch.setenv(release.REGISTRY_ENV, str(reg))
    tree2, _ = debsrc.ensure(9)
    assert tree2 != tree and gitmod.rev_parse(tree2, tag) == first


def test_a_build_from_debian_names_its_version_and_takes_patches_on_top(
    mirror: Path,
    builds: list[list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    patch = tmp_path / "0001-batch.diff"
    patch.write_text(
        f"--- a/{FREELIST}\n+++ b/{FREELIST}\n@@ -1,2 +1,2 @@\n"
        " int clock_sweep = 1;\n-int debian_patched = 1;\n+int debian_patched = 2;\n"
    )
    source = build.resolve(spec.parse("debian:9"), [patch])
    tree, tag = debsrc.ensure(9)
    assert source.described == "debian:9 (9.1-1)"
    assert source.base == gitmod.rev_parse(tree, tag) and source.commit != source.base
    key, made = build.build(spec.parse("debian:9"), [patch])
    assert made["source"] == "debian:9 (9.1-1)" and made["runs_on"] == {"suite": "fake",
                                                                         "major": 9}  # fmt: skip
    assert [(p["file"], p["subject"]) for p in made["patches"]] == [
        ("0001-batch.diff", "Apply 0001-batch.diff")
    ]
    assert "debian_patched = 2" in (store.install_dir(key) / "bin/postgres").read_text()
    plain, _ = build.build(spec.parse("debian:9"))
    assert plain != key and len(builds) == 2


def test_a_patch_that_does_not_apply_on_debians_source_is_one_line_exit_2(
    mirror: Path,
    builds: list[list[str]],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stale = tmp_path / "stale.diff"
    stale.write_text(f"--- a/{FREELIST}\n+++ b/{FREELIST}\n@@ -1 +1 @@\n-int gone;\n+int x;\n")
    with pytest.raises(PatchDoesNotApply):
        build.build(spec.parse("debian:9"), [stale])
    assert builds == []
    capsys.readouterr()
    code = cli.main(["pg-build", "debian:9", "--patch", str(stale)])
    err = capsys.readouterr().err  # imported above: nothing but the refusal
    assert code == 2 and err.startswith(f"kbisect: {stale}: does not apply on ")
    assert err.count("\n") == 1 and builds == []


def test_a_mirror_that_lists_the_package_but_does_not_serve_it_is_one_line(
    mirror: Path,
    builds: list[list[str]],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    for f in (mirror / "pool").glob("*.orig.tar.xz"):
        f.unlink()  # as deb.debian.org does for postgresql-17's source here
    code = cli.main(["pg-build", "debian:9"])
    err = errors(capsys.readouterr().err)
    assert code == 3 and err.count("\n") == 1
    assert "lists the postgresql-9 source package in fake but does not serve its files" in err
    assert "--pg-build PATH@REV" in err and builds == []
    assert not debsrc.imported(9)


def test_a_suite_without_the_package_says_so(
    mirror: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(server.SUITES, 8, "fake")
    code = cli.main(["pg-build", "debian:8"])
    err = errors(capsys.readouterr().err)
    assert code == 3 and err.count("\n") == 1
    assert "fake at file:" in err and "carries no postgresql-8 source package" in err
