"""The ktest.pl config kbisect writes for a machine, and the --booted step's options."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from kbisect.bisect.git import ktest, step
from kbisect.commands import bisect_step, ktest_config
from kbisect.core import paths, proc
from kbisect.core.exceptions import UserError
from kbisect.measure.record import Sample
from kbisect.targets.ssh.target import SshTarget
from tests.fakes import git, repo_snapshot, users_repo_at_work
from tests.targets.test_ssh_target import FakeSsh, machine_target


@pytest.fixture
def emu(tmp_path) -> SshTarget:
    return machine_target(
        "emu",
        'port = 40022\nconsole = "tail -n0 -F /c/serial.log"\npower_cycle = "qmp:/c/qmp.sock"\n',
    )


def machine(monkeypatch, answers) -> FakeSsh:
    """The machine's ssh and scp faked; git and everything else really run."""
    real, f = proc.run, FakeSsh(answers)

    def run(cmd, **kwargs) -> proc.Result:
        return f(cmd, **kwargs) if str(cmd[0]) in ("ssh", "scp") else real(cmd, **kwargs)

    monkeypatch.setattr("kbisect.targets.ssh.transport.proc.run", run)
    return f


def opts(tmp_path: Path, **kw) -> argparse.Namespace:
    """`kbisect ktest-config`'s options, as its parser leaves them."""
    base = dict(
        target="emu",
        scenario="smoke",
        threshold=400.0,
        tree=tmp_path / "linux",
        output_dir=tmp_path / "out",
        min_config=tmp_path / "config",
        jobs=2,
        test_type="bisect",
        good="v6.12",
        bad="HEAD",
        no_build=None,
        initrd=None,
        out=None,
    )
    return argparse.Namespace(**{**base, **kw})


def resolved(tmp_path: Path, **kw) -> ktest.Resolved:
    """A config as ktest.make resolves it: the tree is ktest's BUILD_DIR here."""
    ns = vars(opts(tmp_path, **kw))
    ns.pop("out")
    cfg = ktest.Config(**ns)
    assert cfg.output_dir is not None
    return ktest.Resolved(cfg, Path(str(cfg.tree)), cfg.output_dir, cfg.good, cfg.bad)


def test_settings_for_a_bisect(tmp_path, emu):
    keys = ktest.settings(emu, "root=/dev/vda rw console=ttyS0", resolved(tmp_path))
    assert keys["MACHINE"] == "emu" and keys["SSH_USER"] == "root"
    assert keys["BUILD_TARGET"] == "arch/x86/boot/bzImage"
    assert keys["TARGET_IMAGE"] == "/var/lib/kbisect/ktest/vmlinuz-test"
    assert keys["MIN_CONFIG"] == str(tmp_path / "config")
    assert keys["SSH_EXEC"].startswith("ssh -o BatchMode=yes")
    assert keys["SSH_EXEC"].endswith("-p 40022 root@127.0.0.1 -- $SSH_COMMAND")
    assert keys["SCP_TO_TARGET"].endswith("-P 40022 $SRC_FILE root@127.0.0.1:$DST_FILE")
    assert "emu reset --name emu" in keys["POWER_CYCLE"]
    assert keys["CONSOLE"] == "tail -n0 -F /c/serial.log"
    assert keys["REBOOT_TYPE"] == "script"
    assert "kexec -s -l /var/lib/kbisect/ktest/vmlinuz-test" in keys["REBOOT_SCRIPT"]
    assert "root=/dev/vda rw console=ttyS0" in keys["REBOOT_SCRIPT"]
    assert "systemctl --no-block kexec" in keys["REBOOT"] and keys["REBOOT"].endswith("; true")
    assert "kexec -u" in keys["SWITCH_TO_GOOD"]
    assert (keys["TEST_TYPE"], keys["BISECT_TYPE"]) == ("bisect", "test")
    assert (keys["BISECT_GOOD"], keys["BISECT_BAD"]) == ("v6.12", "HEAD")
    assert (keys["BISECT_SKIP"], keys["BISECT_TRIES"]) == ("1", "1")
    assert (keys["BISECT_RET_GOOD"], keys["BISECT_RET_SKIP"], keys["BISECT_RET_ABORT"]) == (
        "0",
        "125",
        "128",
    )
    assert "BISECT_RET_BAD" not in keys  # ktest 6.12 compares it with the skip value
    test = keys["TEST"]
    assert "-m kbisect bisect-step --booted --target emu --scenario smoke" in test
    assert f"--kernel {tmp_path}/out/arch/x86/boot/bzImage --threshold 400.0" in test
    assert test.startswith("env PYTHONPATH=")


def test_settings_for_one_test_round_without_threshold(tmp_path, emu):
    keys = ktest.settings(
        emu, "root=/dev/vda", resolved(tmp_path, test_type="test", threshold=None)
    )
    assert keys["TEST_TYPE"] == "test" and "BISECT_TYPE" not in keys
    assert keys["TEST"].endswith("--threshold 1")


