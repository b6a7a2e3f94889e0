"""Preflight decisions on a machine's facts (faked command outputs)."""

from __future__ import annotations

import pytest

from kbisect.core.checks import FAIL, OK, WARN
from kbisect.targets.ssh import check, config

NOTES = (
    "040000001400000003000000474e5500"  # namesz 4, descsz 20, NT_GNU_BUILD_ID, "GNU\0"
    "eb4fbcd037e7253717950bf2b93bd5566f47c56f"
)
FACTS_TEXT = f"""\
uid=0
root=yes
release=6.1.0-56-amd64
uname_m=x86_64
cmdline=root=/dev/vda rw console=ttyS0,115200
notes={NOTES}
kexec=/usr/sbin/kexec
systemctl=/usr/bin/systemctl
python3=3.11
pg15=postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)
lockdown=[none] integrity confidentiality
load_kexec=false
pg_running=0
root_dev=/dev/vda
"""
M = config.load(
    "box", {"kind": "ssh", "host": "127.0.0.1", "arch": "x86_64", "power_cycle": "qmp:/q"}
)


def facts(**change: str) -> dict[str, str]:
    return {**check.parse(FACTS_TEXT), **change}


def test_parse_keeps_equals_in_values_and_skips_noise():
    got = check.parse("cmdline=a=b c=d\nnoise line\n=x\nkexec=\n")
    assert got == {"cmdline": "a=b c=d", "kexec": ""}


def test_a_ready_machine_passes():
    rows = check.rows(M, facts(), [15])
    assert {r.status for r in rows} == {OK}
    assert check.failures(rows) is None
    assert [r.name for r in rows] == [
        "root",
        "arch",
        "python3",
        "lockdown",
        "pg stopped",
        "PostgreSQL 15",
        "kexec-tools",
        "systemd",
        "LOAD_KEXEC",
    ]


@pytest.mark.parametrize(
    ("change", "majors", "words"),
    [
        ({"root": "no", "uid": "1000"}, [], "root: passwordless sudo"),
        ({"uname_m": "aarch64"}, [], "arch: arm64 (target file says x86_64)"),
        ({"kexec": ""}, [], "kexec-tools: missing (install kexec-tools)"),
        ({"python3": ""}, [], "python3: missing"),
        ({"python3": "3.7"}, [], "python3: 3.7"),
        ({"pg15": ""}, [15], "PostgreSQL 15: no /usr/lib/postgresql/15/bin/postgres"),
        ({}, [17], "PostgreSQL 17"),
        ({"lockdown": "none [integrity] confidentiality"}, [], "lockdown: integrity"),
        ({"load_kexec": "true"}, [], "LOAD_KEXEC: LOAD_KEXEC=true"),
        ({"load_kexec": '"true"'}, [], "LOAD_KEXEC"),
        ({"pg_running": "5"}, [], "pg stopped: 5 postgres processes"),
        ({"systemctl": ""}, [], "systemd: missing"),
    ],
)
def test_each_missing_piece_is_named(change, majors, words):
    problem = check.failures(check.rows(M, facts(**change), majors))
    assert problem is not None and words in problem and "\n" not in problem


def test_several_pieces_one_line():
    problem = check.failures(check.rows(M, facts(kexec="", python3=""), []))
    assert problem is not None and "kexec-tools" in problem and "python3" in problem
    assert "\n" not in problem


def test_no_lockdown_file_is_off_and_no_kexec_default_is_off():
    rows = check.rows(M, facts(lockdown="", load_kexec=""), [])
    assert check.failures(rows) is None


def test_script_switch_does_not_need_kexec_and_no_power_cycle_warns():
    m = config.load(
        "box",
        {
            "kind": "ssh",
            "host": "127.0.0.1",
            "arch": "x86_64",
            "switch": "script",
            "switch_script": "x",
        },
    )
    rows = check.rows(m, facts(kexec=""), [])
    assert check.failures(rows) is None
    assert [r.status for r in rows if r.name == "power cycle"] == [WARN]


def test_known_good_and_matching():
    known = check.known_good(facts())
    assert known.release == "6.1.0-56-amd64"
    assert known.cmdline == "root=/dev/vda rw console=ttyS0,115200"
    assert known.build_id == "eb4fbcd037e7253717950bf2b93bd5566f47c56f"
    assert known.matches(facts()) is None
    assert "kbisect switched to" in (
        known.matches(facts(cmdline="root=/dev/vda kbisect.boot=1a")) or ""
    )
    assert "release" in (known.matches(facts(release="6.12.0")) or "")
    assert "build id" in (known.matches(facts(notes=NOTES[:-2] + "00")) or "")
    assert check.build_id(facts(notes="zz")) is None


def test_facts_script_asks_for_each_pinned_major():
    m = config.load(
        "box",
        {"kind": "ssh", "host": "127.0.0.1", "arch": "x86_64", "pg_bindir": "/opt/pg{major}/bin"},
    )
    script = check.facts_script(m, [15, 17])
    assert 'echo "pg15=$(/opt/pg15/bin/postgres --version 2>/dev/null)"' in script
    assert "pg17=$(/opt/pg17/bin/postgres" in script
    assert "kexec_loaded" not in script and "rm " not in script  # it only reads


def test_rows_have_a_fix_exactly_when_failing():
    rows = check.rows(M, facts(kexec=""), [15])
    assert all((r.status == FAIL) == bool(r.fix) for r in rows)
