"""Atomic writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from kbisect.core import atomic


class Boom(Exception):
    pass


@pytest.fixture
def d(tmp_path: Path) -> Path:
    """An empty folder (tmp_path also holds the isolated HOME)."""
    (tmp_path / "d").mkdir()
    return tmp_path / "d"


def test_write_json_sorts_keys_and_ends_with_a_newline(d: Path) -> None:
    path = d / "a" / "b.json"  # parents are created
    atomic.write_json(path, {"b": 1, "a": {"z": [1, 2], "y": None}})
    text = path.read_text()
    assert text == json.dumps({"a": {"y": None, "z": [1, 2]}, "b": 1}, indent=2) + "\n"
    assert text.index('"a"') < text.index('"b"') and text.index('"y"') < text.index('"z"')


def test_no_temp_file_is_left_behind(d: Path) -> None:
    for i in range(3):
        atomic.write_json(d / "x.json", {"i": i})
        atomic.write_text(d / "y.txt", f"{i}\n")
    assert sorted(p.name for p in d.iterdir()) == ["x.json", "y.txt"]
    assert json.loads((d / "x.json").read_text()) == {"i": 2}


def test_replaces_an_existing_file_by_rename(d: Path) -> None:
    path = d / "x.txt"
    path.write_text("old\n")
    reader = path.open()  # a reader holding the old file keeps reading the old file
    atomic.write_text(path, "new\n")
    assert reader.read() == "old\n" and path.read_text() == "new\n"
    reader.close()


def test_unserializable_data_leaves_the_old_file(d: Path) -> None:
    path = d / "x.json"
    atomic.write_json(path, {"ok": True})
    with pytest.raises(TypeError):
        atomic.write_json(path, {"bad": object()})
    assert json.loads(path.read_text()) == {"ok": True}
    assert [p.name for p in d.iterdir()] == ["x.json"]


def test_exception_during_write_leaves_the_old_file(
    d: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = d / "x.json"
    atomic.write_json(path, {"v": 1})

    def fsync_fails(fd: int) -> None:
        raise Boom("disk full")

    monkeypatch.setattr(os, "fsync", fsync_fails)
    with pytest.raises(Boom):
        atomic.write_json(path, {"v": 2})
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in d.iterdir()] == ["x.json"]


def test_interrupt_during_write_cleans_up_too(d: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_bytes(d / "x.bin", b"data")
    assert list(d.iterdir()) == []


def test_write_bytes_round_trips(d: Path) -> None:
    atomic.write_bytes(d / "x.bin", b"\x00\xff")
    atomic.write_text(d / "u.txt", "µs\n")
    assert (d / "x.bin").read_bytes() == b"\x00\xff"
    assert (d / "u.txt").read_bytes() == "µs\n".encode()


def test_mode_follows_the_umask_not_mkstemp(d: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic.write_text(d / "x.txt", "x")
    finally:
        os.umask(old)
    assert (d / "x.txt").stat().st_mode & 0o777 == 0o644


def fsync_spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, bool]]:
    """Record (device, inode, is a directory) of every fd passed to os.fsync."""
    seen: list[tuple[int, int, bool]] = []
    real = os.fsync

    def spy(fd: int) -> None:
        st = os.fstat(fd)
        seen.append((st.st_dev, st.st_ino, stat.S_ISDIR(st.st_mode)))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return seen


def ident(path: Path) -> tuple[int, int, bool]:
    st = path.stat()
    return (st.st_dev, st.st_ino, stat.S_ISDIR(st.st_mode))


def test_the_directory_is_fsynced_after_the_rename(
    d: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = fsync_spy(monkeypatch)
    path = d / "sub" / "x.json"
    atomic.write_json(path, {"v": 1})
    assert seen[-1] == ident(path.parent)  # the last fsync: the directory, after the rename
    assert any(not is_dir for _, _, is_dir in seen[:-1])  # the file's data before
    assert json.loads(path.read_text()) == {"v": 1}