def test_render_is_ktest_format():
    keys = {"MACHINE": "emu", "TEST_TYPE": "test", "LOG_FILE": "/l", "TEST": "x y"}
    text = ktest.render(keys, "# reproduce: kbisect ...\n")
    assert text.splitlines() == [
        "# # reproduce: kbisect ...",
        "",
        "MACHINE = emu",
        "LOG_FILE = /l",
        "",
        "TEST_START",
        "TEST_TYPE = test",
        "TEST = x y",
    ]


def test_ktest_config_needs_good_bad_threshold_for_a_bisect(tmp_path):
    ns = opts(tmp_path, target="emu", good=None, out=None)
    with pytest.raises(UserError, match="needs --good, --bad and --threshold"):
        ktest_config.main(ns)


def booted_step_args(target: str) -> argparse.Namespace:
    """`kbisect bisect-step --booted` on `target`, parsed."""
    parser = argparse.ArgumentParser()
    bisect_step.configure(parser)
    given = ["--scenario", "smoke", "--threshold", "5", "--booted", "--target", target]
    return parser.parse_args([*given, "--kernel", "/k/bzImage"])


def test_bisect_step_parser_knows_booted():
    args = booted_step_args("emu")
    assert args.booted and args.target == "emu" and args.kernel == Path("/k/bzImage")


def test_booted_step_refuses_a_non_machine(tmp_path):
    args = booted_step_args("fake")
    with pytest.raises(UserError, match="needs a machine"):
        ktest.booted_step(bisect_step.spec(args), args.kernel)
    assert bisect_step.main(args) == step.ABORT  # git's/ktest's abort, never "bad"


def test_ktest_config_writes_a_file_after_a_preflight(monkeypatch, tmp_path, emu):
    from tests.targets.test_ssh_check import FACTS_TEXT

    f = machine(monkeypatch, [("uid=", 0, FACTS_TEXT)])
    (tmp_path / "config").write_text("CONFIG_KEXEC=y\n")
    repo, shas = users_repo_at_work(tmp_path, [{"subject": f"c{i}"} for i in range(4)])
    before = repo_snapshot(repo)
    out = tmp_path / "emu.conf"
    ns = opts(
        tmp_path,
        target="emu",
        out=out,
        tree=str(repo),
        good="v6.12-user",
        bad=shas[-1][:10],
        output_dir=None,
    )
    assert ktest_config.main(ns) == 0
    text = out.read_text()
    assert "TEST_START" in text and "MIN_CONFIG = " + str(tmp_path / "config") in text
    keys = dict(ln.split(" = ", 1) for ln in text.splitlines() if " = " in ln)
    assert (keys["BISECT_GOOD"], keys["BISECT_BAD"]) == (shas[2], shas[-1])  # ids, not names
    # ktest bisects in a scratch worktree of kbisect's repository, never in the user's
    build = Path(keys["BUILD_DIR"])
    assert build.is_relative_to(paths.cache_dir() / "worktrees")
    assert git(build, "rev-parse", "HEAD") == shas[-1]
    # its builds beside kbisect's O= dirs (ccache hits theirs), incremental, logged apart
    assert keys["OUTPUT_DIR"] == str(build / ".kbisect-o-ktest")
    assert keys["BUILD_NOCLEAN"] == "1"
    assert Path(keys["LOG_FILE"]).parent == paths.cache_dir() / "ktest" / "emu"
    git(build, "bisect", "start", shas[-1], shas[2])  # what ktest.pl does there
    assert repo_snapshot(repo) == before
    script = next(ln for ln in text.splitlines() if ln.startswith("REBOOT_SCRIPT = "))
    assert shlex.split(script)[-1] == (  # what the machine's shell runs: the known-good line
        "kexec -s -l /var/lib/kbisect/ktest/vmlinuz-test "
        "'--append=root=/dev/vda rw console=ttyS0,115200' || kexec -l "
        "/var/lib/kbisect/ktest/vmlinuz-test '--append=root=/dev/vda rw console=ttyS0,115200'"
    )
    assert any("mkdir -p /var/lib/kbisect/ktest" in c[-1] for c in f.calls)
    emu.close()


def test_a_nobuild_round_with_a_distro_kernel(monkeypatch, tmp_path, emu):
    from tests.targets.test_ssh_check import FACTS_TEXT
    from tests.targets.test_ssh_target import fake

    fake(monkeypatch, [("uid=", 0, FACTS_TEXT)])
    image = tmp_path / "vmlinuz"
    image.write_bytes(b"kernel")
    ns = opts(
        tmp_path,
        target="emu",
        out=tmp_path / "c.conf",
        tree=None,
        test_type="test",
        threshold=None,
        min_config=None,
        no_build=image,
        initrd="/boot/initrd.img-6.1",
        output_dir=tmp_path / "ktest",
    )
    assert ktest_config.main(ns) == 0
    keys = dict(
        ln.split(" = ", 1) for ln in (tmp_path / "c.conf").read_text().splitlines() if " = " in ln
    )
    assert keys["BUILD_TYPE"] == "nobuild" and "MIN_CONFIG" not in keys
    assert "--initrd=/boot/initrd.img-6.1" in keys["REBOOT_SCRIPT"]
    assert (tmp_path / "ktest" / "arch/x86/boot/bzImage").read_bytes() == b"kernel"
    assert "CONFIG_MODULES" not in (tmp_path / "ktest" / ".config").read_text().replace(
        "# kbisect", ""
    )
    emu.close()


