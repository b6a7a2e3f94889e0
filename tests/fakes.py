"""Helpers for tests that need a kernel tree: a git repository made from tests/fakelinux.

Example (shas[0] is the initial commit, shas[i] the commit made from commits[i - 1]):

    shas = make_fake_kernel_repo(tmp_path / "linux", [
        {"subject": "sched: fast", "tps": 1000},
        {"subject": "sched: slow", "tps": 500, "drop": ["CONFIG_PREEMPT_NONE"]},
        {"subject": "oops", "broken": True, "tag": "v6.13-rc1"},
    ])
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kbisect.core import proc

ROOT = Path(__file__).resolve().parent.parent
FAKELINUX = ROOT / "tests" / "fakelinux"
COMMIT_KEYS = {"subject", "tps", "broken", "drop", "add", "files", "version", "tag"}
# Build output of an in-place `make` in tests/fakelinux must not end up in a repo.
_OUTPUT = shutil.ignore_patterns(".config*", "System.map", "vmlinux", "arch", "include")


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` through kbisect.core.proc; return its output, stripped."""
    return proc.capture(["git", "-C", str(repo), *args])


def make_fake_kernel_repo(path: Path, commits: list[dict[str, Any]] | None = None) -> list[str]:
    """Create a git repo at `path` from tests/fakelinux; return every commit's SHA in order.

    The first SHA is the initial commit ("fake linux"), then one per dict in `commits`:
      subject: str            commit subject (required)
      tps: float | None       write TPS (the tps a fake benchmark reports); None removes it
      broken: bool            create (True) or remove (False) BROKEN: the build fails
      drop / add: list[str]   remove / add symbols in Kconfig.known (CONFIG_ optional)
      files: dict[str, str]   write these files (path relative to the repo -> content)
      version: str            write VERSION (what `make kernelrelease` prints)
      tag: str                tag the commit (lightweight)
    """
    shutil.copytree(FAKELINUX, path, ignore=_OUTPUT, dirs_exist_ok=True)
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "fake linux")
    shas = [git(path, "rev-parse", "HEAD")]
    for spec in commits or []:
        _apply(path, spec)
        git(path, "add", "-A")
        git(path, "commit", "-q", "--allow-empty", "-m", spec["subject"])
        if "tag" in spec:
            git(path, "tag", spec["tag"])
        shas.append(git(path, "rev-parse", "HEAD"))
    return shas


def users_repo_at_work(folder: Path, commits: list[dict[str, Any]]) -> tuple[Path, list[str]]:
    """folder/linux, a user's repository in the middle of their own work: packed refs, a
    linked worktree whose directory is away (folder/away: its disk is unmounted; it
    belongs at folder/mnt/linked), their own bisect, a staged and an unstaged change."""
    path = folder / "linux"
    shas = make_fake_kernel_repo(path, commits)
    git(path, "tag", "v6.12-user", shas[2])
    git(path, "pack-refs", "--all")
    git(path, "worktree", "add", "-q", "-b", "feature", str(folder / "mnt" / "linked"))
    (folder / "mnt" / "linked").rename(folder / "away")
    git(path, "bisect", "start", shas[-1], shas[1])
    (path / "README").write_text("staged\n")
    git(path, "add", "README")
    (path / "VERSION").write_text("unstaged\n")
    return path, shas


