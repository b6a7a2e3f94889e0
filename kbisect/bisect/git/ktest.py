"""The ktest.pl bridge: `kbisect ktest-config` writes a ktest.pl config for a machine
target, whose TEST is `kbisect bisect-step --booted`: kbisect measures the kernel ktest
has just built, installed and booted (verified: its release and build id), with its own
sequential sampling inside (ktest's BISECT_TRIES would call a commit bad on its first
failure), and answers in ktest's return codes (BISECT_RET_GOOD/SKIP/ABORT = git's
0/125/128; anything else non-zero is bad). docs/ktest.md has both ways round.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbisect.bisect.git import judge, step
from kbisect.core import atomic, paths, progress
from kbisect.core.exceptions import BenchmarkError, BootError, UserError
from kbisect.kernel.build import OBJ_PREFIX
from kbisect.measure import results, sample
from kbisect.scenario import scenario
from kbisect.source import git, scratch, tree, worktree
from kbisect.targets import registry
from kbisect.targets.base import Job, Kernel
from kbisect.targets.ssh import check as sshcheck
from kbisect.targets.ssh import command, kexec
from kbisect.targets.ssh.job import expected
from kbisect.targets.ssh.target import SshTarget

TARGET_IMAGE = "ktest/vmlinuz-test"  # under the machine's workdir
OUTPUT_SUBDIR = f"{OBJ_PREFIX}ktest"  # ktest's OUTPUT_DIR in its scratch worktree
TEST_KEYS = ("TEST", "BUILD_TYPE", "MIN_CONFIG", "BISECT_")  # the TEST_START section
RETURN_CODES = {"BISECT_RET_GOOD": 0, "BISECT_RET_SKIP": 125, "BISECT_RET_ABORT": 128}


def shell(cmd: list[str]) -> str:
    return shlex.join(cmd)


def ssh_exec(t: SshTarget) -> str:
    """ktest's SSH_EXEC: ssh with kbisect's options; $SSH_COMMAND is ktest's."""
    cmd = command.ssh_command(t.m.remote(), "X")[:-1]
    return f"{shell(cmd)} $SSH_COMMAND"


def scp_to_target(t: SshTarget) -> str:
    r = t.m.remote()
    opts = shell(["scp", "-q", *command.options(r), "-P", str(r.port)])
    return f"{opts} $SRC_FILE {r.login}:$DST_FILE"


def on_machine(t: SshTarget, script: str) -> str:
    """A local command running the shell `script` on the machine as root."""
    remote = f"{t.m.sudo}sh -c {shlex.quote(script)}" if t.m.sudo else script
    return shell(command.ssh_command(t.m.remote(), remote))


def kbisect_command(*args: str) -> str:
    """This checkout's kbisect, runnable from anywhere (ktest runs it from its own dir)."""
    return f"env PYTHONPATH={shlex.quote(str(paths.CHECKOUT))} " + shell(
        [sys.executable, "-m", "kbisect", *args]
    )


def power_cycle(t: SshTarget) -> str:
    how = t.m.power_cycle or "echo 'power-cycle the machine by hand'; false"
    if how.startswith("qmp:"):
        return kbisect_command("emu", "reset", "--name", t.name)
    return how


@dataclass(frozen=True)
class Config:
    """What `kbisect ktest-config` was asked for."""

    target: str
    scenario: str
    threshold: float | None = None
    min_config: Path | None = None
    no_build: Path | None = None  # an image ktest installs as it is (BUILD_TYPE = nobuild)
    initrd: str | None = None
    tree: str | None = None
    test_type: str = "bisect"  # or "test"
    good: str | None = None
    bad: str | None = None
    output_dir: Path | None = None
    jobs: int = 2

    def check(self) -> None:
        """One line (UserError) for what cannot work, before the machine is touched."""
        if self.test_type == "bisect" and not (self.good and self.bad and self.threshold):
            raise UserError("--test-type bisect needs --good, --bad and --threshold")
        for given in (self.min_config, self.no_build):
            if given is not None and not given.is_file():
                raise UserError(f"{given}: no such file")
        if self.min_config is None and self.no_build is None:
            raise UserError("--min-config FILE is needed (or --no-build IMAGE)")


@dataclass(frozen=True)
class Resolved:
    """A Config with its revisions read in the user's tree and ktest's directories made."""

    config: Config
    build_dir: Path
    output_dir: Path
    good: str | None
    bad: str | None


