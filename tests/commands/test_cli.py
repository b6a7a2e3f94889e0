"""The CLI skeleton: help, version, bad input in one line, exception roots to exit codes."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbisect import __version__
from kbisect.commands import cli
from kbisect.core.exceptions import BuildError, InfraError, UserError

CHECKOUT = Path(__file__).resolve().parents[2]


def kbisect(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbisect", *argv],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_help_lists_the_subcommands() -> None:
    proc = kbisect("--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: kbisect")
    assert "doctor" in proc.stdout
    assert proc.stderr == ""


def test_version_names_the_commit_of_the_checkout() -> None:
    """`git describe` of the checkout kbisect runs from, as git itself prints it."""
    proc = kbisect("--version")
    described = subprocess.run(
        ["git", "-C", str(CHECKOUT), "describe", "--tags", "--always", "--dirty", "--abbrev=12"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert (proc.returncode, proc.stdout) == (0, f"kbisect {__version__} ({described})\n")
    assert proc.stderr == ""


@pytest.mark.parametrize("case", ["no checkout", "no git", "a broken .git"])
def test_version_says_unknown_when_there_is_no_commit_to_name(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed copy (no .git), a host without git, a .git that leads nowhere: the
    version and "unknown", exit 0, never an error."""
    home = tmp_path / "copy"
    shutil.copytree(CHECKOUT / "kbisect", home / "kbisect")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(home), *sys.path])}
    if case == "no git":
        (home / ".git").mkdir()
        env["PATH"] = str(tmp_path / "empty")
    if case == "a broken .git":
        (home / ".git").write_text("gitdir: /nonexistent/worktree\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kbisect", "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0,
        f"kbisect {__version__} (unknown)\n",
        "",
    )


def test_bash_completion_knows_every_subcommand_and_their_options(tmp_path: Path) -> None:
    """`kbisect --print-completion bash` (what scripts/setup installs) is generated from the
    parsers: it names every subcommand, bash reads it (`bash -n`), and bash completes with
    it: `kbisect comp<TAB>` to compare, `kbisect compare --max<TAB>` to --max-boots."""
    proc = kbisect("--print-completion", "bash")
    assert proc.returncode == 0, proc.stderr
    script = tmp_path / "kbisect.bash"
    script.write_text(proc.stdout)
    listed = re.search(r"^_shtab_kbisect_subparsers=\((.*)\)$", proc.stdout, re.MULTILINE)
    assert listed is not None
    assert listed.group(1).split() == [name for name, _, _ in cli.COMMANDS]
    subprocess.run(["bash", "-n", str(script)], check=True)
    complete = (
        f"source {script}; "
        "COMP_WORDS=(kbisect comp); COMP_CWORD=1; _shtab_kbisect; echo ${COMPREPLY[@]}; "
        "COMP_WORDS=(kbisect compare --max); COMP_CWORD=2; _shtab_kbisect; echo ${COMPREPLY[@]}"
    )
    got = subprocess.run(["bash", "-c", complete], capture_output=True, text=True, check=True)
    assert got.stdout.splitlines() == ["compare", "--max-boots"]


@pytest.mark.parametrize(
    "argv",
    [
        ["frobnicate"],
        ["--frobnicate"],
        ["doctor", "--frobnicate"],
        ["doctor", "--arch", "sparc"],
        [],
    ],
)
def test_bad_command_lines_are_one_line_and_exit_2(argv: list[str]) -> None:
    proc = kbisect(*argv)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("kbisect")
    assert ": error: " in proc.stderr


