"""One fuzz case's world and its run: a sandbox of its own (HOME, XDG dirs, cwd, TMPDIR,
results), kbisect run in it (in-process through `cli.main`, or `python -m kbisect`), and
the checks every case must pass (`problems`).

What a case may write: the run's own dir (`--out`, `--resume`, a run dir in
$KBISECT_RESULTS, the output file of `rc record` and `ktest-config`), kbisect's cache
(the session's, shared by every case like a user's) and the fake target's state. Every
other dir of the sandbox (HOME, XDG_CONFIG_HOME, cwd, the inputs, TMPDIR once the command
has ended), the user's repository and the checkout must be left as they were.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbisect.commands import cli
from tests.fakes import repo_snapshot

ROOT = Path(__file__).resolve().parents[2]
OK_CODES = frozenset(range(7))  # docs/exit-codes.md; 130 is for interrupts, not made here
# bisect-step answers git bisect run; its usage errors exit 2 (docs/exit-codes.md)
STEP_CODES = frozenset({0, 1, 2, 125, 128})
# the last line of a traceback, or an exception's repr leaking into a message
UNCAUGHT = re.compile(r"^(Traceback \(most recent call last\)|([\w.]+\.)?\w*(Error|Exception)\b:)")
PROGRESS = ("[kbisect ", "kbisect: warning: ")
LIMIT_S = 90  # one case on the fake target takes seconds; more is a hang


class CaseTimeout(BaseException):
    """A case ran past LIMIT_S (raised by SIGALRM inside kbisect)."""


def _alarm(signum: int, frame: object) -> None:
    raise CaseTimeout


@dataclass
class Outcome:
    """What one run of kbisect did."""

    argv: list[str]
    code: int
    stdout: str
    stderr: str
    escaped: str = ""  # an exception that escaped cli.main: type, message, where

    def shell(self) -> str:
        return shlex.join(["kbisect", *self.argv])

    def error_lines(self) -> list[str]:
        """stderr without progress lines and warnings: what the user reads as the error."""
        return [line for line in self.stderr.splitlines() if not line.startswith(PROGRESS)]


@dataclass
class Sandbox:
    """The dirs of one case. `writable` are the paths the case may write (its run dirs);
    `watched` are snapshotted before and compared after."""

    root: Path
    cache: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    writable: list[Path] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def inputs(self) -> Path:
        return self.root / "in"

    @property
    def cwd(self) -> Path:
        return self.root / "cwd"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    def make(self) -> Sandbox:
        for d in (self.home / ".config", self.home / ".cache", self.inputs, self.cwd, self.tmp):
            d.mkdir(parents=True, exist_ok=True)
        self.results.mkdir(exist_ok=True)
        (self.home / ".gitconfig").write_text(
            "[user]\n\tname = kbisect fuzz\n\temail = fuzz@kbisect.invalid\n"
            "[init]\n\tdefaultBranch = main\n"
        )
        return self

    def env(self, stubs: Path, mpl: Path) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "PYTHONPATH")}
        return {
            **keep,
            "PATH": f"{stubs}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "KBISECT_CACHE": str(self.cache),
            "KBISECT_RESULTS": str(self.results),
            "TMPDIR": str(self.tmp),
            "MPLCONFIGDIR": str(mpl),  # matplotlib's font cache: not kbisect's to keep
            "GIT_CONFIG_GLOBAL": str(self.home / ".gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "CCACHE_DISABLE": "1",
            **self.extra_env,
        }

    def watched(self) -> dict[str, Path]:
        return {"HOME": self.home, "inputs": self.inputs, "cwd": self.cwd}


# --- snapshots ---------------------------------------------------------------------------


def snapshot(top: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple[int, int, int]]:
    """Every path under top (not under a `skip` path) with its kind, size and mtime."""
    out: dict[str, tuple[int, int, int]] = {}
    if not top.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not _under(here / d, skip)]
        for name in [*dirnames, *filenames]:
            p = here / name
            if _under(p, skip):
                continue
            st = p.lstat()
            out[str(p.relative_to(top))] = (st.st_mode >> 12, st.st_size, st.st_mtime_ns)
    return out


def _under(p: Path, tops: tuple[Path, ...]) -> bool:
    """p is one of tops, inside one, or a dir on the way to one (made by mkdir -p)."""
    return any(p == t or t in p.parents or p in t.parents for t in tops)


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Paths added, removed or changed, sorted; at most five named."""
    diff = sorted(
        [f"+{k}" for k in after.keys() - before.keys()]
        + [f"-{k}" for k in before.keys() - after.keys()]
        + [f"~{k}" for k in before.keys() & after.keys() if before[k] != after[k]]
    )
    return diff[:5] + ([f"... {len(diff) - 5} more"] if len(diff) > 5 else [])


# the checkout's dirs kbisect reads data from (and could write into by mistake: an in-place
# build of the fake tree, a scenario rewritten); code and docs are left out, since they may
# be edited while the tier runs
CHECKOUT_DATA = ("harness", "kernel-configs", "tests/fakelinux")


