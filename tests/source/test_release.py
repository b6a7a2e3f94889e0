"""Debian releases as trees (`--tree debian:7.2`): the registry, the private apt commands,
and `kbisect tree add` end to end against a local repository (tests/fakeapt.py), offline
once imported; the real registry in the `real` tier."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core import proc
from kbisect.source import git, release, tree
from tests import fakeapt


@pytest.fixture
def fake_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = fakeapt.repository(tmp_path, {"9.9": "9.9.1-1"})
    reg = fakeapt.registry(
        tmp_path,
        f"file:{repo}",
        {"9.9": "linux-source-9.9", "9.8": "linux-source-9.8"},
    )
    monkeypatch.setenv(release.REGISTRY_ENV, str(reg))
    return repo


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- pure ------------------------------------------------------------------------------


def test_the_shipped_registry_loads_and_names_each_release_once() -> None:
    reg = release.registry(release.REGISTRY)
    assert {"6.1", "6.12", "7.2", "7.3"} <= set(reg.releases)
    assert reg.get("7.2").package == "linux-source-7.2"
    assert reg.get("7.2").suites == ("sid",)
    assert not reg.trusted and Path(reg.keyring).name == "debian-archive-keyring.gpg"


def test_sources_list_is_signed_by_the_keyring_or_trusted_for_a_local_repo() -> None:
    reg = release.registry(release.REGISTRY)
    text = release.sources_list(reg, reg.get("6.12"))
    assert text.splitlines() == [
        f"deb [signed-by={reg.keyring}] {reg.mirror} trixie main",
        f"deb [signed-by={reg.keyring}] {reg.mirror} bookworm-backports main",
    ]


def test_apt_is_confined_to_the_state_dir(tmp_path: Path) -> None:
    cmd = release.update_command(tmp_path)
    opts = dict(o.split("=", 1) for o in cmd[2::2] if "=" in o and "::" in o)
    assert opts["Dir::Etc::SourceList"] == str(tmp_path / "sources.list")
    assert opts["Dir::Etc::SourceParts"] == "/dev/null"
    assert opts["Dir::State::Lists"].startswith(str(tmp_path))
    assert opts["Dir::Cache"].startswith(str(tmp_path))


@pytest.mark.parametrize(
    ("version", "tag"),
    [("7.2.13-1", "debian/7.2.13-1"), ("1:7.2~rc3-1", "debian/1%7.2_rc3-1")],
)
def test_tag_spells_the_debian_version_as_dep14(version: str, tag: str) -> None:
    assert release.tag_for(version) == tag
    assert subprocess.run(["git", "check-ref-format", f"refs/tags/{tag}"]).returncode == 0


@pytest.mark.parametrize(
    "spec", ["debian:", "debian:seven", "debian:7.2/x", "debian:../x", "7.2", "xdebian:7.2"]
)
def test_a_malformed_name_is_one_line_exit_2(spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "tree", "add", spec)
    assert code == 2
    assert err == f"kbisect: {spec}: expected debian:<release>, e.g. debian:7.2\n"


def test_an_unknown_release_names_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "tree", "add", "debian:7.9")
    assert code == 2
    assert err.startswith("kbisect: debian:7.9: not a Debian release kbisect knows (6.1, 6.12,")
    assert err.count("\n") == 1


def test_a_bad_registry_file_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "r.toml"
    bad.write_text('mirror = "file:/x"\n[releases."9.9"]\npackage = "p"\nsuites = "sid"\n')
    monkeypatch.setenv(release.REGISTRY_ENV, str(bad))
    code, _, err = run(capsys, "tree", "add", "debian:9.9")
    assert code == 2
    assert "releases.9.9.suites must be a list of strings" in err and err.count("\n") == 1


# -- against a local repository ---------------------------------------------------------


def test_tree_add_imports_once_then_works_offline(
    fake_registry: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "tree", "add", "debian:9.9")
    assert code == 0
    path = release.tree_dir("9.9")
    assert out == f"debian:9.9\tdebian/9.9.1-1\t{path}\n"
    assert tree.check_kernel_tree(path) == path
    files = git.git(path, "ls-files").split()
    assert ".gitignore" in files and "kernel/sched/core.c" in files  # `/*` ignored, added -f
    assert "Import linux-source-9.9.tar.xz from Debian linux-source-9.9 9.9.1-1" in git.git(
        path, "log", "-1", "--format=%s"
    )
    assert not git.git(path, "status", "--porcelain")
    assert not list((release.apt_dir("9.9") / "debs").glob("*.deb"))  # nothing left over
    log = path.parent / f"{path.name}.import.log"
    assert log.read_text().splitlines()[0].endswith("kbisect tree add debian:9.9")
    # offline from now on: the repository is gone, the tree still resolves
    shutil.rmtree(fake_registry)
    assert tree.resolve("debian:9.9") == path
    code, out, _ = run(capsys, "tree", "add", "debian:9.9")
    assert code == 0 and "debian/9.9.1-1" in out
    code, out, _ = run(capsys, "tree", "list")
    line = next(x for x in out.splitlines() if x.startswith("debian:9.9 "))
    assert "debian/9.9.1-1" in line and str(path) in line
    assert "not imported" in next(x for x in out.splitlines() if x.startswith("debian:9.8 "))


def test_the_import_commit_is_the_same_on_every_import(
    fake_registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = git.rev_parse(release.add("debian:9.9"), "debian/9.9.1-1")
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "other-cache"))
    second = git.rev_parse(release.add("debian:9.9"), "debian/9.9.1-1")
    assert first == second


def test_a_tree_option_resolves_debian_names_importing_on_first_use(
    fake_registry: Path,
) -> None:
    path = tree.resolve("debian:9.9")
    assert path == release.tree_dir("9.9")
    assert git.git(path, "tag", "-l") == "debian/9.9.1-1"


def test_a_release_the_suite_does_not_carry_is_exit_2(
    fake_registry: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "tree", "add", "debian:9.8")
    assert code == 2
    assert err.splitlines()[-1] == (
        f"kbisect: debian:9.8: fake at file:{fake_registry} does not carry linux-source-9.8"
    )
    assert not release.tree_dir("9.8").exists()


def test_an_unreachable_suite_is_exit_3_and_leaves_no_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reg = fakeapt.registry(tmp_path, f"file:{tmp_path / 'nowhere'}", {"9.9": "linux-source-9.9"})
    monkeypatch.setenv(release.REGISTRY_ENV, str(reg))
    code, _, err = run(capsys, "tree", "add", "debian:9.9")
    assert code == 3
    last = err.splitlines()[-1]
    assert last.startswith("kbisect: debian:9.9: apt could not fetch the signed index of fake")
    assert sum(x.startswith("kbisect:") for x in err.splitlines()) == 1
    assert not release.tree_dir("9.9").exists()


# -- the real registry -------------------------------------------------------------------


@pytest.mark.real
def test_every_release_in_the_registry_is_carried_by_its_suites(tmp_path: Path) -> None:
    """Debian's mirror, through the same private apt state: each release's suites carry
    its package (the index only; no download)."""
    reg = release.registry(release.REGISTRY)
    for name, rel in reg.releases.items():
        state = tmp_path / name
        for sub in ("lists/partial", "cache/archives/partial"):
            (state / sub).mkdir(parents=True)
        (state / "sources.list").write_text(release.sources_list(reg, rel))
        proc.run(release.update_command(state), timeout=600)
        shown = proc.run(release.show_command(state, rel.package), capture=True)
        assert f"Package: {rel.package}" in shown.output, name
