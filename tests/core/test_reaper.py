"""Children die with kbisect, however it dies: real processes, killed for real.

Every process of these tests carries a marker in its environment, so that "no process
left" can be checked over the whole machine, the reapers themselves included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbisect.bisect import driver as bisect_driver
from kbisect.bisect.git import liveness, run
from kbisect.bisect.git import step as bisect_step
from kbisect.core import proc, reaper, stale
from kbisect.core.exceptions import UserError
from kbisect.source import worktree
from tests.bisect.test_step import RUN, at, calls
from tests.bisect.test_step import env as env
from tests.bisect.test_step import repo as repo

ROOT = Path(__file__).resolve().parents[2]
MARKER = "KBISECT_REAPER_TEST"

# A kbisect-like parent: runs (through proc.run) a kbisect-like child, which runs
# (through proc.run) a shell with two background sleeps: three process groups deep.
CHILD = "from kbisect.core import proc; proc.run(['sh', '-c', 'sleep 300 & sleep 300 & wait'])"
PARENT = f"import sys; from kbisect.core import proc; proc.run([sys.executable, '-c', {CHILD!r}])"


def marked(tag: str) -> list[int]:
    """Live (not zombie) processes whose environment carries MARKER=tag."""
    needle = f"{MARKER}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def exited(pid: int) -> bool:
    """The process has exited (zombie or reaped): its files are closed."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def wait_for(predicate, within: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return bool(predicate())