def test_ktest_config_needs_a_config_or_an_image(tmp_path):
    ns = opts(tmp_path, target="emu", out=None, min_config=None, test_type="test")
    with pytest.raises(UserError, match="--min-config FILE is needed"):
        ktest_config.main(ns)


def test_a_ktest_run_cut_short_mid_bisect_is_reset_next_time(monkeypatch, tmp_path, emu):
    from tests.targets.test_ssh_check import FACTS_TEXT

    machine(monkeypatch, [("uid=", 0, FACTS_TEXT)])
    (tmp_path / "config").write_text("CONFIG_KEXEC=y\n")
    repo, shas = users_repo_at_work(tmp_path, [{"subject": f"c{i}"} for i in range(4)])

    def config(name: str, good: str, bad: str) -> int:
        where = {"out": tmp_path / name, "tree": str(repo), "output_dir": tmp_path / "ktest"}
        return ktest_config.main(opts(tmp_path, target="emu", good=good, bad=bad, **where))

    config("a.conf", shas[1], shas[-1])
    build = Path(
        dict(
            ln.split(" = ", 1)
            for ln in (tmp_path / "a.conf").read_text().splitlines()
            if " = " in ln
        )["BUILD_DIR"]
    )
    git(build, "bisect", "start", shas[-1], shas[1])
    git(build, "bisect", "good")  # ktest killed half-way
    assert config("b.conf", shas[2], shas[-2]) == 0
    assert not (Path(git(build, "rev-parse", "--git-dir")) / "BISECT_LOG").exists()
    assert git(build, "rev-parse", "HEAD") == shas[-2]
    emu.close()


@pytest.mark.parametrize(
    ("good", "bad", "message"),
    [("nope", "HEAD", "unknown revision 'nope'"), ("HEAD", "v6.12-user", "is not an ancestor")],
)
def test_ktest_config_refuses_bad_revisions_before_the_machine(
    monkeypatch, tmp_path, emu, good, bad, message
):

    f = machine(monkeypatch, [])
    (tmp_path / "config").write_text("CONFIG_KEXEC=y\n")
    repo, _ = users_repo_at_work(tmp_path, [{"subject": f"c{i}"} for i in range(4)])
    ns = opts(tmp_path, target="emu", out=None, tree=str(repo), good=good, bad=bad)
    with pytest.raises(UserError, match=message):
        ktest_config.main(ns)
    assert f.calls == []  # nothing ran on the machine


def test_the_booted_step_keeps_the_machines_own_kernel_as_known_good(monkeypatch, emu):
    """ktest boots its test kernel without kbisect's nonce: the step's preflight must not
    record it as the known-good kernel (seen on the emulated machine: the next run would
    have "restored" the machine to ktest's kernel)."""
    from tests.targets.test_ssh_check import FACTS_TEXT

    machine(monkeypatch, [("uid=", 0, FACTS_TEXT)])
    emu.preflight()  # ktest-config's: the machine on its own kernel
    emu.close()
    own = emu._stored_known()
    assert own is not None and own.release == "6.1.0-56-amd64"
    ktests = FACTS_TEXT.replace("release=6.1.0-56-amd64", "release=6.12.117-ktest+")
    machine(monkeypatch, [("uid=", 0, ktests)])
    booted = ktest.BootedTarget(emu.name, emu.arch, emu.m)
    booted.preflight()
    assert booted.known == own and emu._stored_known() == own
    booted.lock = None


def test_the_booted_step_needs_a_recorded_known_good_kernel(monkeypatch, emu):
    from tests.targets.test_ssh_check import FACTS_TEXT

    machine(monkeypatch, [("uid=", 0, FACTS_TEXT)])
    booted = ktest.BootedTarget(emu.name, emu.arch, emu.m)
    with pytest.raises(UserError, match="no known-good kernel of emu is recorded"):
        booted.preflight()


def test_the_booted_step_names_its_run_dir_like_every_run(monkeypatch, tmp_path, emu):
    """Its samples go to a run dir measure/results.py made (`<UTC time>-ktest-<machine>`,
    with samples/), as every other run's do."""
    image = tmp_path / "bzImage"
    image.write_bytes(b"")
    outs = []

    def take(target, boot):
        outs.append(boot.out_dir)
        return Sample.of({"tps": 10.0})

    monkeypatch.setattr("kbisect.bisect.git.ktest.sample.take", take)
    monkeypatch.setattr("kbisect.bisect.git.ktest.registry.get", lambda name: emu)
    args = booted_step_args("emu")
    assert ktest.booted_step(bisect_step.spec(args), image) == step.EXIT_FOR["good"]
    [out] = set(outs)
    assert out.parent == paths.results_dir() and (out / "samples").is_dir()
    assert re.fullmatch(r"\d{8}T\d{6}Z-ktest-emu", out.name)
