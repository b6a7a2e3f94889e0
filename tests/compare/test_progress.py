"""The boots' progress: a compare's each boot of the boots the rule expects, a run's of its
count, with the time left at the rate so far; plain lines in a log, one live line (tqdm)
on a terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core.exceptions import EXIT_NEGATIVE
from tests.fakes import ab_compare_argv, fake_image, fake_target

ROOT = Path(__file__).resolve().parents[2]


def argv(tmp_path: Path, *extra: str) -> list[str]:
    """A compare of A at 1000 tps against B at 500 (the rule stops at 3 boots a side)."""
    target = fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 500}, cv=0.02)
    image = fake_image(tmp_path / "k")
    return [*ab_compare_argv(image, target, *extra), "--out", str(tmp_path / "cmp")]


def boot_lines(err: str) -> list[str]:
    return re.findall(r"\] (boot \d.*): side", err)


@pytest.mark.parametrize(
    ("extra", "planned"),
    [(("--boots", "auto"), "of 6 (at most 20)"), (("--boots", "3"), "of 6")],
)
def test_each_boot_says_which_of_the_boots_expected_and_the_time_left(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    extra: tuple[str, ...],
    planned: str,
) -> None:
    """--boots auto: the first look's boots (3 a side) and the cap; a fixed count: the
    count. The first boot has no rate yet: no time left."""
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    assert cli.main(argv(tmp_path, *extra)) == EXIT_NEGATIVE
    lines = boot_lines(capsys.readouterr().err)
    assert len(lines) == 6
    assert lines[0] == f"boot 1 {planned}"
    for n, line in enumerate(lines[1:], 2):
        assert re.fullmatch(rf"boot {n} {re.escape(planned)}, ~\d+ s left", line), line


def test_run_says_each_boot_of_its_count_with_the_time_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    image, target = fake_image(tmp_path / "k", tps=1000.0), fake_target(tmp_path)
    argv = ["run", "--kernel", str(image), "--scenario", "smoke", "--runs", "3"]
    assert cli.main([*argv, "--target", str(target), "--out", str(tmp_path / "r")]) == 0
    lines = re.findall(r"\] (boot \d.*)", capsys.readouterr().err)
    assert lines[0] == "boot 1 of 3"
    assert [re.sub(r"~\d+ s", "~N s", x) for x in lines[1:]] == [
        "boot 2 of 3, ~N s left",
        "boot 3 of 3, ~N s left",
    ]


def test_on_a_terminal_the_boots_are_one_live_line(tmp_path: Path) -> None:
    """kbisect under a pseudo-terminal: the boot line is redrawn in place (a carriage
    return before each, no newline after), the other lines print above it, and it is
    gone at the end."""
    env = {
        **os.environ,
        "KBISECT_CACHE": str(tmp_path / "cache"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
    with subprocess.Popen(
        [sys.executable, "-m", "kbisect", *argv(tmp_path, "--boots", "auto")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env=env,
        cwd=tmp_path,
    ) as child:
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        assert child.wait(timeout=60) == EXIT_NEGATIVE
    os.close(leader)
    text = seen.decode()
    live = re.findall(r"\r\[kbisect \d\d:\d\d\] (boot \d[^\r\n\x1b]*)", text)
    assert live[0] == "boot 1 of 6 (at most 20): side A (A)"
    assert any(
        re.fullmatch(r"boot 6 of 6 \(at most 20\), ~\d+ s left: side B \(B\)", x) for x in live
    )
    assert not re.search(r"\] boot \d[^\r]*\r?\n", text)  # never a line of its own
    assert re.search(r"\] side B: \d+\.\d tps\r?\n", text)  # the others above it