def settings(t: SshTarget, cmdline: str, r: Resolved) -> dict[str, str]:
    """ktest.pl's keys for this machine (the docs/ktest.md table explains each)."""
    opts = r.config
    image = f"{t.m.workdir}/{TARGET_IMAGE}"
    load = " || ".join(
        shell(kexec.load_command(image, cmdline, opts.initrd, file_load=f)) for f in (True, False)
    )
    kexec_or_reboot = (
        'if [ "$(cat /sys/kernel/kexec_loaded)" = 1 ]; then systemctl --no-block kexec; '
        "else systemctl --no-block reboot; fi"
    )
    test = [
        "bisect-step",
        "--booted",
        "--target",
        t.name,
        "--scenario",
        opts.scenario,
        "--kernel",
        f"{r.output_dir}/{t.arch.image}",
    ]
    # No --threshold: good = the scenario ran at all (tps above 1).
    test += ["--threshold", str(opts.threshold if opts.threshold is not None else 1)]
    out = {
        "MACHINE": t.name,
        "SSH_USER": t.m.user,
        "BUILD_DIR": str(r.build_dir),
        "OUTPUT_DIR": str(r.output_dir),
        "BUILD_TARGET": t.arch.image,
        "TARGET_IMAGE": image,
        "LOCALVERSION": "-ktest",
        "BUILD_OPTIONS": f"-j{opts.jobs}",
        "MAKE_CMD": "make CC='ccache gcc'",
        "BUILD_NOCLEAN": "1",
        "SSH_EXEC": ssh_exec(t),
        "SCP_TO_TARGET": scp_to_target(t),
        "POWER_CYCLE": power_cycle(t),
        "CONSOLE": t.m.console or "echo no console configured; sleep infinity",
        "REBOOT_TYPE": "script",
        "REBOOT_SCRIPT": on_machine(t, load),
        "REBOOT": on_machine(t, kexec_or_reboot) + "; true",
        "SWITCH_TO_GOOD": on_machine(t, "kexec -u") + "; true",
        "SUCCESS_LINE": "login:",
        "REBOOT_SUCCESS_LINE": "login:",
        "TIMEOUT": str(t.m.boot_timeout_s),
        "BOOTED_TIMEOUT": "5",
        "LOG_FILE": str(log_dir(t.name) / "ktest.log"),
        "CLEAR_LOG": "1",
        "TEST_TYPE": opts.test_type,
        "TEST": kbisect_command(*test),
        **{k: str(v) for k, v in RETURN_CODES.items()},
    }
    if opts.min_config is not None:
        out["MIN_CONFIG"] = str(opts.min_config)
    if opts.no_build is not None:
        out["BUILD_TYPE"] = "nobuild"
    if opts.test_type == "bisect" and r.good and r.bad:
        out.update(
            BISECT_TYPE="test",
            BISECT_GOOD=r.good,
            BISECT_BAD=r.bad,
            BISECT_SKIP="1",
            BISECT_TRIES="1",
        )
    return out


def render(keys: Mapping[str, str], header: str) -> str:
    """ktest.pl's format: the machine's keys first (the defaults: LOG_FILE must be one),
    then one TEST_START section with what the test is."""
    test = {k: v for k, v in keys.items() if k.startswith(TEST_KEYS)}
    lines = [f"# {line}" for line in header.splitlines()]
    lines += ["", *(f"{k} = {v}" for k, v in keys.items() if k not in test)]
    lines += ["", "TEST_START", *(f"{k} = {v}" for k, v in test.items())]
    return "\n".join(lines) + "\n"


def make(cfg: Config) -> str:
    """The ktest.pl config for cfg's machine and test: the machine checked (its known-good
    kernel recorded), ktest's scratch worktree and OUTPUT_DIR made; the config's text."""
    cfg.check()
    t = registry.get(cfg.target)
    if not isinstance(t, SshTarget):
        raise UserError(f'--target {cfg.target}: ktest drives machines (kind = "ssh")')
    scen = scenario.load(cfg.scenario)
    repo = tree.resolve(cfg.tree)
    good, bad = cfg.good, cfg.bad
    if cfg.test_type == "bisect":  # ids, read in the user's tree: ktest bisects elsewhere
        assert good is not None and bad is not None
        good, bad = (scratch.rev_parse(repo, r) for r in (good, bad))
        if not git.is_ancestor(repo, good, bad):
            raise UserError(f"--good {good[:12]} is not an ancestor of --bad {bad[:12]}")
    with t:  # releases the machine for ktest
        t.preflight(scen)
        where = shlex.quote(str(Path(t.m.workdir, TARGET_IMAGE).parent))
        t.session.check(f"{t.m.sudo}mkdir -p {where}")  # ktest copies TARGET_IMAGE there
    assert t.known is not None
    at = bad if cfg.test_type == "bisect" else "HEAD"
    build_at = repo if cfg.no_build is not None else build_dir(repo, t.name, str(at))
    log_dir(t.name).mkdir(parents=True, exist_ok=True)
    output = cfg.output_dir
    if output is None:
        # Beside kbisect's own O= dirs, a direct subdirectory of the checkout: kbuild
        # then names sources relatively and ktest's compiles hit ccache's objects of
        # kbisect's builds (build.obj_dir).
        output = log_dir(t.name) / "nobuild" if cfg.no_build else build_at / OUTPUT_SUBDIR
    output = output.resolve()
    output.mkdir(parents=True, exist_ok=True)
    if cfg.no_build is not None:
        prebuilt(cfg.no_build, output, t.arch.image, cfg.min_config)
    r = Resolved(replace(cfg, good=good, bad=bad), build_at, output, good, bad)
    return render(settings(t, t.known.cmdline, r), progress.log_header())