@pytest.fixture
def tag() -> Iterator[str]:
    """A fresh marker; whatever still carries it at the end (a failed test) is killed."""
    value = uuid.uuid4().hex
    yield value
    for pid in marked(value):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def start(code: str, tag: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, MARKER: tag, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_kill_9_of_the_parent_leaves_no_process(tag: str) -> None:
    parent = start(PARENT, tag)
    # parent, child, sh, 2 sleeps, and a reaper each for the parent and the child.
    assert wait_for(lambda: len(marked(tag)) == 7, 20), marked(tag)
    parent.kill()
    parent.wait()
    assert wait_for(lambda: marked(tag) == [], reaper.GRACE_S + 5), marked(tag)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_sighup_and_sigterm_stop_kbisect_like_ctrl_c(sig: signal.Signals, tag: str) -> None:
    """A closed terminal (SIGHUP) ends a command with 130, its children killed."""
    code = (
        "import sys; from kbisect.commands import cli; from kbisect.core import proc\n"
        "from kbisect.commands import doctor\n"
        "doctor.main = lambda args: proc.run(['sleep', '300']).returncode\n"
        "sys.exit(cli.main(['doctor']))"
    )
    child = start(code, tag)
    assert wait_for(lambda: len(marked(tag)) == 3, 20), marked(tag)  # kbisect, sleep, reaper
    child.send_signal(sig)
    assert child.wait(timeout=20) == 130
    assert wait_for(lambda: marked(tag) == [], 5), marked(tag)


def test_the_reaper_names_and_releases_groups() -> None:
    lines = [b"+10\n", b"+11\n", b"-10\n", b"junk\n", b"+12\n", b"+1x\n"]
    assert reaper.groups_left(lines) == [11, 12]


def test_the_reaper_kills_what_ignores_sigterm() -> None:
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 300"], start_new_session=True)
    time.sleep(0.2)
    started = time.monotonic()
    reaper.kill_all([stubborn.pid], grace=0.5)
    assert stubborn.wait(timeout=5) == -signal.SIGKILL
    assert time.monotonic() - started < 3


def test_a_group_of_zombies_is_not_waited_for() -> None:
    """After kill -9 of kbisect, its children's zombies wait for init, which may reap them
    only every second or so: the reaper must not wait out its grace for them."""
    zombie = subprocess.Popen(["true"], start_new_session=True)
    assert wait_for(lambda: exited(zombie.pid), 5)  # exited, not reaped: a zombie
    started = time.monotonic()
    reaper.kill_all([zombie.pid], grace=5)
    assert time.monotonic() - started < 2
    zombie.wait()


def test_a_dead_reaper_is_replaced_and_told_every_group() -> None:
    sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        proc.REAPER.tell(sleeper.pid, running=True)
        first = proc.REAPER.pid
        os.kill(first, signal.SIGKILL)
        # Dead means a zombie (or reaped): its cmdline empties earlier, when its memory
        # goes, while its files, the pipe's read end among them, are still open; a write
        # then still succeeds (this test was flaky under load when it waited for that).
        assert wait_for(lambda: exited(first), 5)
        proc.REAPER.tell(999_999, running=False)  # finds it dead, starts another
        assert proc.REAPER.pid != first and sleeper.pid in proc.REAPER.groups
    finally:
        sleeper.kill()
        sleeper.wait()
        proc.REAPER.tell(sleeper.pid, running=False)


# -- a bisect step whose driver or output is gone --------------------------------------


def run_step(scenario: Path, stdout: int, **env: str) -> int:
    target = scenario.parent / "fake.toml"  # the fake target of the `env` fixture
    argv = [str(RUN), "--scenario", str(scenario), "--threshold", "800", "--target", str(target)]
    return subprocess.run(
        argv, stdout=stdout, stderr=stdout, env={**os.environ, **env}, check=False
    ).returncode


def test_a_step_whose_output_reader_is_gone_aborts(repo, env) -> None:
    """The driver died and its pipe with it: EPIPE must not turn into 1 ("bad")."""
    at(repo[2])  # a slow commit: a step that ran to its end would answer 1
    read, write = os.pipe()
    os.close(read)
    try:
        code = run_step(env["scenario"], write)
    finally:
        os.close(write)
    assert code in (bisect_step.SKIP, bisect_step.ABORT)


def test_a_step_interrupted_while_python_starts_aborts(repo, env, tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM while Python is still starting (here: from sitecustomize) makes
    it exit 1, which git would read as "bad" (the fault-injection suite found a good
    commit marked bad so): bisect/run turns every end but a verdict into 128."""
    at(repo[1])  # a fast commit: a step that ran would answer 0
    (tmp_path / "sc").mkdir()
    (tmp_path / "sc" / "sitecustomize.py").write_text("raise KeyboardInterrupt\n")
    code = run_step(env["scenario"], subprocess.DEVNULL, PYTHONPATH=str(tmp_path / "sc"))
    assert code == bisect_step.ABORT and calls(env["log"]) == []


def test_a_step_whose_driver_pid_lives_on_in_another_process_aborts(repo, env) -> None:
    """The driver is gone and its pid now names an unrelated process: still gone."""
    at(repo[1])
    other = subprocess.Popen(["sleep", "300"])
    try:
        code = run_step(
            env["scenario"], subprocess.DEVNULL, **{liveness.DRIVER_ENV: str(other.pid)}
        )
    finally:
        other.kill()
        other.wait()
    assert code == bisect_step.ABORT and calls(env["log"]) == []


def test_a_step_under_its_driver_answers(repo, env) -> None:
    at(repo[1])
    code = run_step(env["scenario"], subprocess.DEVNULL, **{liveness.DRIVER_ENV: str(os.getpid())})
    assert code == bisect_step.GOOD


def test_processes_working_in_a_folder_are_found(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "300"], cwd=tmp_path)
    try:
        assert wait_for(lambda: [c for _, c in stale.processes_in(tmp_path)] == ["sleep 300"], 5)
        (found,) = stale.processes_in(tmp_path)
        assert found == (sleeper.pid, "sleep 300")
        assert stale.wait_gone(tmp_path, within=0.3) == found
    finally:
        sleeper.kill()
        sleeper.wait()
    assert stale.processes_in(tmp_path) == [] and stale.wait_gone(tmp_path) is None


# -- a resume while something of the earlier run still runs ----------------------------


def test_a_bisect_refuses_to_start_beside_a_stale_child_or_driver(
    repo,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    top = Path.cwd()
    wt = worktree.path_for(top, run.SLOT)
    (wt / "sub").mkdir(parents=True)
    monkeypatch.setattr(stale, "WAIT_S", 0.5)
    straggler = subprocess.Popen(["sleep", "300"], cwd=wt / "sub")  # a step's QEMU, say
    try:
        assert wait_for(lambda: bool(stale.processes_in(wt)), 5)
        with (
            pytest.raises(
                UserError,
                match=rf"earlier bisect still runs in .*: pid {straggler.pid} \(sleep 300\)",
            ),
            bisect_driver._exclusive(top),
        ):
            pass
    finally:
        straggler.kill()
        straggler.wait()
    with (
        bisect_driver._exclusive(top),
        pytest.raises(UserError, match=rf"another kbisect bisect \(pid {os.getpid()}\) is running"),
        bisect_driver._exclusive(top),
    ):
        pass
