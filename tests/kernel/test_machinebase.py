"""--base target:NAME: the machine's config, streamlined; kexec fragments; the build key."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.commands import options
from kbisect.core.arch import get as get_arch
from kbisect.core.exceptions import UserError
from kbisect.kernel import build, kconfig, machinebase
from kbisect.kernel import config as build_config
from kbisect.targets.ssh import baseconfig


def test_target_name():
    assert machinebase.target_name("target:emu") == "emu"
    assert machinebase.target_name("tinyconfig") is None
    assert machinebase.target_name("/path/config") is None


def test_streamline_command():
    cmd = machinebase.streamline_command(Path("/src"), Path("/obj/.x.config"))
    assert cmd == [
        "sh",
        "-c",
        'exec perl "$1" --localyesconfig "$2" Kconfig > "$3"',
        "sh",
        "/src/scripts/kconfig/streamline_config.pl",
        "/src",
        "/obj/.x.config",
    ]


def test_streamline_env():
    env = machinebase.streamline_env(Path("/c/lsmod"), get_arch("x86_64"))
    assert env == {"LSMOD": "/c/lsmod", "SRCARCH": "x86", "ARCH": "x86"}


def test_resolve_adds_the_machine_fragments_only_on_a_machine_base():
    names = [f.name for f in kconfig.resolve([], "x86_64", base="target:emu")]
    assert "machine/kexec.config" in names
    assert not any(n.startswith("trim/") for n in names)
    kexec = next(
        f
        for f in kconfig.resolve([], "x86_64", base="target:emu")
        if f.name == "machine/kexec.config"
    )
    assert kexec.settings["CONFIG_KEXEC"] == "y" and kexec.settings["CONFIG_KEXEC_FILE"] == "y"
    assert "machine/kexec.config" not in [f.name for f in kconfig.resolve([], "x86_64")]


def test_the_build_key_follows_the_machine_config_and_modules(tmp_path):
    config, lsmod = machinebase.files("emu")
    config.parent.mkdir(parents=True)
    config.write_text("CONFIG_A=y\n")
    lsmod.write_text("virtio_blk 20480 2 - Live 0x0\n")
    req = build.Request(tmp_path, "HEAD", get_arch("x86_64"), base="target:emu")
    frags = kconfig.resolve([], "x86_64", base=req.base)
    first = build_config.inputs_key(req.arch, req.base, frags)
    lsmod.write_text("virtio_blk 20480 2 - Live 0x0\next4 1 1 - Live 0x0\n")
    assert build_config.inputs_key(req.arch, req.base, frags) != first
    second = build_config.inputs_key(req.arch, req.base, frags)
    # the same machine after a reboot: other addresses (KASLR), use counts, order
    lsmod.write_text(
        "ext4 1 3 - Live 0xffffffffc0744000\nvirtio_blk 20480 1 - Live 0xffffffffc09bb000\n"
    )
    assert build_config.inputs_key(req.arch, req.base, frags) == second
    config.write_text("CONFIG_A=y\nCONFIG_B=y\n")
    assert build_config.inputs_key(req.arch, req.base, frags) != second


def test_a_base_that_is_not_a_machine_is_one_line(tmp_path):
    with pytest.raises(UserError, match=r"unknown target"):
        baseconfig.fetch("nosuch")
    with pytest.raises(UserError, match=r"unknown target"):
        options.check_base("target:nosuch")


def test_a_machine_base_never_fetched_is_one_line_not_a_traceback(tmp_path):
    req = build.Request(tmp_path, "HEAD", get_arch("x86_64"), base="target:emu")
    with pytest.raises(UserError, match=r"not in the cache .*kbisect build --base target:emu"):
        build_config.inputs_key(req.arch, req.base, [])
