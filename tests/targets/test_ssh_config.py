"""A machine target's TOML schema: defaults, and one line naming each bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.core.exceptions import UserError
from kbisect.targets import registry
from kbisect.targets.ssh import config

GOOD = {"kind": "ssh", "host": "127.0.0.1", "arch": "x86_64"}


def test_defaults():
    m = config.load("box", GOOD)
    assert (m.port, m.user, m.key, m.switch) == (22, "root", None, "kexec")
    assert m.workdir == "/var/lib/kbisect" and m.pgdata == "/var/lib/kbisect/pg"
    assert m.pg_bindir == "/usr/lib/postgresql/{major}/bin"
    assert m.known_hosts == config.state_dir("box") / "known_hosts"
    assert m.boot_timeout_s == 600 and m.sudo == ""


def test_all_keys(tmp_path):
    key = tmp_path / "id"
    key.write_text("k")
    m = config.load(
        "box",
        {
            **GOOD,
            "port": 2222,
            "user": "kb",
            "key": str(key),
            "known_hosts": str(tmp_path / "kh"),
            "switch": "script",
            "switch_script": "my-switch",
            "console": "tail -F /x",
            "power_cycle": "qmp:/q.sock",
            "workdir": "/srv/kb/",
            "pgdata": "/mnt/pg",
            "pg_bindir": "/opt/pg{major}/bin",
            "boot_timeout_s": 120,
        },
    )
    assert (m.port, m.user, m.key, m.switch_script) == (2222, "kb", key, "my-switch")
    assert (m.workdir, m.pgdata, m.sudo) == ("/srv/kb", "/mnt/pg", "sudo -n ")
    assert m.remote().port == 2222


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"hostname": "x"}, "unknown key 'hostname'"),
        ({"host": None}, "missing key 'host'"),
        ({"arch": None}, "missing key 'arch'"),
        ({"port": "22"}, "port must be an integer"),
        ({"port": True}, "port must be an integer"),
        ({"port": 70000}, "port must be 1-65535"),
        ({"host": "10.1.2.3"}, "must be a loopback one"),
        ({"host": "-oProxyCommand=x"}, "is not a host name"),
        ({"switch": "reboot"}, "switch must be one of kexec, script"),
        ({"switch": "script"}, "switch_script goes with"),
        ({"switch_script": "x"}, "switch_script goes with"),
        ({"workdir": "relative"}, "workdir must be an absolute dir"),
        ({"workdir": "/"}, "workdir must be an absolute dir"),
        ({"pgdata": "pg"}, "pgdata must be an absolute path"),
        ({"key": "/nonexistent/id"}, "key /nonexistent/id: no such file"),
        ({"boot_timeout_s": 1}, "boot_timeout_s must be at least 10"),
    ],
)
def test_bad_keys(change, words):
    settings = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(config.BadMachine) as info:
        config.load("box", settings)
    assert words in str(info.value)
    assert "\n" not in str(info.value) and str(info.value).startswith("target box: ")
    assert info.value.exit_code == 2


def write_target(name: str, text: str) -> Path:
    path = registry.config_dir() / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_targets_get_reads_a_machine_file():
    write_target("box", 'kind = "ssh"\nhost = "127.0.0.1"\nport = 2200\narch = "x86_64"\n')
    t = registry.get("box")
    assert t.kind == "ssh" and t.arch.name == "x86_64" and "box" in registry.names()
    assert t.describe()["host"] == "127.0.0.1:2200"


def test_targets_get_errors_are_one_line():
    write_target("box", 'kind = "ssh"\nhost = "127.0.0.1"\narch = "x86_64"\nfoo = 1\n')
    with pytest.raises(UserError, match="unknown key 'foo'"):
        registry.get("box")
    with pytest.raises(UserError, match="unknown target 'nosuch'"):
        registry.get("nosuch")
    with pytest.raises(UserError, match="runs x86_64"):
        registry.get(
            "box2"
            if write_target("box2", 'kind = "ssh"\nhost = "127.0.0.1"\narch = "x86_64"\n')
            else "",
            "arm64",
        )
