"""proc.run: the log, the tail, failures, timeouts that kill the whole group, capture."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbisect.core import proc
from kbisect.core.exceptions import EXIT_USER, CommandFailed, CommandTimeout, MissingTool

PY = sys.executable


def lines_cmd(n: int, code: int = 0) -> list[str]:
    return [PY, "-c", f"import sys; [print('line', i) for i in range({n})]; sys.exit({code})"]


def alive(pid: int) -> bool:
    """True while pid runs (a zombie waiting for a reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_log_starts_with_the_quoted_command_and_holds_all_output(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "x.log"
    cmd = [*lines_cmd(100), "it's quoted"]
    res = proc.run(cmd, log=log, cwd=tmp_path)
    text = log.read_text().splitlines()
    assert text[0] == f"$ {proc.quote(cmd)}  (in {tmp_path})"
    assert "'\"'\"'" in text[0]  # the apostrophe survived shell quoting
    assert text[1:] == [f"line {i}" for i in range(100)]
    assert res.returncode == 0
    assert res.log == log
    assert res.output.splitlines() == [f"line {i}" for i in range(100 - proc.TAIL_LINES, 100)]


def test_log_is_appended_after_a_header(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("# reproduce: kbisect run\n")
    proc.run(lines_cmd(1), log=log)
    assert log.read_text().splitlines()[0] == "# reproduce: kbisect run"
    assert log.read_text().splitlines()[-1] == "line 0"


def test_on_line_sees_each_line_without_newline() -> None:
    seen: list[str] = []
    proc.run(lines_cmd(3), on_line=seen.append)
    assert seen == ["line 0", "line 1", "line 2"]


def test_nonzero_exit_raises_naming_the_log(tmp_path: Path) -> None:
    log = tmp_path / "fail.log"
    with pytest.raises(CommandFailed) as info:
        proc.run(lines_cmd(2, code=7), log=log)
    assert str(info.value).endswith(f"exited 7 (log: {log})")
    assert "\n" not in str(info.value)
    res = proc.run(lines_cmd(2, code=7), check=False)
    assert (res.returncode, res.output) == (7, "line 0\nline 1\n")


def test_stderr_goes_to_the_same_stream() -> None:
    out = proc.capture([PY, "-c", "import sys; print('out'); sys.stderr.write('err\\n')"])
    assert out.splitlines() == ["out", "err"]


def test_env_is_added_to_the_environment() -> None:
    cmd = [PY, "-c", "import os; print(os.environ['KB_X'], 'PATH' in os.environ)"]
    assert proc.run(cmd, env={"KB_X": "42"}, capture=True).output == "42 True\n"


def test_capture_returns_the_whole_output() -> None:
    res = proc.run(lines_cmd(100), capture=True)
    assert res.output.splitlines() == [f"line {i}" for i in range(100)]
    assert proc.capture(lines_cmd(100)).endswith("line 99")


def _spawner(pidfile: Path, chatty: bool) -> list[str]:
    """sh that starts a background `sleep 60`, writes its pid, then talks or goes quiet."""
    loop = "while true; do echo tick; sleep 0.1; done" if chatty else "echo started; wait"
    return ["sh", "-c", f"sleep 60 & echo $! > {pidfile}; {loop}"]


def test_total_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    start = time.monotonic()
    with pytest.raises(CommandTimeout, match="ran longer than 1s"):
        proc.run(_spawner(pidfile, chatty=True), timeout=1, idle_timeout=30)
    assert time.monotonic() - start < 10
    assert wait_gone(int(pidfile.read_text()))


def test_idle_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    log = tmp_path / "idle.log"
    with pytest.raises(CommandTimeout) as info:
        proc.run(_spawner(pidfile, chatty=False), idle_timeout=1, log=log)
    assert str(info.value) == f"sh printed nothing for 1s (log: {log})"
    assert wait_gone(int(pidfile.read_text()))
    assert log.read_text().splitlines()[-1] == "started"


def test_on_line_exception_kills_the_group_too(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"

    def stop(line: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        proc.run(_spawner(pidfile, chatty=True), on_line=stop)
    for _ in range(50):  # the pid file may be written just after the first line
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    assert wait_gone(int(pidfile.read_text()))


def test_missing_executable_is_a_one_line_user_error(tmp_path: Path) -> None:
    with pytest.raises(MissingTool) as info:
        proc.run(["kbisect-no-such-tool", "--version"], log=tmp_path / "m.log")
    assert info.value.exit_code == EXIT_USER
    assert str(info.value) == "kbisect-no-such-tool: not installed (run scripts/setup)"


def test_non_executable_program_is_a_missing_tool(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    with pytest.raises(MissingTool, match="not executable"):
        proc.run([str(script)])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_child_starts_kills_the_child(
    sig: signal.Signals, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C (or SIGTERM made one) landing inside Popen, after the fork, once left
    the child running unknown to anyone (CI saw a `sleep 300` outlive kbisect)."""
    started: list[subprocess.Popen[bytes]] = []
    real = subprocess.Popen

    def popen_then_signal(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        child = real(*args, **kwargs)  # type: ignore[call-overload]
        started.append(child)
        os.kill(os.getpid(), sig)
        time.sleep(0.05)  # the handler runs here, still inside Popen
        return child  # type: ignore[no-any-return]

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    proc.REAPER.ensure()  # started before: only the child's Popen is the one under test
    former = signal.signal(signal.SIGTERM, interrupt)
    monkeypatch.setattr(subprocess, "Popen", popen_then_signal)
    try:
        with pytest.raises(KeyboardInterrupt):
            proc.run(["sleep", "300"])
    finally:
        signal.signal(signal.SIGTERM, former)
    assert len(started) == 1
    assert wait_gone(started[0].pid)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
