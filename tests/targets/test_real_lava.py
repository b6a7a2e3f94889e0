"""A real LAVA job: Debian 12's lava-run (lava-dispatcher 2023.01) boots the minimal 6.12
kernel kbisect builds (cached) in QEMU on this host, against kbisect's own QEMU device
dictionary, and runs the harness and pgbench of the smoke scenario. About 60 s under TCG
on a 2-core host (the root fs image made first: +20 s). Skipped without lava-run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kbisect.targets.lava import job
from tests.conftest import REAL_CACHE
from tests.targets.test_real_vng import kernel, run_on

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(shutil.which("lava-run") is None, reason="lava-run not installed"),
]
__all__ = ["kernel"]  # the cached build, a fixture


def test_a_smoke_boot_is_one_real_lava_job(
    kernel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(REAL_CACHE))  # the guest root, the kernel
    lab = tmp_path / "lab.toml"
    lab.write_text('kind = "lava"\narch = "x86_64"\ndispatcher = "local"\ndevice_type = "qemu"\n')
    out = tmp_path / "out"
    args = ("--scenario", "smoke", "--target", str(lab), "--runs", "1")
    done = run_on(kernel, out, *args, "--retakes", "0", "--count-disturbed")
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = (out / "samples").glob("*.json")
    sample = json.loads(path.read_text())
    assert sample["status"] == "ok" and sample["tps"] > 0
    lava = sample["target"]["lava"]
    assert sample["target"]["machine"] == "qemu-local" and lava["job_s"] > 10
    (boot,) = (out / "boots").iterdir()
    logged = job.read((boot / "console.log").read_text().splitlines())
    assert logged.result == "pass" and logged.reached
    assert logged.measurement == pytest.approx(sample["tps"], rel=1e-6)  # LAVA's figure
    assert sample["fingerprint"]["uname_r"].startswith("6.12")
