"""The harness on a machine: PGDATA's mount point and PostgreSQL's bin dir given on the
command line; the hardware facts in the fingerprint (pure parsers)."""

from __future__ import annotations

from pathlib import Path

from harness import fingerprint, guest
from harness.boot import GUEST_WORKDIR, Boot
from kbisect.measure import fingerprint as host_fingerprint

SCENARIO = {"postgres": {"major": 15, "settings": {}}}
CPUINFO = """\
processor\t: 0
model name\t: AMD EPYC 9R14
physical id\t: 0
core id\t\t: 0

processor\t: 1
model name\t: AMD EPYC 9R14
physical id\t: 0
core id\t\t: 0

processor\t: 2
model name\t: AMD EPYC 9R14
physical id\t: 0
core id\t\t: 1

"""


def test_workdir_on_a_machine_is_not_a_host_test(tmp_path):
    args = guest.parse_args(
        [
            "--scenario-json",
            "s",
            "--out",
            "o",
            "--template-dir",
            "t",
            "--workdir",
            "/var/lib/kbisect/pg",
            "--pg-bindir",
            "/opt/pg15/bin",
        ]
    )
    boot = Boot(SCENARIO, tmp_path, tmp_path, args.workdir, args.host_test, args.pg_bindir)
    assert not boot.host_test and boot.workdir == Path("/var/lib/kbisect/pg")
    assert boot.bindir == Path("/opt/pg15/bin") and boot.own_bindir
    assert boot.pgdata == Path("/var/lib/kbisect/pg/pgdata")


def test_defaults_stay_as_they_were(tmp_path):
    guest_boot = Boot(SCENARIO, tmp_path, tmp_path, None)
    assert not guest_boot.host_test and guest_boot.workdir == GUEST_WORKDIR
    assert guest_boot.bindir == Path("/usr/lib/postgresql/15/bin") and not guest_boot.own_bindir
    host_boot = Boot(SCENARIO, tmp_path, tmp_path, tmp_path / "w")
    assert host_boot.host_test


def test_cpuinfo():
    assert fingerprint.cpuinfo(CPUINFO) == {
        "cpu_model": "AMD EPYC 9R14",
        "cpu_threads": 3,
        "cpu_cores": 2,
    }
    arm = "processor\t: 0\nBogoMIPS\t: 50\n\nprocessor\t: 1\nBogoMIPS\t: 50\n"
    assert fingerprint.cpuinfo(arm) == {"cpu_model": None, "cpu_threads": 2, "cpu_cores": 2}
    assert fingerprint.cpuinfo("") == {"cpu_model": None, "cpu_threads": None, "cpu_cores": None}


def test_smt():
    assert fingerprint.smt("1\n") is True
    assert fingerprint.smt("0\n") is False
    assert fingerprint.smt(None) is None


def test_hardware_reads_this_host():
    facts = fingerprint.hardware()
    assert set(facts) == {
        "dmi_product",
        "cpu_model",
        "cpu_cores",
        "cpu_threads",
        "numa_nodes",
        "smt",
        "governor",
    }
    assert facts["cpu_threads"] and facts["cpu_threads"] >= 1


def test_the_boot_nonce_does_not_make_boots_differ():
    line = "root=/dev/vda rw preempt=none kbisect.boot=ab12cd34ef56"
    assert host_fingerprint.kernel_cmdline(line) == "root=/dev/vda rw preempt=none"