def checkout_status() -> str:
    """The checkout's data dirs as git sees them."""
    command = ["git", "-C", str(ROOT), "status", "--porcelain", "-uall", "--", *CHECKOUT_DATA]
    return subprocess.run(command, capture_output=True, text=True, check=False).stdout


# --- running -------------------------------------------------------------------------------


@contextmanager
def _environment(env: dict[str, str], cwd: Path, tmp: Path) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_tmp = tempfile.tempdir
    saved_sig = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    tempfile.tempdir = str(tmp)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        tempfile.tempdir = saved_tmp
        for s, h in saved_sig.items():
            signal.signal(s, h)


@contextmanager
def _captured(where: Path) -> Iterator[tuple[Path, Path]]:
    """fds 0-2 and sys.std* redirected: stdin from /dev/null, stdout and stderr (the
    children's too: git, the fake guest) into where/out and where/err."""
    where.mkdir(exist_ok=True)
    out, err = where / "out", where / "err"
    sys.stdout.flush()
    sys.stderr.flush()
    saved_fds = [os.dup(fd) for fd in (0, 1, 2)]
    saved_std = (sys.stdin, sys.stdout, sys.stderr)
    files = [open(os.devnull, "rb"), out.open("wb"), err.open("wb")]  # noqa: SIM115
    try:
        for fd, f in enumerate(files):
            os.dup2(f.fileno(), fd)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        yield out, err
    finally:
        for s in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                s.flush()
        sys.stdin, sys.stdout, sys.stderr = saved_std
        for fd, saved in enumerate(saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        for f in files:
            f.close()


def _where(exc: BaseException) -> str:
    """The innermost frame of kbisect's own code in exc's traceback: file:line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/kbisect/" in f.filename]
    if not frames:
        return "?"
    f = frames[-1]
    return f"{Path(f.filename).relative_to(ROOT)}:{f.lineno}"


def in_process(argv: list[str], env: dict[str, str], sb: Sandbox) -> Outcome:
    """cli.main(argv) in this process: an exception escaping it is what a user sees as a
    traceback. sys.argv is kbisect's meanwhile (runs record it as their reproduce line)."""
    saved_argv, sys.argv = sys.argv, ["kbisect", *argv]
    try:
        return _in_process(argv, env, sb)
    finally:
        sys.argv = saved_argv


def _in_process(argv: list[str], env: dict[str, str], sb: Sandbox) -> Outcome:
    escaped = ""
    code = -1
    with _environment(env, sb.cwd, sb.tmp), _captured(sb.root / "captured") as (out, err):
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(LIMIT_S)
        try:
            code = cli.leave(cli.main(list(argv)))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except KeyboardInterrupt:
            raise
        except CaseTimeout:
            escaped = f"no end after {LIMIT_S} s (a hang?)"
            code = 1
        except BaseException as exc:
            message = str(exc).splitlines()[0] if str(exc) else ""
            escaped = f"{type(exc).__name__}: {message[:160]} (at {_where(exc)})"
            code = 1
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGINT, signal.default_int_handler)
    return Outcome(argv, code, _read(out), _read(err), escaped)


def as_subprocess(argv: list[str], env: dict[str, str], sb: Sandbox) -> Outcome:
    """`python -m kbisect ARGV`, as a user runs it."""
    proc = subprocess.run(
        [sys.executable, "-m", "kbisect", *argv],
        cwd=sb.cwd,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    err = proc.stderr.decode("utf-8", "backslashreplace")
    escaped = ""
    if "Traceback (most recent call last)" in err:
        last = [line for line in err.splitlines() if line and not line.startswith(" ")][-1]
        escaped = last[:200]
    return Outcome(argv, proc.returncode, proc.stdout.decode("utf-8", "replace"), err, escaped)


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "backslashreplace")


Runner = Callable[[list[str], dict[str, str], Sandbox], Outcome]


# --- the checks ------------------------------------------------------------------------------


def outcome_problems(o: Outcome) -> list[str]:
    """The exit code is one of docs/exit-codes.md; no traceback, no exception's text as the
    message; a refused input (2) or a corrupt run (3) says so in exactly one line (progress
    lines and warnings aside) starting "kbisect"; after a failed build, boot or benchmark
    (4-6) the last line is kbisect's, with a log excerpt allowed before it."""
    problems: list[str] = []
    step = o.argv[:1] == ["bisect-step"]
    if o.escaped:
        problems.append(f"traceback: {o.escaped}")
    elif "Traceback (most recent call last)" in o.stderr:
        problems.append(f"traceback in stderr: {_last_nonblank(o.stderr)}")
    codes = STEP_CODES if step else OK_CODES
    if o.code not in codes:
        problems.append(f"exit {o.code}, not one of {sorted(codes)}")
    lines = o.error_lines()
    if not o.escaped:
        for line in lines:
            if UNCAUGHT.match(line) or UNCAUGHT.match(line.removeprefix("kbisect: ")):
                problems.append(f"an exception's text for an error: {line[:200]!r}")
                break
    if not step and o.code >= 2 and not o.escaped:
        if len(lines) != 1 and o.code in (2, 3):
            shown = " | ".join(line[:120] for line in lines[:4])
            problems.append(f"exit {o.code} with {len(lines)} error lines, not 1: {shown!r}")
        elif not lines or not lines[-1].startswith("kbisect"):
            problems.append(f"error line not kbisect's: {lines[-1:]!r:.200}")
    return problems


