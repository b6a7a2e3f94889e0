"""arm64 on an x86_64 host (slow: `just e2e`): the cross build of the embedded 6.12 tree,
a bare qemu-system-aarch64 boot of it to the root-fs mount (a working arm64 kernel, no
root fs needed), then a whole `kbisect run` of the smoke scenario in an arm64 guest on
the root fs `kbisect image` makes (which needs a Debian mirror), all under TCG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kbisect.core import proc
from kbisect.measure import results
from tests import arm64

pytestmark = pytest.mark.e2e


def arm64_build(real_cache: Path) -> tuple[dict[str, Any], Path]:
    return arm64.build(real_cache, "--rev", "v6.12-debian")


def test_arm64_cross_build_boots(real_cache: Path, tmp_path: Path) -> None:
    _, image = arm64_build(real_cache)
    # The arm64 Image header carries the magic "ARM\x64" at offset 56.
    assert image.read_bytes()[56:60] == b"ARM\x64"
    cmd = [
        "qemu-system-aarch64",
        "-machine",
        "virt",
        "-cpu",
        "max",
        "-m",
        "512",
        "-nographic",
        "-no-reboot",
        "-kernel",
        str(image),
        "-append",
        "console=ttyAMA0 panic=-1",
    ]
    result = proc.run(cmd, log=tmp_path / "arm64-boot.log", timeout=600, check=False)
    assert "Unable to mount root fs" in result.output, result.output[-2000:]


def test_arm64_guest_runs_the_smoke_scenario(real_cache: Path, tmp_path: Path) -> None:
    manifest, image = arm64_build(real_cache)
    out = tmp_path / "run"
    arm64.run_smoke(real_cache, image, out, "--set", "postgres.major=17")
    [sample] = results.load_samples(out)
    assert sample.data["status"] == "ok" and sample.data["tps"] > 0
    assert sample.data["kernel"]["commit"] == manifest["commit"]
    # the scenario's pin on arm64 too: trixie's arm64 root
    assert sample.data["fingerprint"]["pg_version"].startswith("17.")
    assert sample.data["fingerprint"]["pg_server"].startswith("PostgreSQL 17.")
    assert "aarch64" in sample.data["fingerprint"]["pg_server"]
    assert sample.data["userland"]["suite"] == "trixie"
    assert sample.data["fingerprint"]["uname_r"] == manifest["kernelrelease"]
    # the guest ran arm64 binaries: its PostgreSQL template is named for aarch64
    assert list((real_cache / "pg-templates").glob("*aarch64*"))
