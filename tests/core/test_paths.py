"""The path boundary (kbisect/core/paths.py): what the OS would refuse is told in one
line before anything is made, and never comes out of exists()/is_dir() as an OSError
(Python 3.11 raises ENAMETOOLONG there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbisect.core import paths

LONG = "n" * 256


def classes(tmp_path: Path) -> dict[str, Path]:
    """One path of each class the boundary refuses whatever it is for."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    return {
        "a name in it is longer than 255 bytes": tmp_path / LONG,
        "more than a path may have": tmp_path.joinpath(*["d" * 200] * 21),
        "a symbolic link to nothing": tmp_path / "dangling",
        "is a symbolic link to nothing": tmp_path / "dangling" / "run",
        "a loop of symbolic links": tmp_path / "loop",
        f"({tmp_path / 'afile'} is a file)": tmp_path / "afile" / "sub",
    }


def test_each_class_is_named_without_an_oserror(tmp_path: Path) -> None:
    for words, path in classes(tmp_path).items():
        why = paths.why_not(path)
        assert why is not None and words in why, (path, why)
        with pytest.raises(paths.BadPath) as caught:
            paths.look(path, "--thing", "dir")
        assert str(caught.value).startswith(f"--thing {path}: ")
        assert "\n" not in str(caught.value)
    assert not (tmp_path / "nowhere").exists()


def test_a_usable_path_passes_whether_it_exists_or_not(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "d")
    assert paths.why_not(tmp_path / "d") is None
    assert paths.why_not(tmp_path / "new" / "deeper") is None
    assert paths.look(tmp_path / "link", "DIR", "dir")  # a link to a dir is read through
    assert not paths.look(tmp_path / "new", "DIR", "dir")
    assert not (tmp_path / "new").exists()


def test_the_wrong_kind_is_refused(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(paths.BadPath, match=r"afile: not a directory$"):
        paths.look(tmp_path / "afile", "--out", "dir")
    with pytest.raises(paths.BadPath, match=r"is a directory, not a file$"):
        paths.look(tmp_path, "-o", "file")


def test_an_output_is_never_a_link_and_nothing_is_made(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "to-file").symlink_to(tmp_path / "afile")
    (tmp_path / "to-dir").symlink_to(tmp_path)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    before = sorted(os.listdir(tmp_path))
    for name, want in (("to-file", "file"), ("to-dir", "dir"), ("dangling", "file")):
        with pytest.raises(paths.BadPath, match="a symbolic link; name the"):
            paths.output(tmp_path / name, "-o", want)
    with pytest.raises(paths.BadPath, match="not writable"):
        paths.output(Path("/proc/kbisect-test/out"), "--out", "dir")
    paths.output(tmp_path / "new" / "dir", "--out", "dir")
    paths.output(tmp_path / "new.csv", "-o", "file")
    assert sorted(os.listdir(tmp_path)) == before


@given(st.text(st.characters(codec="utf-8", exclude_characters="\0")))
def test_any_text_is_a_path_or_a_reason_never_an_error(text: str) -> None:
    why = paths.why_not(Path("/tmp") / "kbisect-no-such" / text)
    assert why is None or "\n" not in why


@pytest.mark.parametrize("var", ["KBISECT_CACHE", "KBISECT_RESULTS"])
def test_the_environment_dirs_are_checked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    for path in classes(tmp_path).values():
        monkeypatch.setenv(var, str(path))
        with pytest.raises(paths.UnusableDir, match=rf"\(\${var}\) "):
            paths.environment()
    monkeypatch.setenv(var, str(tmp_path / "not-yet"))
    paths.environment()
