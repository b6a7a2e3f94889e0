"""Signals on a real `kbisect` process on the fake target: a SIGHUP that was ignored when it
started (nohup, `trap '' HUP`) stays ignored and the run finishes; SIGINT or SIGTERM stops
compare, bisect, study and run with the exact command that continues them, and that
command reaches the same answer."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core.exceptions import EXIT_INTERRUPTED
from kbisect.measure import results
from tests.fakes import fake_calls, fake_image, fake_target

ROOT = Path(__file__).resolve().parents[2]


def compare_argv(tmp_path: Path, target: Path, out: Path) -> list[str]:
    image = fake_image(tmp_path / "k")
    return [
        *("compare", "--kernel", str(image), "--append-a", "x=1", "--append-b", "x=2"),
        *("--scenario", "smoke", "--boots", "3", "--target", str(target), "--out", str(out)),
    ]


def start(argv: list[str], *, shell: str = "") -> subprocess.Popen[str]:
    """`python -m kbisect ARGV` in a session of its own, after `shell` (e.g. a trap)."""
    command = shlex.join([sys.executable, "-m", "kbisect", *argv])
    return subprocess.Popen(
        ["sh", "-c", f"{shell}exec {command}"],
        cwd=ROOT,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_boot(target: Path, proc: subprocess.Popen[str], n: int = 1) -> None:
    deadline = time.monotonic() + 60
    while len(fake_calls(target)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.fixture
def slow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake target whose boots take a second (time to send a signal in one)."""
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KBISECT_RESULTS", str(tmp_path / "results"))
    return fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 800}, cv=0.02, delay_s=1.0)


@pytest.mark.parametrize("how", ["trap", "nohup"])
def test_an_ignored_sighup_stays_ignored_and_the_run_finishes(
    tmp_path: Path, slow: Path, how: str
) -> None:
    out = tmp_path / "cmp"
    argv = compare_argv(tmp_path, slow, out)
    if how == "nohup":  # nohup writes nohup.out in its working directory
        command = ["nohup", sys.executable, "-m", "kbisect", *argv]
        proc = subprocess.Popen(command, cwd=tmp_path, start_new_session=True, text=True)
    else:
        proc = start(argv, shell="trap '' HUP; ")
    wait_for_boot(slow, proc)
    os.killpg(proc.pid, signal.SIGHUP)  # the terminal closed: every process of the job
    assert proc.wait(timeout=120) == 1  # finished: B is 20% slower, a regression
    assert (out / "summary.json").is_file() and len(fake_calls(slow)) == 6


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupted_compare_says_how_to_go_on_and_that_finishes_it(
    tmp_path: Path, slow: Path, sig: signal.Signals
) -> None:
    out = tmp_path / "cmp"
    proc = start(compare_argv(tmp_path, slow, out))
    wait_for_boot(slow, proc, 2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, err
    last = err.strip().splitlines()[-1]
    go_on = f"kbisect compare --resume {out.resolve()}"
    assert last == f"kbisect: interrupted; what was finished is saved; to go on: {go_on}"
    assert cli.main(shlex.split(go_on)[1:]) == 1
    assert [s.label for s in results.load_samples(out)] == ["A", "B", "B", "A", "A", "B"]


def resumed_by(err: str) -> list[str]:
    last = err.strip().splitlines()[-1]
    prefix = "kbisect: interrupted; what was finished is saved; to go on: kbisect "
    assert last.startswith(prefix), err
    return shlex.split(last.removeprefix(prefix))


def test_an_interrupted_run_says_the_command_that_takes_the_boots_left(
    tmp_path: Path, slow: Path
) -> None:
    out = tmp_path / "odd out dir"
    image = fake_image(tmp_path / "k", 900)
    argv = ["run", "--kernel", str(image), "--scenario", "smoke", "--runs", "3"]
    proc = start([*argv, "--target", str(slow), "--out", str(out)])
    wait_for_boot(slow, proc, 2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, err
    words = resumed_by(err)
    assert words[-4:] == ["--out", str(out.resolve()), "--runs", "2"]
    assert cli.main(words) == 0
    assert len([s for s in results.load_samples(out) if s.ok]) == 3


def test_an_interrupted_study_says_how_to_go_on(tmp_path: Path, slow: Path) -> None:
    kernels = ",".join(str(fake_image(tmp_path / f"k{i}", t)) for i, t in enumerate((1000, 700)))
    argv = ["study", "--kernels", kernels, "--scenario", "smoke", "--boots", "2"]
    proc = start([*argv, "--target", str(slow), "--yes"])
    wait_for_boot(slow, proc, 2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, err
    words = resumed_by(err)
    assert words[:2] == ["study", "--resume"] and Path(words[2]).is_dir()
    assert cli.main(words) == 0
