"""ssh/scp command lines (exact lists) and what a failed ssh meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.targets.ssh import command

KH = Path("/k/known_hosts")
COMMON = [
    "-o",
    "BatchMode=yes",
    "-o",
    "UserKnownHostsFile=/k/known_hosts",
    "-o",
    "StrictHostKeyChecking=accept-new",
    "-o",
    "ConnectTimeout=10",
    "-o",
    "ServerAliveInterval=5",
    "-o",
    "ServerAliveCountMax=3",
    "-o",
    "LogLevel=ERROR",
]


def test_ssh_command_plain():
    r = command.Remote("127.0.0.1", 2222, "root", KH)
    assert command.ssh_command(r, "uname -r") == [
        "ssh",
        *COMMON,
        "-p",
        "2222",
        "root@127.0.0.1",
        "--",
        "uname -r",
    ]


def test_ssh_command_with_key_control_and_argv():
    r = command.Remote("box", 22, "kb", KH, key=Path("/k/id"), control=Path("/t/c-%C"))
    cmd = command.ssh_command(r, ["cat", "/proc/cmdline", "a b"])
    assert cmd == [
        "ssh",
        *COMMON,
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "ControlMaster=auto",
        "-o",
        "ControlPath=/t/c-%C",
        "-o",
        "ControlPersist=60",
        "-i",
        "/k/id",
        "-p",
        "22",
        "kb@box",
        "--",
        "cat /proc/cmdline 'a b'",
    ]


def test_scp_both_ways():
    r = command.Remote("127.0.0.1", 2222, "root", KH)
    assert command.scp_to(r, [Path("/a/bzImage"), Path("/a/s.json")], "/var/lib/kbisect/x") == [
        "scp",
        "-q",
        "-p",
        *COMMON,
        "-P",
        "2222",
        "/a/bzImage",
        "/a/s.json",
        "root@127.0.0.1:/var/lib/kbisect/x",
    ]
    assert command.scp_from(r, "/var/out", Path("/b/machine"), recursive=True) == [
        "scp",
        "-q",
        "-p",
        "-r",
        *COMMON,
        "-P",
        "2222",
        "root@127.0.0.1:/var/out",
        "/b/machine",
    ]


def test_scp_brackets_an_ipv6_loopback():
    r = command.Remote("::1", 22, "root", KH)
    assert command.scp_to(r, [Path("/f")], "/d")[-1] == "root@[::1]:/d"


def test_control_exit():
    r = command.Remote("box", 22, "root", KH, control=Path("/t/c"))
    cmd = command.control_exit_command(r)
    assert cmd[-4:] == ["22", "-O", "exit", "root@box"]
    assert "ControlPath=/t/c" in cmd


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ("ssh: connect to host 127.0.0.1 port 9: Connection refused", "unreachable"),
        ("kex_exchange_identification: read: Connection reset by peer", "unreachable"),
        ("ssh: Could not resolve hostname nosuch: Name or service not known", "unreachable"),
        ("root@127.0.0.1: Permission denied (publickey).", "the key was refused"),
        ("Host key verification failed.", "host key changed"),
        ("something odd\nlast words\n", "last words"),
        ("", "ssh failed"),
    ],
)
def test_diagnose(output, words):
    assert words in command.diagnose(output)


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("testbox", True),
        ("box.lab.example", True),
        ("10.0.0.5", False),
        ("192.168.1.2", False),
        ("-oProxyCommand=x", False),
        ("a b", False),
        ("root@box", False),
        ("", False),
    ],
)
def test_host_error(host, ok):
    assert (command.host_error(host) is None) is ok