def _apply(repo: Path, spec: dict[str, Any]) -> None:
    unknown = set(spec) - COMMIT_KEYS
    if unknown or "subject" not in spec:
        raise ValueError(f"bad fake commit {spec!r}: keys are {sorted(COMMIT_KEYS)}")
    if "tps" in spec:
        _write_or_remove(repo / "TPS", None if spec["tps"] is None else f"{spec['tps']}\n")
    if "broken" in spec:
        _write_or_remove(repo / "BROKEN", "BROKEN\n" if spec["broken"] else None)
    if "version" in spec:
        (repo / "VERSION").write_text(f"{spec['version']}\n")
    for rel, content in spec.get("files", {}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(content)
    if "drop" in spec or "add" in spec:
        _edit_known(repo / "Kconfig.known", spec.get("drop", []), spec.get("add", []))


def _write_or_remove(path: Path, content: str | None) -> None:
    if content is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(content)


def _symbol(name: str) -> str:
    return name if name.startswith("CONFIG_") else f"CONFIG_{name}"


def _edit_known(path: Path, drop: list[str], add: list[str]) -> None:
    gone = {_symbol(s) for s in drop}
    lines = [line for line in path.read_text().splitlines() if line.strip() not in gone]
    lines += [_symbol(s) for s in add if _symbol(s) not in lines]
    path.write_text("".join(f"{line}\n" for line in lines))


@dataclass(frozen=True)
class FakeImage:
    """What a fake build wrote into bzImage / Image."""

    release: str
    tps: float | None
    config_sha256: str


def read_fake_image(image: Path) -> FakeImage:
    """Parse a fake kernel image (see tests/fakelinux/README)."""
    magic, release, tps, config_sha256 = image.read_text().split("\n")[:4]
    if magic != "fake-kernel":
        raise ValueError(f"{image}: not a fake kernel image")
    return FakeImage(release, float(tps) if tps.strip() else None, config_sha256)


def fake_target(folder: Path, name: str = "fake", **settings: Any) -> Path:
    """Write a fake target's TOML (kbisect/targets/fake/target.py) into folder; return its path.
    Its call log goes to folder/<name>-state/calls.jsonl (see `fake_calls`)."""
    settings.setdefault("state", str(folder / f"{name}-state"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text('kind = "fake"\n' + "".join(f"{k} = {_toml(v)}\n" for k, v in settings.items()))
    return path


def fake_pool(folder: Path, members: dict[str, dict[str, Any]], name: str = "pool") -> Path:
    """Write a pool file (kbisect/targets/pool/) of inline fake members into folder; each
    member's call log goes to folder/<member>-state/calls.jsonl. Return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ['kind = "pool"', f"name = {json.dumps(name)}"]
    for member, settings in members.items():
        settings = {"state": str(folder / f"{member}-state"), **settings}
        lines += ["", "[[member]]", 'kind = "fake"', f"name = {json.dumps(member)}"]
        lines += [f"{k} = {_toml(v)}" for k, v in settings.items()]
    path = folder / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return repr(value)


def fake_calls(target_file: Path) -> list[dict[str, Any]]:
    """Every boot the fake target played, in order (commit, append, key, index, nth)."""
    state = target_file.parent / f"{target_file.stem}-state" / "calls.jsonl"
    if not state.exists():
        return []
    # the fake guest appends under an exclusive flock: read under a shared one, or a line
    # it is writing comes out torn (a JSONDecodeError in the fault suite's watcher)
    with state.open() as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        return [json.loads(line) for line in f.read().splitlines()]


def fake_image(where: Path, tps: float | None = None) -> Path:
    """A fake kernel image (tests/fakelinux/README) in where/bzImage."""
    where.mkdir(parents=True, exist_ok=True)
    line = "" if tps is None else str(tps)
    (where / "bzImage").write_text(f"fake-kernel\n6.12.0-fake\n{line}\n0\n")
    return where / "bzImage"


def repo_snapshot(repo: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of a repository, .git included (refs, packed-refs, worktrees, index,
    objects, HEAD, BISECT_*, config, logs), with its bytes and mtime: equal snapshots mean
    nothing was written. Symlinks are recorded by target. Object files are compared by
    content only: git sets the mtime of a borrowed (alternate) object when a repository
    borrowing it writes an identical object, so that gc keeps it; no byte changes."""
    out: dict[str, tuple[bytes, int]] = {}
    for path in sorted(repo.rglob("*")):
        rel = str(path.relative_to(repo))
        mtime = 0 if rel.startswith(".git/objects/") else path.lstat().st_mtime_ns
        if path.is_symlink():
            out[rel] = (str(path.readlink()).encode(), mtime)
        elif path.is_file():
            out[rel] = (path.read_bytes(), mtime)
        else:
            out[rel + "/"] = (b"", 0)
    return out


# Writes its own pid (atomically: a reader never sees an empty file), then becomes the
# command: the pid is there before the command runs, so a fake target's kill_at that
# reads it at the first boot cannot race the test that started the driver.
_WITH_PID = 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"'


def start_driver(
    argv: list[str], pid_file: Path, *, env: dict[str, str] | None = None, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """`python -m kbisect ARGV` in a session of its own (like a shell job: Ctrl-C and a
    fake target's kill_at reach it alone), its pid in pid_file before it starts."""
    out: IO[bytes] | int = log.open("ab") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            ["sh", "-c", _WITH_PID, str(pid_file), sys.executable, "-m", "kbisect", *argv],
            cwd=ROOT,
            env=os.environ.copy() if env is None else env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    finally:
        if not isinstance(out, int):
            out.close()


def ab_compare_argv(image: Path, target: Path, *extra: str) -> list[str]:
    """`kbisect compare` of one fake image booted with x=1 (A) and x=2 (B), scenario smoke,
    3 boots a side, on `target`; `extra` appended."""
    sides = ["--append-a", "x=1", "--append-b", "x=2"]
    fixed = ["--scenario", "smoke", "--boots", "3", "--target", str(target)]
    return ["compare", "--kernel", str(image), *sides, *fixed, *extra]
