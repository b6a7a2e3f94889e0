"""The patches kernel-patches/ ships are what their headers say they are.

A revert there undoes exactly what the upstream commit changed: every line it removes
is a line the commit added, every line it adds is one the commit removed, hunk by hunk
and in order, checked against the commit's fingerprints in the folder's upstream/
(scripts/patch-fingerprint). Hunks whose place or context differs in the release the
patch is for are the ones its header lists (`Moved:` / `Adapted:` lines), no more, no
fewer. The real tier checks that it applies to the imported Debian release.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import scripts

CHECKOUT = Path(__file__).resolve().parents[2]
PATCHES = CHECKOUT / "kernel-patches"
REVERT = PATCHES / "7.2" / "0001-Revert-sched-Further-restrict-the-preemption-modes.patch"
UPSTREAM = PATCHES / "7.2" / "upstream" / "7dadeaa6e851.json"
COMMIT = "7dadeaa6e851e7d67733f3e24fc53ee107781d0f"
# Where `kbisect tree add debian:7.2` imports Linux 7.2 (Debian's linux-source-7.2), and
# the tag of the release the revert is made for.
TREES_72 = ("trees/debian-7.2",)
TAG_72 = "debian/7.2.13-1"
LISTED = re.compile(r"^(Moved|Adapted): (\S+), hunk (\d+)\b", re.MULTILINE)
INVERSE = {"+": "-", "-": "+", " ": " "}

fp = scripts.load("patch-fingerprint")


def revert_hunks() -> list[Any]:
    return list(fp.parse(REVERT.read_text()))


def upstream() -> dict[str, Any]:
    return dict(json.loads(UPSTREAM.read_text()))


def header() -> str:
    """The commit message: what comes before the diffstat's `---` line."""
    return REVERT.read_text().split("\n---\n", 1)[0]


def numbered(hunks: list[Any]) -> list[tuple[str, int]]:
    """(file, n) for each hunk, n counting from 1 within its file, as the header names
    them."""
    seen: dict[str, int] = {}
    out = []
    for hunk in hunks:
        path = hunk.path if isinstance(hunk, fp.Hunk) else hunk["path"]
        seen[path] = seen.get(path, 0) + 1
        out.append((path, seen[path]))
    return out


def signed(hunk: dict[str, Any], sign: str) -> list[str]:
    """`SIGN DIGEST` of a fingerprinted hunk's lines of one sign."""
    return [line for line in hunk["lines"] if line[0] == sign]


def test_the_revert_turns_every_changed_line_of_the_commit_round() -> None:
    ours, theirs = revert_hunks(), upstream()["hunks"]
    assert numbered(ours) == numbered(theirs)
    for mine, commit in zip(ours, theirs, strict=True):
        for sign in "-+":
            # The revert's `-` lines, signed `+`, are the commit's `+` lines, in order.
            turned = [sign + line[1:] for line in mine.signed(INVERSE[sign])]
            assert [f"{sign} {fp.digest(line)}" for line in turned] == signed(commit, sign)


def test_the_moved_and_adapted_hunks_are_the_listed_ones() -> None:
    """Moved: the revert's old side starts elsewhere than the commit's new side (7.2 has
    lines added or removed above it). Adapted: its context lines differ."""
    ours, theirs = revert_hunks(), upstream()["hunks"]
    moved, adapted = set(), set()
    for name, mine, commit in zip(numbered(ours), ours, theirs, strict=True):
        if mine.old_start != commit["new"][0]:
            moved.add(name)
        context = [f"  {fp.digest(line)}" for line in mine.signed(" ")]
        if context != signed(commit, " "):
            adapted.add(name)
    listed = LISTED.findall(header())
    assert {(path, int(n)) for kind, path, n in listed if kind == "Moved"} == moved
    assert {(path, int(n)) for kind, path, n in listed if kind == "Adapted"} == adapted
    # This revert for 7.2, as found: sched_dynamic_show() gained a line since the commit.
    assert adapted == {("kernel/sched/debug.c", 1)}


def test_the_header_says_where_the_commit_comes_from() -> None:
    text = header()
    assert f"This reverts commit {COMMIT}" in text
    assert f"https://git.kernel.org/torvalds/c/{COMMIT}" in text
    assert str(UPSTREAM.relative_to(CHECKOUT)) in text
    assert upstream()["commit"] == COMMIT
    assert 'Subject: [PATCH] Revert "sched: Further restrict the preemption modes"' in text


def test_the_revert_is_a_format_patch_file() -> None:
    lines = REVERT.read_text().splitlines()
    assert re.fullmatch(r"From [0-9a-f]{40} Mon Sep 17 00:00:00 2001", lines[0])
    assert lines[1].startswith("From: ") and lines[2].startswith("Date: ")
    assert " 3 files changed, 2 insertions(+), 5 deletions(-)" in lines


def test_the_fingerprints_are_of_the_parsed_lines() -> None:
    """parse() counts a hunk's lines from its header: a mail signature after the last
    hunk (`-- `) is not a removed line, a `\\ No newline` marker is skipped."""
    text = (
        "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@ fn\n a\n-b\n+c\n"
        "\\ No newline at end of file\n-- \n2.39.5\n"
    )
    (hunk,) = fp.parse(text)
    assert (hunk.path, hunk.old_start, hunk.new_len, hunk.function) == ("f", 1, 2, "fn")
    assert hunk.lines == [" a", "-b", "+c"]
    assert fp.fingerprint([hunk])[0]["lines"][1] == f"- {fp.digest('-b')}"


@pytest.mark.real
def test_the_revert_applies_to_the_imported_72_tree(real_cache: Path, tmp_path: Path) -> None:
    """`git apply --check` against the imported release's tag, through a throwaway
    index: the cached tree is only read."""
    tree = next((real_cache / t for t in TREES_72 if (real_cache / t).is_dir()), None)
    if tree is None:
        pytest.skip("Linux 7.2 is not imported (kbisect tree add debian:7.2)")
    git = ["git", "-C", str(tree)]
    if subprocess.run([*git, "rev-parse", "-q", "--verify", TAG_72], check=False).returncode:
        pytest.skip(f"{tree} has no tag {TAG_72}")
    env = {**os.environ, "GIT_INDEX_FILE": str(tmp_path / "index")}
    subprocess.run([*git, "read-tree", TAG_72], env=env, check=True)
    done = subprocess.run(
        [*git, "apply", "--check", "--cached", str(REVERT)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
