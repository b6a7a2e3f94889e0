"""Patches as commits: `git format-patch` files, mboxes of several (`b4 am`) and plain
unified diffs, applied in order on top of a revision in kbisect's own repository
(scratch.py), never in the user's.

A mail is applied with `git am` (its author, date and subject kept), a plain diff with
`git apply --index` and committed as "Apply <file name>"; the committer is kbisect's
fixed identity and date (tarball.FIXED_IDENTITY), so the same revision and the same patches
give the same commit id on every machine, and the build cache hits. Each result is
remembered under refs/kbisect/patched/ in kbisect's repository: applying again is a
lookup. A patch that does not apply is one line naming the file and its first failing
hunk (`PatchDoesNotApply`, exit 2); a file that is no patch at all is one line too.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import proc, reading
from kbisect.core.exceptions import UserError
from kbisect.source import git, scratch, tarball, worktree

REF_PREFIX = "refs/kbisect/patched/"
_DIFF = re.compile(r"^(diff --git |--- \S.*\n\+\+\+ \S)", re.MULTILINE)
_MAIL = re.compile(r"\A(From \S|(From|Subject|Date|Message-I[Dd]): )")
_FAILED = re.compile(r"patch failed: (.+):(\d+)$", re.MULTILINE)
_MISSING = re.compile(r"error: (.+): (does not exist in index|No such file or directory)$", re.M)
_FAILED_AT = re.compile(r"^Patch failed at (\d+) ", re.MULTILINE)


class NotAPatch(UserError):
    """A --patch file that is missing, unreadable or holds no diff."""


class PatchDoesNotApply(UserError):
    """A patch whose hunks do not apply on the revision."""


@dataclass(frozen=True)
class Patch:
    """One patch file, as read once: its path, content hash and whether it is mail."""

    path: Path
    sha256: str  # of the file's bytes, in full
    mail: bool  # git format-patch / mbox (git am), else a plain diff (git apply)
    text: str

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def short_hash(self) -> str:
        return self.sha256[:12]


def read(path: Path) -> Patch:
    """The patch file at `path`; NotAPatch (one line) when it cannot be read or holds no
    unified diff."""
    text = reading.text(path, error=NotAPatch)
    if not _DIFF.search(text):
        raise NotAPatch(f"{path}: not a patch (no unified diff in it)")
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Patch(path.resolve(), digest, bool(_MAIL.match(text)), text)


def read_all(paths: Sequence[str | Path]) -> tuple[Patch, ...]:
    return tuple(read(Path(p).expanduser()) for p in paths)


def key(base: str, patches: Sequence[Patch]) -> str:
    """What names one (revision, patches in order) result: the patches by content."""
    parts = [base, *(p.sha256 for p in patches)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def apply_commands(where: Path, patch: Patch) -> list[list[str]]:
    """The commands that put one patch on top of `where`'s HEAD as commits (pure)."""
    if patch.mail:
        return [
            git.command(where, "am", "-q", "--no-3way", "--no-gpg-sign", str(patch.path)),
        ]
    message = f"Apply {patch.name}"
    return [
        git.command(where, "apply", "--index", str(patch.path)),
        git.command(where, "commit", "-q", "--no-verify", "--no-gpg-sign", "-m", message),
    ]


def apply(repo: Path, base: str, patches: Sequence[Patch]) -> str:
    """The commit of `base` (as `repo` names it) with `patches` applied in order, made in
    kbisect's repository; `base` itself without patches. PatchDoesNotApply, before any
    build, when one does not apply."""
    commit = scratch.rev_parse(repo, base)
    if not patches:
        return commit
    own = worktree.scratch_repo(repo)
    ref = REF_PREFIX + key(commit, patches)
    made = git.git(own, "rev-parse", "--verify", "--quiet", ref, check=False)
    if made and git.has_commit(own, made):
        return made
    with worktree.locked(worktree.path_for(repo, "patch")):
        where = worktree.checkout(repo, commit, slot="patch")
        _clear_am(where)
        for patch in patches:
            _apply_one(where, patch, commit)
        made = git.git(where, "rev-parse", "HEAD")
    git.git(own, "update-ref", ref, made)
    return made


