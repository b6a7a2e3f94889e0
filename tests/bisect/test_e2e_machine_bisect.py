"""Bisections on the emulated machine, for real (`just e2e`; needs root, QEMU and
mmdebstrap; about 1.5-2 h under TCG here, the first machine build included): kernels
built from the machine's own config (`--base target:NAME`) for a short stretch of the
demo history around its synthetic regression, which `kbisect bisect --target NAME` must
name, and then ktest.pl, driven by `kbisect ktest-config`, with kbisect as its TEST.

KBISECT_E2E_MACHINE=NAME uses a machine that is already up (`kbisect emu up` wrote its
~/.config/kbisect/targets/NAME.toml) instead of powering on one of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbisect.core import paths
from kbisect.core.exceptions import UserError
from kbisect.source import git, tree
from kbisect.targets import registry
from kbisect.targets.emu import image, vm
from kbisect.targets.ssh.target import SshTarget

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("mmdebstrap") is None, reason="needs root and mmdebstrap"
    ),
]
NAME = "e2e-bisect"
# read before the per-test isolation (tests/conftest.py) moves HOME
REAL_TARGETS = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "kbisect"


def kbisect(*args: str, timeout: float = 3 * 3600) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "kbisect", *args]
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        cwd=paths.CHECKOUT,
        timeout=timeout,
    )


def on_known_good(name: str) -> bool:
    """A look, not a preflight (which would bring the machine back itself)."""
    t = registry.get(name)
    assert isinstance(t, SshTarget)
    known = t._stored_known()
    return known is not None and known.matches(t._facts([])) is None


def back_on_known_good(name: str, within_s: float) -> bool:
    """Looks until the machine answers on its known-good kernel: ktest.pl's last act is a
    reboot it does not wait for (REBOOT_ON_SUCCESS), unlike kbisect's, which is verified
    before the command returns."""
    end = time.monotonic() + within_s
    while True:
        try:
            if on_known_good(name):
                return True
        except UserError:  # down, rebooting
            pass
        if time.monotonic() > end:
            return False
        time.sleep(10)


@pytest.fixture
def machine(real_cache: Path) -> Iterator[str]:
    given = os.environ.get("KBISECT_E2E_MACHINE")
    if given:
        registry.config_dir().mkdir(parents=True, exist_ok=True)
        shutil.copy(REAL_TARGETS / "targets" / f"{given}.toml", registry.config_dir())
        yield given
        return
    image.build()
    vm.down(NAME)
    try:
        vm.up(NAME, 2048, 2, fresh=True)
        end = time.monotonic() + 900
        while True:
            try:
                registry.get(NAME).preflight()
                break
            except UserError:
                if time.monotonic() > end:
                    raise
                time.sleep(10)
        yield NAME
    finally:
        vm.down(NAME)


def stretch() -> tuple[str, list[str]]:
    """The demo regression and the commits around it: regression~2 .. regression+2."""
    made = kbisect("demo", "--json")
    assert made.returncode == 0, made.stderr[-3000:]
    demo = json.loads(made.stdout)
    top = tree.default_tree()
    after = git.git(
        top, "rev-list", "--reverse", "--ancestry-path", f"{demo['regression']}..{demo['head']}"
    ).split()
    before = [git.rev_parse(top, f"{demo['regression']}~{n}") for n in (2, 1)]
    return demo["regression"], [*before, demo["regression"], *after[:2]]


def summary_of(results: Path) -> dict[str, Any]:
    [found] = list(results.glob("*/summary.json"))
    data: dict[str, Any] = json.loads(found.read_text())
    return data


def machine_config(real_cache: Path, name: str, commit: str) -> Path:
    """The merged config of kbisect's build of `commit` for the machine."""
    for manifest in real_cache.glob(f"builds/*/x86_64-*/{commit}/manifest.json"):
        if json.loads(manifest.read_text())["base"] == f"target:{name}":
            return manifest.parent / "config"
    raise AssertionError(f"no build of {commit} for target:{name}")


def test_bisect_and_ktest_find_the_regression_on_the_machine(
    machine: str, real_cache: Path, tmp_path: Path
) -> None:
    regression, commits = stretch()
    good, bad = commits[0], commits[-1]
    found = kbisect(
        "bisect",
        "--target",
        machine,
        "--base-config",
        f"target:{machine}",
        "--good",
        good,
        "--bad",
        bad,
        "--scenario",
        "smoke",
    )
    assert found.returncode == 0, found.stderr[-5000:]
    assert f"first bad commit: {regression}" in found.stdout, found.stdout
    results = Path(os.environ["KBISECT_RESULTS"])
    summary = summary_of(results)
    assert summary["first_bad"]["commit"] == regression and summary["confirmed"]
    assert all(s["error"] is None and s["tps"] > 0 for s in summary["samples"])
    # the re-check's samples: taken on the machine, each in a verified switch
    taken = [json.loads(p.read_text()) for p in results.glob("*/recheck/*/*/samples/*.json")]
    assert taken and all(s["target"]["kind"] == "ssh" for s in taken)
    assert all("kbisect.boot=" in s["fingerprint"]["cmdline"] for s in taken)
    assert on_known_good(machine)

    # ktest.pl bisects regression~1 .. regression+1 with kbisect as its TEST
    conf = tmp_path / "ktest.conf"
    written = kbisect(
        "ktest-config",
        "--target",
        machine,
        "--scenario",
        "smoke",
        "--threshold",
        f"{summary['threshold']:.1f}",
        "--min-config",
        str(machine_config(real_cache, machine, good)),
        "--good",
        commits[1],
        "--bad",
        commits[3],
        "--out",
        str(conf),
    )
    assert written.returncode == 0, written.stderr[-3000:]
    keys = dict(ln.split(" = ", 1) for ln in conf.read_text().splitlines() if " = " in ln)
    ktest = tree.default_tree() / "tools" / "testing" / "ktest" / "ktest.pl"
    # ktest reads standard input: give it one that never becomes readable (kept open)
    with (tmp_path / "ktest.out").open("w") as out:
        run = subprocess.Popen(
            ["perl", str(ktest), str(conf)],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            code = run.wait(timeout=3 * 3600)
        finally:
            run.kill()
    log = Path(keys["LOG_FILE"]).read_text(errors="replace")
    assert code == 0, log[-5000:]
    assert f"{regression} is the first bad commit" in log, log[-5000:]
    assert back_on_known_good(machine, registry.get(machine).m.boot_timeout_s)  # type: ignore[attr-defined]