@pytest.fixture
def fake_command(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """A subcommand `boom` whose main raises whatever `module.error` holds."""
    module = types.ModuleType("kbisect_test_boom")
    module.error = None  # type: ignore[attr-defined]

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--code", type=int, default=0)

    def main(args: argparse.Namespace) -> int:
        if module.error is not None:  # type: ignore[attr-defined]
            raise module.error  # type: ignore[attr-defined]
        code: int = args.code
        return code

    module.configure = configure  # type: ignore[attr-defined]
    module.main = main  # type: ignore[attr-defined]
    monkeypatch.setattr(cli, "COMMANDS", [("boom", module, "raise something")])
    previous = signal.getsignal(signal.SIGTERM)
    yield module
    signal.signal(signal.SIGTERM, previous)  # cli.main installs its own handler


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UserError("no such revision: v9.99"), 2),
        (InfraError("qemu died"), 3),
        (BuildError("build of 0123abcd failed"), 4),
        (KeyboardInterrupt(), 130),
    ],
)
def test_exception_roots_map_to_exit_codes(
    fake_command: types.ModuleType,
    error: BaseException,
    code: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_command.error = error  # type: ignore[attr-defined]
    assert cli.main(["boom"]) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1
    assert captured.err.startswith("kbisect: ")
    if not isinstance(error, KeyboardInterrupt):
        assert captured.err == f"kbisect: {error}\n"


def test_subcommand_return_value_is_the_exit_code(fake_command: types.ModuleType) -> None:
    assert cli.main(["boom"]) == 0
    assert cli.main(["boom", "--code", "1"]) == 1


def test_unexpected_exceptions_are_not_swallowed(fake_command: types.ModuleType) -> None:
    fake_command.error = ValueError("a bug")  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="a bug"):
        cli.main(["boom"])


def test_every_listed_module_that_exists_has_configure_and_main() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "doctor" in sub.choices
    for name in sub.choices:
        assert callable(sub.choices[name].get_default("_main")), name


def test_an_interrupt_while_parsing_is_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fault suite's SIGHUP once landed while the parser was being built: a traceback.
    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["doctor"]) == 130
    err = capsys.readouterr().err
    assert err.startswith("kbisect: interrupted") and len(err.splitlines()) == 1


def test_a_signal_after_the_run_is_ignored_not_a_traceback() -> None:
    # The fault suite's SIGTERM once landed in the interpreter's final flush of a
    # finished run: "Exception ignored ... KeyboardInterrupt" and exit 120.
    code = (
        "import os, signal, sys\n"
        "from kbisect.commands import cli\n"
        "from kbisect.core import interrupt\n"
        "interrupt.stop_on()\n"
        "print('done')\n"
        "status = cli.leave(0)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "sys.exit(status)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "done\n" and proc.stderr == ""


# A signal while the CLI is still being imported, before main() installs its handlers: the
# import of kbisect.commands.cli sends it to its own process, as a late Ctrl-C does.
INTERRUPTED_IMPORT = """
import builtins, os, runpy, signal
real = builtins.__import__
def imp(name, *args, **kwargs):
    if name == "kbisect.commands.cli":
        os.kill(os.getpid(), signal.SIG{sig})
    return real(name, *args, **kwargs)
builtins.__import__ = imp
runpy.run_module("kbisect", run_name="__main__")
"""


@pytest.mark.parametrize("sig", ["INT", "TERM", "HUP"])
def test_a_signal_while_loading_is_one_line_and_exit_130(sig: str) -> None:
    code = INTERRUPTED_IMPORT.format(sig=sig)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130
    assert done.stderr == "kbisect: interrupted before it started; nothing was done\n"


# a subcommand that prints N characters, run as `python -m kbisect` runs main
PRINTS = """
import sys, types
from kbisect.commands import cli
m = types.ModuleType("prints")
m.configure = lambda p: p.add_argument("n", type=int)
m.main = lambda a: print("x" * a.n) or 0
cli.COMMANDS = [("prints", m, "print")]
raise SystemExit(cli.leave(cli.main(sys.argv[1:])))
"""


@pytest.mark.parametrize("unbuffered", ["", "1"])
@pytest.mark.parametrize("size", [10, 200_000])  # flushed at the end; failing in a write
def test_a_full_stdout_is_one_line_and_exit_3(tmp_path: Path, unbuffered: str, size: int) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(CHECKOUT), "PYTHONUNBUFFERED": unbuffered}
    to_dev_full([sys.executable, "-c", PRINTS, "prints", str(size)], env)