def _clear_am(where: Path) -> None:
    """Forget what a `git am` killed halfway left in the slot's admin dir (the caller
    holds the slot's lock), and its lock files."""
    admin = git.git_dir(where)
    shutil.rmtree(admin / "rebase-apply", ignore_errors=True)
    for left in admin.glob("*.lock"):
        left.unlink(missing_ok=True)


def _apply_one(where: Path, patch: Patch, base: str) -> None:
    for cmd in apply_commands(where, patch):
        result = proc.run(cmd, env=tarball.FIXED_IDENTITY, check=False, capture=True)
        if result.returncode != 0:
            if patch.mail:
                proc.run(git.command(where, "am", "--abort"), check=False, capture=True)
            raise PatchDoesNotApply(
                f"{patch.path}: does not apply on {base[:12]}: {failing_hunk(patch, result.output)}"
            )


def failing_hunk(patch: Patch, output: str) -> str:
    """The first failing hunk git's error output names, as `file @@ ... @@` read from the
    patch itself; else git's own first error line."""
    failed = _FAILED.search(output)
    if failed is None:
        missing = _MISSING.search(output)
        if missing is not None:
            return f"{missing[1]}: no such file in the tree"
        errors = [ln for ln in output.splitlines() if ln.startswith(("error:", "fatal:"))]
        return (errors or [output.strip() or "git failed"])[0]
    path, line = failed[1], int(failed[2])
    text = _nth_mail(patch.text, _FAILED_AT.search(output)) if patch.mail else patch.text
    header = hunk_header(text, path, line)
    return f"first failing hunk {path} {header}" if header else f"{path}:{line} does not match"


def _nth_mail(text: str, failed_at: re.Match[str] | None) -> str:
    """The mail of an mbox that `git am` stopped at (its number, from 1); the whole text
    when it does not say."""
    if failed_at is None:
        return text
    mails = re.split(r"^(?=From \S+ .*\d{4}$)", text, flags=re.MULTILINE)
    mails = [m for m in mails if m.strip()]
    n = int(failed_at[1])
    return mails[n - 1] if 0 < n <= len(mails) else text


def hunk_header(text: str, path: str, old_start: int) -> str | None:
    """The `@@ -old_start,... @@` line of `path`'s section of the diff, if there is one."""
    section = None
    for line in text.splitlines():
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t")[0].strip()
            if name != "/dev/null":
                section = name.split("/", 1)[1] if name[:2] in ("a/", "b/") else name
        elif line.startswith("@@ -") and section == path:
            start = re.match(r"@@ -(\d+)", line)
            if start is not None and int(start[1]) == old_start:
                return line
    return None


def describe(repo: Path, base: str, patches: Sequence[Patch], made: str) -> list[dict[str, Any]]:
    """Each patch as the report names it: file name, subject(s) of the commits it made,
    content hash (12 hex), in the order applied."""
    if not patches:
        return []
    own = scratch.path_for(repo)
    subjects = git.git(own, "log", "--reverse", "--format=%s", f"{base}..{made}").splitlines()
    out = []
    for patch in patches:
        count = patch_count(patch)
        mine, subjects = subjects[:count], subjects[count:]
        out.append({"file": patch.name, "subject": "; ".join(mine), "sha256": patch.short_hash})
    return out


def patch_count(patch: Patch) -> int:
    """How many commits the patch makes: one per mail of an mbox, one for a plain diff."""
    if not patch.mail:
        return 1
    froms = re.findall(r"^From \S+ .*\d{4}$", patch.text, flags=re.MULTILINE)
    return max(1, len(froms))
