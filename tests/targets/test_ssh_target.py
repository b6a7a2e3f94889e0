"""The ssh target's decisions on faked command outputs: preflight (unreachable host,
refused key, missing pieces, lockdown), a kernel of another arch, a failed boot
power-cycled into a BootError, close() restoring the known-good kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.core import proc
from kbisect.core.exceptions import BootError, CommandTimeout, UserError
from kbisect.scenario import scenario
from kbisect.targets import registry
from kbisect.targets.base import Kernel, WrongArch
from kbisect.targets.ssh import check
from kbisect.targets.ssh.job import expected, harness_command, harness_tar
from kbisect.targets.ssh.target import SshTarget
from tests.targets.test_ssh_check import FACTS_TEXT


class FakeSsh:
    """Answers ssh commands by the first matching needle; records every command."""

    def __init__(self, answers: list[tuple[str, int, str]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, cmd, **kwargs) -> proc.Result:
        argv = [str(c) for c in cmd]
        self.calls.append(argv)
        for needle, code, out in self.answers:
            if needle in argv[-1]:
                return proc.Result(code, out, None)
        return proc.Result(0, "", None)


def machine_target(name: str, extra: str) -> SshTarget:
    """An ssh target file NAME.toml on 127.0.0.1 (x86_64) with `extra` TOML lines."""
    path = registry.config_dir() / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'kind = "ssh"\nhost = "127.0.0.1"\narch = "x86_64"\n{extra}')
    t = registry.get(name)
    assert isinstance(t, SshTarget)
    return t


@pytest.fixture
def box() -> SshTarget:
    return machine_target(
        "box", 'port = 2222\npower_cycle = "qmp:/nonexistent.sock"\nboot_timeout_s = 10\n'
    )


def fake(monkeypatch, answers) -> FakeSsh:
    f = FakeSsh(answers)
    monkeypatch.setattr("kbisect.targets.ssh.transport.proc.run", f)
    return f


@pytest.mark.parametrize(
    ("out", "words"),
    [
        ("ssh: connect to host 127.0.0.1 port 2222: Connection refused", "unreachable"),
        ("root@127.0.0.1: Permission denied (publickey).", "the key was refused"),
    ],
)
def test_unreachable_or_refused_is_one_line_exit_2(monkeypatch, box, out, words):
    f = fake(monkeypatch, [("uid=", 255, out)])
    with pytest.raises(UserError) as info:
        box.preflight(scenario.load("smoke"))
    msg = str(info.value)
    assert msg.startswith("target box: cannot ssh to box (root@127.0.0.1:2222)")
    assert words in msg and "\n" not in msg and info.value.exit_code == 2
    assert len(f.calls) == 1  # nothing installed, nothing else run


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("kexec=", "kexec-tools: missing"),
        ("python3=", "python3: missing"),
        ("pg15=", "PostgreSQL 15: no /usr/lib/postgresql/15/bin/postgres"),
        ("lockdown=none [integrity] confidentiality", "lockdown: integrity"),
        ("load_kexec=true", "LOAD_KEXEC=true"),
        ("pg_running=3", "3 postgres processes"),
        ("uname_m=aarch64", "arch: arm64"),
    ],
)
def test_missing_pieces_stop_before_any_install(monkeypatch, box, line, words):
    f = fake(monkeypatch, [("uid=", 0, FACTS_TEXT + line + "\n")])
    with pytest.raises(UserError) as info:
        box.preflight(scenario.load("smoke"))
    assert str(info.value).startswith("target box is not ready: ")
    assert words in str(info.value) and "\n" not in str(info.value)
    assert len(f.calls) == 1 and not any("scp" in c[0] for c in f.calls)


def test_preflight_records_the_known_good_kernel(monkeypatch, box):
    fake(monkeypatch, [("uid=", 0, FACTS_TEXT)])
    box.preflight(scenario.load("smoke"))
    known = box.describe()["known_good"]
    assert known == {
        "release": "6.1.0-56-amd64",
        "cmdline": "root=/dev/vda rw console=ttyS0,115200",
        "build_id": "eb4fbcd037e7253717950bf2b93bd5566f47c56f",
    }
    assert registry.get("box").describe()["known_good"] == known  # kept in the cache


def test_preflight_restores_a_machine_left_on_a_test_kernel(monkeypatch, box):
    fake(monkeypatch, [("uid=", 0, FACTS_TEXT)])
    box.preflight()
    left = FACTS_TEXT.replace("console=ttyS0,115200", "console=ttyS0,115200 kbisect.boot=ab12")
    fake(monkeypatch, [("uid=", 0, left)])
    restored: list[bool] = []
    monkeypatch.setattr(
        SshTarget, "_restore", lambda self, known, power=False: restored.append(power)
    )
    with pytest.raises(UserError, match="runs a kernel kbisect switched to"):
        box.preflight()  # the fake still shows the nonce: never recorded as known-good
    assert restored == [False]
    assert "kbisect.boot" not in box.describe()["known_good"]["cmdline"]


def test_a_kernel_of_another_arch_is_refused(tmp_path, box):
    image = tmp_path / "Image"
    data = bytearray(4096)
    data[0x38:0x3C] = b"ARM\x64"
    image.write_bytes(bytes(data))
    with pytest.raises(WrongArch, match="an arm64 kernel, but box runs x86_64"):
        box.validate(Kernel.find(image))


def test_a_failed_boot_power_cycles_and_is_a_boot_error(monkeypatch, tmp_path, box):
    fake(monkeypatch, [("uid=", 0, FACTS_TEXT)])
    box.preflight(scenario.load("smoke"))
    monkeypatch.setattr(SshTarget, "_install", lambda self, image: f"/k/{image.name}")
    monkeypatch.setattr(SshTarget, "_switch", lambda self, *a: None)

    def hang(self, nonce, feed):
        raise CommandTimeout("box was not back within the deadline")

    monkeypatch.setattr(SshTarget, "_await", hang)
    cycles: list[bool] = []
    monkeypatch.setattr(
        SshTarget, "_restore", lambda self, known, power=False: cycles.append(power)
    )
    image = tmp_path / "bzImage"
    image.write_bytes(b"\0" * 4096)
    job = make_job(tmp_path, Kernel.find(image))
    with pytest.raises(BootError, match=r"not back within the deadline.*power-cycled"):
        box.boot(job)
    assert cycles == [True]


def test_close_restores_only_after_a_switch(monkeypatch, box):
    restored: list[bool] = []
    monkeypatch.setattr(
        SshTarget, "_restore", lambda self, known, power=False: restored.append(power)
    )
    box.close()
    assert restored == []
    box.known = check.known_good(check.parse(FACTS_TEXT))
    box.switched = True
    with box:
        pass
    assert restored == [False]


def test_close_ends_the_ssh_master_connection(monkeypatch, box):
    f = fake(monkeypatch, [])
    box.close()
    [argv] = f.calls
    assert argv[0] == "ssh" and "-O" in argv and argv[argv.index("-O") + 1] == "exit"
    assert any(a.startswith("ControlPath=") for a in argv)


def test_a_silent_failure_of_the_shared_connection_is_retried_fresh(monkeypatch, box):
    """A master left talking to a kernel that went away ends its session without a word
    (exit 255): the master is ended and the command runs once on a fresh connection."""
    answers = iter([(255, ""), (0, FACTS_TEXT)])
    calls: list[list[str]] = []

    def run(cmd, **kwargs):
        calls.append([str(c) for c in cmd])
        if "-O" in calls[-1]:
            return proc.Result(0, "", None)
        code, out = next(answers)
        return proc.Result(code, out, None)

    monkeypatch.setattr("kbisect.targets.ssh.transport.proc.run", run)
    assert box._facts([])["release"] == check.parse(FACTS_TEXT)["release"]
    shared = [any(a.startswith("ControlPath=") for a in c) for c in calls]
    assert shared == [True, True, False] and "-O" in calls[1]  # the first facts call failed
    # a failure ssh explains (refused, unreachable) is not retried
    calls.clear()

    def refused(cmd, **kwargs):
        calls.append([str(c) for c in cmd])
        return proc.Result(255, "Connection refused", None)

    monkeypatch.setattr("kbisect.targets.ssh.transport.proc.run", refused)
    with pytest.raises(UserError, match="unreachable"):
        box._facts([])
    assert len(calls) == 1


def test_harness_command_and_tar(tmp_path, box):
    cmd = harness_command(box.m, "/var/lib/kbisect/boots/n1", 15)
    assert cmd == (
        "sh -c 'mkdir -p /var/lib/kbisect/boots/n1/out && "
        "tar -xf /var/lib/kbisect/boots/n1.tar -C /var/lib/kbisect/boots/n1 && "
        "mv /var/lib/kbisect/boots/n1.json /var/lib/kbisect/boots/n1/scenario.json' && exec "
        "python3 -u /var/lib/kbisect/boots/n1/harness/guest.py "
        "--scenario-json /var/lib/kbisect/boots/n1/scenario.json "
        "--out /var/lib/kbisect/boots/n1/out --template-dir /var/lib/kbisect/pg-templates "
        "--workdir /var/lib/kbisect/pg"
    )
    import tarfile

    with tarfile.open(harness_tar(tmp_path / "h.tar")) as tar:
        names = tar.getnames()
    assert "harness/guest.py" in names and not any("__pycache__" in n for n in names)


def test_expected_reads_the_manifest_release_else_the_image(tmp_path):
    image = tmp_path / "bzImage"
    image.write_bytes(b"\0" * 4096)
    (tmp_path / "manifest.json").write_text('{"kernelrelease": "6.12.0-kb", "arch": "x86_64"}')
    assert expected(Kernel.find(image)) == {"release": "6.12.0-kb", "build_id": None}


def make_job(tmp_path: Path, kernel: Kernel):
    from kbisect.targets.base import Job

    boot_dir = tmp_path / "boot"
    boot_dir.mkdir()
    return Job(
        kernel,
        scenario.load("smoke"),
        (),
        boot_dir,
        tmp_path / "tpl",
        lambda line: None,
        boot_dir / "console.log",
        900.0,
        120.0,
    )


def test_one_kbisect_per_machine(monkeypatch, box):
    fake(monkeypatch, [("uid=", 0, FACTS_TEXT)])
    box.preflight()
    other = registry.get("box")
    with pytest.raises(UserError, match=r"in use by another kbisect \(pid \d+\)"):
        other.preflight()
    box.close()  # releases it
    other.preflight()
    other.close()


def test_doctor_rows_name_the_machine(monkeypatch, box):
    fake(monkeypatch, [("uid=", 0, FACTS_TEXT)])
    rows = box.checks()
    assert rows[0].name == "box: ssh" and rows[0].status == "OK"
    assert rows[-1].name == "box: known-good kernel" and "6.1.0-56-amd64" in rows[-1].detail
    assert all(r.name.startswith("box: ") for r in rows)
    fake(monkeypatch, [("uid=", 255, "Connection refused")])
    assert [(r.name, r.status) for r in box.checks()] == [("box: ssh", "FAIL")]


def test_switch_script_gets_the_boot_in_its_environment(monkeypatch, tmp_path):
    seen = tmp_path / "seen"
    path = registry.config_dir() / "scripted.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        'kind = "ssh"\nhost = "127.0.0.1"\narch = "x86_64"\nswitch = "script"\n'
        f'switch_script = "env | grep ^KBISECT_ | sort > {seen}"\n'
    )
    t = registry.get("scripted")
    assert isinstance(t, SshTarget)
    t._switch("/var/lib/kbisect/kernels/ab/bzImage", "root=/dev/vda kbisect.boot=n1", None)
    assert t.switched
    told = [ln for ln in seen.read_text().splitlines() if "KBISECT_RESULTS" not in ln]
    assert told == [
        "KBISECT_CMDLINE=root=/dev/vda kbisect.boot=n1",
        "KBISECT_HOST=127.0.0.1",
        "KBISECT_IMAGE=/var/lib/kbisect/kernels/ab/bzImage",
        "KBISECT_INITRD=",
        "KBISECT_KEY=",
        "KBISECT_PORT=22",
        "KBISECT_USER=root",
    ]
    path.write_text(path.read_text().replace("env |", "exit 1; env |"))
    with pytest.raises(BootError, match="switch_script exited 1"):
        registry.get("scripted")._switch("/k", "c", None)  # type: ignore[attr-defined]


def test_measure_copies_the_harness_over_and_keeps_no_copy_in_the_results(
    monkeypatch, box, tmp_path
):
    f = fake(monkeypatch, [])
    image = tmp_path / "bzImage"
    image.write_bytes(b"\0" * 4096)
    job = make_job(tmp_path, Kernel.find(image))
    job.scenario_file.write_text("{}")
    box._measure(job, "n1")
    [put] = [c for c in f.calls if c[0] == "scp" and c[-1].endswith(":/var/lib/kbisect/boots")]
    assert put[-3].endswith("n1.tar") and put[-2].endswith("n1.json")
    assert not list(job.boot_dir.glob("*.tar")) and (job.boot_dir / "n1.json").is_file()
