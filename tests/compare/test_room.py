"""Room to write, on small filesystems the tests mount: a results dir that is a file,
read-only or too full is one line and exit 3 before any build or boot; a disk that fills
during a compare stops it in one line with the command that goes on, and that command,
once space is freed, reaches the answer of an uninterrupted run. A second compare into
the --out of a first one is refused before it writes anything: the first run's files stay
byte-identical and it still resumes."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core.exceptions import EXIT_INFRA, EXIT_USER
from kbisect.measure import results
from tests.fakes import (
    fake_calls,
    fake_image,
    fake_target,
    make_fake_kernel_repo,
    start_driver,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[object]:
    """mount(size, ro=False): a tmpfs of `size` (e.g. "4m") at a new folder; unmounted
    after the test. Skipped where this process may not mount (not root)."""
    mounted: list[Path] = []

    def make(size: str, ro: bool = False) -> Path:
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        options = f"size={size}" + (",ro" if ro else "")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    return fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 800}, cv=0.02)


def argv(tmp_path: Path, target: Path, *extra: str) -> list[str]:
    repo = tmp_path / "linux"
    if not repo.exists():  # a tree: a refusal must come before its builds
        make_fake_kernel_repo(repo, [{"subject": "a"}])
    return [
        *("compare", "--tree", str(repo), "--base", "HEAD", "--append-a", "x=1"),
        *("--append-b", "x=2", "--scenario", "smoke", "--boots", "3"),
        *("--target", str(target), *extra),
    ]


def refused(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def nothing_built_or_booted(tmp_path: Path, target: Path) -> None:
    assert fake_calls(target) == []
    assert not (tmp_path / "cache" / "builds").exists()


def test_an_out_that_is_a_file_is_exit_3_before_any_build(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert cli.main(argv(tmp_path, target, "--out", str(afile / "run"))) == EXIT_INFRA
    line = refused(capsys)
    assert line == f"kbisect: --out {afile}/run: not a directory ({afile} is a file)"
    nothing_built_or_booted(tmp_path, target)


def test_a_results_dir_that_is_a_file_is_exit_3(
    tmp_path: Path,
    target: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "results").write_text("x")
    monkeypatch.setenv("KBISECT_RESULTS", str(tmp_path / "results"))
    assert cli.main(argv(tmp_path, target)) == EXIT_INFRA
    assert "results dir" in refused(capsys)
    nothing_built_or_booted(tmp_path, target)


def test_a_read_only_out_is_exit_3_before_any_build(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str], mount: object
) -> None:
    assert callable(mount)
    ro = mount("1m", ro=True)
    assert cli.main(argv(tmp_path, target, "--out", str(ro / "run"))) == EXIT_INFRA
    assert "not writable (Read-only file system)" in refused(capsys)
    nothing_built_or_booted(tmp_path, target)


def test_a_full_out_is_exit_3_before_any_build(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str], mount: object
) -> None:
    assert callable(mount)
    small = mount("4m")
    assert cli.main(argv(tmp_path, target, "--out", str(small / "run"))) == EXIT_INFRA
    line = refused(capsys)
    assert "MiB free, the run needs about" in line
    nothing_built_or_booted(tmp_path, target)
    assert list(small.iterdir()) == []


def fill(where: Path) -> None:
    """Write zeros into where/filler until the disk is full."""
    with (where / "filler").open("wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass


def test_a_disk_that_fills_mid_run_stops_it_and_resume_goes_on(
    tmp_path: Path, mount: object
) -> None:
    assert callable(mount)
    disk = mount("48m")
    out = disk / "run"
    target = fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 800}, cv=0.02, delay_s=1.0)
    image = fake_image(tmp_path / "k")
    command = ["compare", "--kernel", str(image), "--append-a", "x=1", "--append-b", "x=2"]
    command += ["--scenario", "smoke", "--boots", "3", "--target", str(target)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbisect", *command, "--out", str(out)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while len(fake_calls(target)) < 3:  # fill the disk during the third boot
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    fill(disk)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INFRA, err
    last = err.strip().splitlines()[-1]
    assert "No space left on device; what was finished is saved; to go on: " in last, err
    go_on = last.split("to go on: ", 1)[1]
    assert go_on == f"kbisect compare --resume {out}"
    stored = results.load_samples(out)  # every stored sample whole: none torn
    assert len(stored) == 2
    (disk / "filler").unlink()
    assert cli.main(shlex.split(go_on)[1:]) == 1  # B is 20% slower: the regression
    assert [s.label for s in results.load_samples(out)] == ["A", "B", "B", "A", "A", "B"]
    assert results.load_summary(out)["verdict"]["kind"] == "regression"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_second_compare_into_the_out_of_an_interrupted_one_writes_nothing(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    pid_file = tmp_path / "pid"
    fake_target(
        tmp_path,
        append_tps={"x=1": 1000, "x=2": 800},
        cv=0.02,
        kill_at=1,
        kill_pid_file=str(pid_file),
        kill_signal="INT",
    )
    image = fake_image(tmp_path / "k")
    first = ["compare", "--kernel", str(image), "--append-a", "x=1", "--append-b", "x=2"]
    first += ["--scenario", "smoke", "--boots", "3", "--target", str(target), "--out", str(out)]
    proc = start_driver(first, pid_file)
    assert proc.wait(timeout=120) in (130, -signal.SIGINT)
    assert (out / "plan.json").is_file() and results.load_samples(out) == []  # plan only
    before = snapshot(out)
    fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 800}, cv=0.02)
    second = [*first[:-1], str(out)]
    second[second.index("--boots") + 1] = "4"
    assert cli.main(second) == EXIT_USER
    line = refused(capsys)
    assert f"--out {out}: already holds a run (" in line and "or --resume" in line
    assert snapshot(out) == before
    assert cli.main(["compare", "--resume", str(out)]) == 1
    assert len(results.load_samples(out)) == 6


@pytest.mark.parametrize("kind", ["study", "run"])
def test_a_study_or_run_into_a_compare_out_is_refused_before_it_writes(
    tmp_path: Path, target: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    out = tmp_path / "cmp"
    image = fake_image(tmp_path / "k")
    first = ["compare", "--kernel", str(image), "--append-a", "x=1", "--append-b", "x=2"]
    first += ["--scenario", "smoke", "--boots", "2", "--target", str(target), "--out", str(out)]
    assert cli.main(first) == 1
    capsys.readouterr()
    before, calls = snapshot(out), len(fake_calls(target))
    kernels = f"{image},{fake_image(tmp_path / 'k2', 900)}"
    second = {
        "study": ["study", "--kernels", kernels, "--boots", "2", "--yes"],
        "run": ["run", "--kernel", str(image)],
    }[kind]
    argv = [*second, "--scenario", "smoke", "--target", str(target), "--out", str(out)]
    assert cli.main(argv) == EXIT_USER
    line = refused(capsys)
    assert f"--out {out}: already holds a run (.compare.lock, " in line
    assert snapshot(out) == before and len(fake_calls(target)) == calls


def test_a_run_adds_to_its_own_out(tmp_path: Path, target: Path) -> None:
    run = ["run", "--kernel", str(fake_image(tmp_path / "k")), "--scenario", "smoke"]
    again = [*run, "--target", str(target), "--out", str(tmp_path / "run")]
    assert cli.main(again) == cli.main(again) == 0
    assert len(results.load_samples(tmp_path / "run")) == 2