def _last_nonblank(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


@dataclass(repr=False)
class World:
    """What every case shares: the stubs dir, matplotlib's cache, the session's cache and
    the user's repository (checked unchanged after every case, restored if not)."""

    base: Path
    stubs: Path
    mpl: Path
    cache: Path
    repo: Path
    pristine: Path
    shas: list[str]
    repo_state: dict[str, tuple[bytes, int]]
    counter: int = 0
    status: str = ""

    def __repr__(self) -> str:  # hypothesis prints the test's arguments
        return f"World({self.base})"

    def sandbox(self) -> Sandbox:
        self.counter += 1
        root = self.base / "cases" / f"{self.counter:05d}"
        shutil.rmtree(root, ignore_errors=True)
        return Sandbox(root, self.cache).make()


def check_case(
    world: World,
    sb: Sandbox,
    argv: list[str],
    runner: Runner = in_process,
    *,
    what: str = "",
    keep: bool = False,
    refuse: str = "",
) -> Outcome:
    """Run argv in sb and assert everything; the failure message is the reproducer and
    one line per problem. `refuse` names a value the command must refuse (exit 2) before
    any work. Removes the sandbox when all is well (unless keep)."""
    allowed = tuple(p.resolve() for p in [*sb.writable, sb.results, sb.cache])
    before = {k: snapshot(p, allowed) for k, p in sb.watched().items()}
    outcome = runner(argv, sb.env(world.stubs, world.mpl), sb)
    problems = outcome_problems(outcome)
    if refuse and outcome.code != 2:
        problems.insert(0, f"accepted {refuse}: exit {outcome.code}, not 2")
    for k, p in sb.watched().items():
        if diff := changes(before[k], snapshot(p, allowed)):
            problems.append(f"wrote outside its run dir, in {k}: {', '.join(diff)}")
    left = sorted(str(p.relative_to(sb.tmp)) for p in sb.tmp.iterdir())
    if left:
        problems.append(f"left in TMPDIR: {', '.join(left[:5])}")
    if diff := changes(world.repo_state, repo_snapshot(world.repo)):
        problems.append(f"changed the user's repository: {', '.join(diff)}")
        restore_repo(world)
    if (status := checkout_status()) != world.status:
        problems.append(f"changed the checkout: {status.strip()[:200]}")
        world.status = status
    if problems:
        head = f"{outcome.shell()}" + (f"\n  input: {what}" if what else "")
        body = "\n".join(f"  - {p}" for p in problems)
        tail = _last_nonblank(outcome.stderr)
        exc = failure(argv[0], problems[0])(
            f"{head}\n{body}\n  exit {outcome.code}; stderr ends: {tail!r}"
        )
        if not COLLECT or RAISE:
            raise exc
        COLLECT[-1].setdefault(type(exc).__name__, str(exc))
    if not keep:
        shutil.rmtree(sb.root, ignore_errors=True)
    return outcome


# While a property runs under `collected` (tests/fuzz/conftest.py), a failing case is kept
# here, first of its kind, and the property goes on: hypothesis stops at its first failure
# unless it shrinks, and shrinking costs minutes. KBISECT_FUZZ_RAISE=1 raises instead, for
# hypothesis's database and shrinking of one failure.
COLLECT: list[dict[str, str]] = []
RAISE = bool(os.environ.get("KBISECT_FUZZ_RAISE"))


class FuzzFailure(AssertionError):
    """A case broke a rule; its subclass names which (see `failure`)."""


_FAILURES: dict[str, type[FuzzFailure]] = {}


def failure(command: str, problem: str) -> type[FuzzFailure]:
    """The exception class of one kind of failure (the command, the rule broken and, for
    a traceback, the exception's type and where it was raised). Hypothesis keeps failures
    of distinct types apart, so one run reports each kind once instead of the first."""
    words = problem.split(" (at ")
    kind = re.sub(r":.*", "", words[0], flags=re.S).replace(" ", "-")
    if problem.startswith("traceback: "):
        where = words[-1].rstrip(")") if len(words) > 1 else ""
        kind = f"traceback-{problem.split(' ')[1].rstrip(':')}-{where}"
    elif problem.startswith("accepted "):
        kind = f"accepted{problem.split(' ')[1]}"
    elif problem.startswith("exit "):
        kind = problem.split(",")[0].replace(" ", "-")
    key = f"{command}:{kind}"
    if key not in _FAILURES:
        name = re.sub(r"\W", "_", key)
        _FAILURES[key] = type(name, (FuzzFailure,), {"__module__": __name__})
    return _FAILURES[key]


def restore_repo(world: World) -> None:
    """Put the user's repository back as it was made (a case that changed it failed)."""
    shutil.rmtree(world.repo)
    shutil.copytree(world.pristine, world.repo, symlinks=True)
    world.repo_state = repo_snapshot(world.repo)