def to_dev_full(argv: list[str], env: dict[str, str]) -> None:
    """`argv` with its standard output on /dev/full: one line, exit 3."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            argv, stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=120, check=False
        )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr == "kbisect: cannot write to standard output: No space left on device\n"


def test_a_closed_pipe_is_quiet_and_a_closed_stdout_one_line() -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(CHECKOUT)}
    argv = [sys.executable, "-c", PRINTS, "prints", "200000"]
    reader = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert reader.stdin is not None
    proc = subprocess.run(
        argv,
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    reader.stdin.close()
    reader.wait()
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 3), proc.stderr
    closed = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *argv],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert closed.returncode == 3
    assert closed.stderr == (
        "kbisect: standard output is closed; redirect it (to /dev/null to drop it)\n"
    )


def test_an_oserror_names_its_path_exit_2_if_given_else_3(
    fake_command: types.ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    error = PermissionError(13, "Permission denied", "/etc/kbisect-x")
    fake_command.error = error  # type: ignore[attr-defined]
    assert cli.main(["boom"]) == 3  # not a path the command line named: kbisect's or the host's
    assert capsys.readouterr().err == "kbisect: /etc/kbisect-x: Permission denied\n"
    given = tmp_path / "given"
    assert cli._given(str(given / "x"), ["--out", str(given)])
    assert cli._given(str(given), [f"--out={given}"])
    assert not cli._given(str(tmp_path / "given2"), [str(given), "--code=3", "--out"])


def test_a_loop_of_links_met_by_resolve_is_one_line(
    fake_command: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python 3.11's Path.resolve() raises RuntimeError on a loop: one line, like ELOOP."""
    fake_command.error = RuntimeError("Symlink loop from '/tmp/kbisect-loop'")  # type: ignore[attr-defined]
    assert cli.main(["boom"]) == 3
    assert capsys.readouterr().err == "kbisect: /tmp/kbisect-loop: a loop of symbolic links\n"
    fake_command.error = RuntimeError("a bug")  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["boom"])


def test_the_environment_dirs_are_checked_before_any_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dangling $KBISECT_CACHE: one line, exit 3; a bisect step aborts instead (128),
    since git reads 3 as "bad"."""
    (tmp_path / "cache").symlink_to(tmp_path / "nowhere")
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    assert cli.main(["db", "info"]) == 3
    line = f"kbisect: the cache ($KBISECT_CACHE) {tmp_path}/cache: a symbolic link to nothing\n"
    assert capsys.readouterr().err == line
    step = ["bisect-step", "--scenario", "smoke", "--target", "fake", "--threshold", "5"]
    assert cli.main(step) == 128
    assert capsys.readouterr().err.endswith(line)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("command", ["report", "history"])
def test_report_and_history_into_a_full_stdout(tmp_path: Path, command: str) -> None:
    """The audit's cases: `kbisect report RUN > /dev/full`, `kbisect history > /dev/full`."""
    run = tmp_path / "run"
    shutil.copytree(CHECKOUT / "docs" / "examples" / "contention-6.12", run)
    argv = [str(run), "--format", "text"]
    if command == "history":  # reads only: every example run
        argv = [str(CHECKOUT / "docs" / "examples"), "--scenario", "smoke", "--machine", "fake1"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(CHECKOUT), "KBISECT_RESULTS": str(tmp_path)}
    to_dev_full([sys.executable, "-m", "kbisect", command, *argv], env)


def test_history_out_is_not_made_before_the_inputs_are_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audit's case: `history --out DIR` made DIR, then refused its input."""
    monkeypatch.setenv("KBISECT_RESULTS", str(tmp_path / "results"))
    out = tmp_path / "new" / "out"
    assert cli.main(["history", str(tmp_path / "empty"), "--out", str(out)]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    (tmp_path / "empty").mkdir()
    assert cli.main(["history", str(tmp_path / "empty"), "--out", str(out)]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert not (tmp_path / "new").exists()