def log_dir(name: str) -> Path:
    return paths.cache_dir() / "ktest" / name


def build_dir(repo: Path, name: str, at: str) -> Path:
    """ktest's BUILD_DIR: never the user's tree (ktest.pl runs `git bisect` and checks
    out commits in it) but a scratch worktree of kbisect's own repository, at --bad (or
    at the tree's HEAD for a TEST round)."""
    slot = f"ktest-{name}"
    where = worktree.path_for(repo, slot)
    with worktree.locked(where):
        if where.is_dir() and git.bisect_in_progress(where):  # a ktest run cut short
            git.git(where, "bisect", "reset", check=False)
            if git.bisect_in_progress(where):
                shutil.rmtree(where)  # made afresh below
        return worktree.checkout(repo, at, slot)


def prebuilt(image: Path, output_dir: Path, build_target: str, config: Path | None) -> None:
    """OUTPUT_DIR as ktest's nobuild expects it: the image at BUILD_TARGET, a .config
    (ktest reads CONFIG_MODULES there: without one, a prebuilt image's modules must
    already be on the machine)."""
    dest = output_dir / build_target
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(image, dest)
    text = config.read_text() if config else "# kbisect --no-build: no modules to install\n"
    atomic.write_text(output_dir / ".config", text)


# -- `kbisect bisect-step --booted`: measure the kernel ktest booted ---------------------
class BootedTarget(SshTarget):
    """The machine as ktest left it: no switch, no restore (ktest owns its kernels); each
    sample verifies the kernel that runs, then runs the harness."""

    def boot(self, job: Job) -> None:
        self._ready(job.scen)
        self._verify(expected(job.kernel))
        self._measure(job, f"ktest-{int(time.time() * 1000)}")

    def headline(self, job: Job) -> str:
        return f"as booted by ktest, on {self.m.host}:{self.m.port}"

    def _known_good(self, facts: dict[str, Any]) -> sshcheck.KnownGood:
        """The kernel that runs is ktest's test kernel, not the machine's own: the one
        recorded by kbisect before (ktest-config's preflight) stays."""
        stored = self._stored_known()
        if stored is None:
            raise UserError(
                f"--booted: no known-good kernel of {self.name} is recorded: run `kbisect "
                f"ktest-config --target {self.name} ...` while it runs its own kernel"
            )
        return stored

    def close(self) -> None:
        return None


def booted_step(spec: step.Step, image: Path | None) -> int:
    """Samples of the kernel ktest booted (`image`, verified) until the step's sequential
    rule answers; git's (and ktest's) exit codes: 0 good, 1 bad, 125 skip."""
    if image is None:
        raise UserError("--booted needs --kernel (the image that was booted) and --target")
    if spec.threshold is None:
        raise UserError("--booted needs --threshold TPS (references are for kbisect's builds)")
    policy = spec.judge_policy()
    t = registry.get(spec.target)
    if not isinstance(t, SshTarget):
        raise UserError(f'--target {spec.target}: --booted needs a machine (kind = "ssh")')
    booted = BootedTarget(t.name, t.arch, t.m)
    kernel = Kernel.find(str(image))
    scen = scenario.load(spec.scenario)
    out = results.new_run_dir("ktest", t.name)

    def draw() -> float:
        taken = sample.take(booted, sample.Boot(kernel, scen, out, label="ktest"))
        return taken.tps or 0.0

    try:
        d = judge.sample_until([], draw, policy)
    except (BootError, BenchmarkError) as exc:
        progress.step(f"step: booted {kernel.image.name}: skip: {exc}")
        return step.SKIP
    progress.step(f"step: booted {kernel.image.name}: {d.verdict}: {d.reason} (samples in {out})")
    return step.EXIT_FOR[d.verdict]
