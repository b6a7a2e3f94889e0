"""A kernel source tarball imported into a git repository of its own: one commit with a
fixed author, committer and date, so the same tarball gives the same commit id on every
machine, and one tag. Debian's tarballs carry a `.gitignore` of `/*`, hence `git add -f`.
The repository is made in a temporary directory beside its place and renamed there when
complete, so an interrupted import leaves nothing half-made behind."""

from __future__ import annotations

from pathlib import Path

from kbisect.core import once, proc

FIXED_IDENTITY = {
    "GIT_AUTHOR_NAME": "kbisect",
    "GIT_AUTHOR_EMAIL": "kbisect@localhost",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "kbisect",
    "GIT_COMMITTER_EMAIL": "kbisect@localhost",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000",
}


def import_commands(tarball: Path, dest: Path, tag: str, message: str) -> list[list[str]]:
    """The commands that turn the tarball into a git repo at dest, tagged `tag` (pure)."""
    return [
        ["tar", "-xf", str(tarball), "-C", str(dest), "--strip-components=1"],
        *commit_commands(dest, tag, message),
    ]


def commit_commands(dest: Path, tag: str, message: str) -> list[list[str]]:
    """The commands that make the files at `dest` one tagged commit of a new repo (pure)."""
    g = ["git", "-C", str(dest)]
    return [
        [*g, "init", "-q", "-b", "master"],
        [*g, "config", "core.autocrlf", "false"],
        [*g, "config", "gc.auto", "0"],
        [*g, "add", "-f", "-A", "."],
        # --no-gpg-sign: a user's commit.gpgsign would change (or fail) the fixed commit.
        [*g, "commit", "-q", "--no-verify", "--no-gpg-sign", "-m", message],
        [*g, "tag", tag],
    ]


def import_into(tarball: Path, dest: Path, tag: str, message: str, log: Path) -> None:
    """Import `tarball` as the repository `dest` (replacing a half-made one)."""

    def make(scratch: Path) -> None:
        scratch.mkdir()
        for cmd in import_commands(tarball, scratch, tag, message):
            proc.run(cmd, log=log, env=FIXED_IDENTITY)

    once.build(dest, make)
