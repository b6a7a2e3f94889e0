"""The emulated machine, for real (`just e2e`; needs root, QEMU and mmdebstrap; slow under
TCG): image, power on, ssh; an unreachable port and a wrong key refused in one line; a
verified kexec switch into a kernel and the harness over ssh; a panicking kernel
power-cycled and recorded as a boot failure; Ctrl-C mid-run leaving the machine on its
known-good kernel. One VM, one test: the steps share it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbisect.core import paths
from kbisect.core.exceptions import BootError, UserError
from kbisect.measure import sample
from kbisect.scenario import scenario
from kbisect.targets import registry
from kbisect.targets.base import Kernel
from kbisect.targets.emu import image, vm
from kbisect.targets.ssh import check as sshcheck
from kbisect.targets.ssh.config import state_dir
from kbisect.targets.ssh.target import SshTarget

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("mmdebstrap") is None, reason="needs root and mmdebstrap"
    ),
]
NAME = "e2e"


def machine() -> SshTarget:
    t = registry.get(NAME)
    assert isinstance(t, SshTarget)
    return t


def wait_for_ssh(deadline_s: float = 900) -> None:
    end = time.monotonic() + deadline_s
    while True:
        try:
            machine().preflight()
            return
        except UserError:
            if time.monotonic() > end:
                raise
            time.sleep(10)


def on_known_good(t: SshTarget) -> bool:
    known = t._stored_known()
    return known is not None and known.matches(t._facts([])) is None


def write_target(name: str, **change: object) -> None:
    text = vm.target_file(NAME).read_text()
    for key, value in change.items():
        lines = [ln for ln in text.splitlines() if not ln.startswith(f"{key} =")]
        text = "\n".join([*lines, f"{key} = {value!r}".replace("'", '"')]) + "\n"
    (registry.config_dir() / f"{name}.toml").write_text(text)


def test_emulated_machine(real_cache, tmp_path):
    image.build()
    vm.down(NAME)
    try:
        vm.up(NAME, 2048, 2, fresh=True)
        wait_for_ssh()
        check_bad_input(tmp_path)
        kernel = Kernel.find(paths.cache_dir() / "emu" / "image" / "vmlinuz")
        check_switch(kernel, tmp_path / "ok")
        check_panic(kernel, tmp_path / "panic")
        check_interrupt(kernel, tmp_path / "interrupt")
    finally:
        vm.down(NAME)


def check_bad_input(tmp_path: Path) -> None:
    write_target("closed", port=vm.free_port())
    with pytest.raises(UserError, match=r"cannot ssh to .*unreachable"):
        registry.get("closed").preflight()
    other = tmp_path / "other_key"
    subprocess.run(image.keygen_command(other), check=True)
    write_target("stranger", key=str(other))
    with pytest.raises(UserError, match="the key was refused"):
        registry.get("stranger").preflight()
    for name in ("closed", "stranger"):  # their lock files
        shutil.rmtree(state_dir(name), ignore_errors=True)


def check_switch(kernel: Kernel, out: Path) -> None:
    scen = scenario.load("smoke")
    t = machine()
    with t:
        taken = sample.take(t, sample.Boot(kernel, scen, out, "kbisect.e2e=1", "A"))
        assert t.switched
    assert taken.ok and (taken.tps or 0) > 0
    fp = taken.fingerprint
    assert fp["uname_r"] == image.manifest()["release"]  # type: ignore[index]
    assert "kbisect.boot=" in fp["cmdline"] and "kbisect.e2e=1" in fp["cmdline"]
    assert fp["cpu_threads"] == 2 and fp["dmi_product"]
    assert taken.target["known_good"]["build_id"]
    assert on_known_good(machine())  # close() rebooted it, verified


def check_panic(kernel: Kernel, out: Path) -> None:
    scen = scenario.load("smoke")
    t = machine()
    with t, pytest.raises(BootError, match="panic"):
        sample.take(t, sample.Boot(kernel, scen, out, "rdinit=/nonexistent", "A"))
    failed = [p for p in (out / "samples").glob("*.json")]
    assert len(failed) == 1 and '"boot-failed"' in failed[0].read_text()
    assert on_known_good(machine())


def check_interrupt(kernel: Kernel, out: Path) -> None:
    cmd = [sys.executable, "-m", "tests.machinerun", NAME, str(kernel.image), str(out)]
    env = {**os.environ, "PYTHONPATH": str(paths.CHECKOUT)}
    child = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, cwd=paths.CHECKOUT)
    assert child.stderr is not None
    for line in child.stderr:
        if "kexec into" in line:
            break
    time.sleep(30)  # mid-switch: the machine is on its way into the kernel
    child.send_signal(signal.SIGINT)
    rest = child.stderr.read()
    assert child.wait(timeout=1800) == 130, rest
    assert "back on" in rest and "(verified)" in rest
    t = machine()
    assert on_known_good(t)
    assert sshcheck.known_good(t._facts([])) == t._stored_known()
