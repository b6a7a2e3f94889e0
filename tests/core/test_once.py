"""core/once.py: a cache directory is made under a scratch name and renamed into place
only when finished; with a manifest, that is written last."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kbisect.core import once


def test_build_with_manifest_replaces_the_tree_and_writes_the_manifest_last(
    tmp_path: Path,
) -> None:
    final, manifest = tmp_path / "img" / "root", tmp_path / "img" / "image.json"

    def make(partial: Path) -> dict[str, Any]:
        assert partial == tmp_path / "img" / "root.partial" and partial.parent.is_dir()
        partial.mkdir()
        (partial / "new").write_text("")
        return {"n": 1}

    assert once.build_with_manifest(final, manifest, make) == {"n": 1}
    assert [p.name for p in final.iterdir()] == ["new"]
    assert json.loads(manifest.read_text()) == {"n": 1}
    assert not final.with_name("root.partial").exists()

    def fail(partial: Path) -> dict[str, Any]:
        partial.mkdir()
        raise RuntimeError("mmdebstrap failed")

    with pytest.raises(RuntimeError):
        once.build_with_manifest(final, manifest, fail)
    assert (final / "new").exists() and manifest.exists()  # the finished one is kept
    assert final.with_name("root.partial").is_dir()  # the failed one, to be looked at


def test_build_in_a_temporary_dir_leaves_nothing_behind(tmp_path: Path) -> None:
    final = tmp_path / "trees" / "t"

    def make(scratch: Path) -> str:
        assert not scratch.exists() and scratch.parent.parent == final.parent
        assert scratch.parent.name.startswith(".t.")
        scratch.mkdir()
        (scratch / "f").write_text("new")
        (scratch.parent / "download").write_text("")  # beside it: removed with it
        return "tag"

    final.mkdir(parents=True)
    (final / "old").write_text("")  # half-made: replaced
    assert once.build(final, make) == "tag"
    assert [p.name for p in final.iterdir()] == ["f"]
    assert [p.name for p in final.parent.iterdir()] == ["t"]

    def fail(scratch: Path) -> str:
        scratch.mkdir()
        raise RuntimeError("tar failed")

    with pytest.raises(RuntimeError):
        once.build(final, fail)
    assert [p.name for p in final.parent.iterdir()] == ["t"]
    assert (final / "f").read_text() == "new"
