"""What `--pg-build` names: `debian:MAJOR` (Debian's source package of that major, from the
suite that carries it) or `PATH[@REV]` (a PostgreSQL git tree at a revision, HEAD by
default). Parsed before anything is built; a bad one is one line, exit 2."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kbisect.core.exceptions import UserError
from kbisect.scenario import server

_DEBIAN = re.compile(r"debian:(\d+)")


class BadBuildSpec(UserError):
    """A --pg-build value that names no PostgreSQL source."""


@dataclass(frozen=True)
class Spec:
    kind: str  # "debian" or "git"
    major: int | None = None  # debian: the major
    tree: Path | None = None  # git: the repository
    rev: str = "HEAD"  # git: the revision

    def describe(self) -> str:
        if self.kind == "debian":
            return f"debian:{self.major}"
        return f"{self.tree}@{self.rev}"


def parse(text: str) -> Spec:
    if m := _DEBIAN.fullmatch(text):
        major = int(m.group(1))
        if problem := server.Pin(major).problem():
            raise BadBuildSpec(f"--pg-build {text}: {problem.split(': ', 1)[1]}")
        return Spec("debian", major=major)
    if text.startswith("debian:"):
        raise BadBuildSpec(f"--pg-build {text}: debian: takes a major, e.g. debian:17")
    path, sep, rev = text.rpartition("@") if "@" in text else (text, "", "HEAD")
    if sep and not rev:
        raise BadBuildSpec(f"--pg-build {text}: a revision after @, e.g. {path}@REL_17_6")
    tree = Path(path).expanduser()
    bare = (tree / "HEAD").is_file() and (tree / "objects").is_dir()
    if not tree.is_dir() or not ((tree / ".git").exists() or bare):
        raise BadBuildSpec(
            f"--pg-build {text}: {tree} is not a git repository (want debian:MAJOR or PATH[@REV])"
        )
    return Spec("git", tree=tree.resolve(), rev=rev)
