"""Patches as commits in kbisect's own repository: format-patch files, an mbox of two,
plain diffs; in order; refused with the failing hunk; the user's repository untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.core.exceptions import EXIT_USER
from kbisect.report import patches as report_patches
from kbisect.source import git as gitmod
from kbisect.source import patches, scratch
from tests.fakes import git, make_fake_kernel_repo, repo_snapshot

KNOB = "kernel/knob.c"


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "linux"
    lines = "".join(f"int line{i};\n" for i in range(20))
    shas = make_fake_kernel_repo(
        path,
        [
            {"subject": "add the knob", "files": {KNOB: "int knob = 1;\n" + lines}},
            {"subject": "touch fair.c", "files": {"kernel/fair.c": "int fair;\n"}},
        ],
    )
    return path, shas


def mails(repo: Path, tmp_path: Path, changes: list[tuple[str, str]], name: str) -> Path:
    """An mbox of one mail per (subject, new knob line) made on a throwaway branch of a
    copy of `repo` (git format-patch --stdout, as `b4 am` writes)."""
    work = tmp_path / f"work-{name}"
    git(tmp_path, "clone", "-q", str(repo), str(work))
    for subject, knob in changes:
        text = (work / KNOB).read_text().splitlines(keepends=True)
        (work / KNOB).write_text(knob + "".join(text[1:]))
        git(work, "commit", "-q", "-am", subject)
    out = tmp_path / name
    out.write_text(git(work, "format-patch", "--stdout", f"-{len(changes)}") + "\n")
    return out


def plain_diff(tmp_path: Path, name: str, old: str, new: str, line: int = 1) -> Path:
    out = tmp_path / name
    context = "".join(f" int line{i};\n" for i in range(line - 1, line + 1))
    out.write_text(
        f"--- a/{KNOB}\n+++ b/{KNOB}\n@@ -{line},3 +{line},3 @@\n-{old}\n+{new}\n{context}"
    )
    return out


def knob_at(repo: Path, commit: str) -> str:
    return git(scratch.path_for(repo), "show", f"{commit}:{KNOB}").splitlines()[0]


def test_a_format_patch_becomes_a_commit_with_its_subject(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, shas = repo
    patch = patches.read(mails(path, tmp_path, [("knob: set it to 2", "int knob = 2;\n")], "a"))
    assert patch.mail
    made = patches.apply(path, shas[-1], [patch])
    assert knob_at(path, made) == "int knob = 2;"
    assert git(scratch.path_for(path), "rev-parse", f"{made}^") == shas[-1]
    described = patches.describe(path, shas[-1], [patch], made)
    assert described == [{"file": "a", "subject": "knob: set it to 2", "sha256": patch.short_hash}]
    assert 'a ("knob: set it to 2", sha256 ' in report_patches.line(described)


def test_an_mbox_of_two_and_a_plain_diff_apply_in_order(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, shas = repo
    two = [("knob: 2", "int knob = 2;\n"), ("knob: 3", "int knob = 3;\n")]
    mbox = patches.read(mails(path, tmp_path, two, "series.mbx"))
    plain = patches.read(plain_diff(tmp_path, "four.diff", "int knob = 3;", "int knob = 4;"))
    assert not plain.mail and patches.patch_count(mbox) == 2
    made = patches.apply(path, shas[-1], [mbox, plain])
    assert knob_at(path, made) == "int knob = 4;"
    own = scratch.path_for(path)
    assert git(own, "log", "--format=%s", f"{shas[-1]}..{made}").splitlines() == [
        "Apply four.diff",
        "knob: 3",
        "knob: 2",
    ]
    described = patches.describe(path, shas[-1], [mbox, plain], made)
    assert [d["subject"] for d in described] == ["knob: 2; knob: 3", "Apply four.diff"]
    # the other order does not apply: the plain diff expects the knob at 3
    with pytest.raises(patches.PatchDoesNotApply):
        patches.apply(path, shas[-1], [plain, mbox])


def test_the_same_patches_on_the_same_revision_give_the_same_commit(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, shas = repo
    plain = patches.read(plain_diff(tmp_path, "two.diff", "int knob = 1;", "int knob = 2;"))
    made = patches.apply(path, shas[-1], [plain])
    git(
        scratch.path_for(path),
        "update-ref",
        "-d",
        patches.REF_PREFIX + patches.key(shas[-1], [plain]),
    )
    assert patches.apply(path, shas[-1], [plain]) == made  # made again: fixed identity
    assert patches.apply(path, shas[-1], []) == shas[-1]
    assert patches.apply(path, shas[-2], [plain]) != made


def test_a_patch_that_does_not_apply_names_its_first_failing_hunk(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, shas = repo
    bad = patches.read(plain_diff(tmp_path, "bad.diff", "int line9;", "int line9x;", line=5))
    with pytest.raises(patches.PatchDoesNotApply) as err:
        patches.apply(path, shas[-1], [bad])
    line = str(err.value)
    assert err.value.exit_code == EXIT_USER and "\n" not in line
    assert line.startswith(f"{bad.path}: does not apply on {shas[-1][:12]}: ")
    assert line.endswith(f"first failing hunk {KNOB} @@ -5,3 +5,3 @@")
    # a mail: the same, and the slot is usable again afterwards
    mail = patches.read(mails(path, tmp_path, [("knob: 2", "int knob = 2;\n")], "m"))
    made = patches.apply(path, shas[-1], [mail])
    with pytest.raises(patches.PatchDoesNotApply, match=f"first failing hunk {KNOB} @@ -1,"):
        patches.apply(path, made, [mail])
    assert patches.apply(path, shas[-1], [mail]) == made


def test_a_patch_on_a_missing_file_says_so(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, shas = repo
    out = tmp_path / "gone.diff"
    out.write_text("--- a/kernel/gone.c\n+++ b/kernel/gone.c\n@@ -1,1 +1,1 @@\n-a\n+b\n")
    with pytest.raises(patches.PatchDoesNotApply, match=r"kernel/gone\.c: no such file"):
        patches.apply(path, shas[-1], [patches.read(out)])


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "no such file"), ("hello\n", "not a patch"), (b"\xff\xfe", "not UTF-8")],
)
def test_a_file_that_is_no_patch_is_one_line(
    tmp_path: Path, content: str | bytes | None, problem: str
) -> None:
    where = tmp_path / "x.patch"
    if isinstance(content, str):
        where.write_text(content)
    elif content is not None:
        where.write_bytes(content)
    with pytest.raises(patches.NotAPatch, match=problem) as err:
        patches.read(where)
    assert err.value.exit_code == EXIT_USER and "\n" not in str(err.value)
    with pytest.raises(patches.NotAPatch, match="is a directory"):
        patches.read(tmp_path)


def test_the_users_repository_is_untouched(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, shas = repo
    mbox = patches.read(mails(path, tmp_path, [("knob: 2", "int knob = 2;\n")], "m"))
    plain = patches.read(plain_diff(tmp_path, "p.diff", "int knob = 2;", "int knob = 5;"))
    before = repo_snapshot(path)
    made = patches.apply(path, shas[-1], [mbox, plain])
    with pytest.raises(patches.PatchDoesNotApply):
        patches.apply(path, shas[1], [plain])
    assert repo_snapshot(path) == before
    assert not gitmod.has_commit(path, made)
