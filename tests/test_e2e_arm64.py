"""arm64 cross build of the embedded 6.12 tree (slow: `just e2e`), and a boot of the
result under qemu-system-aarch64 (TCG) to the point of mounting a root fs: that proves
the cross-built Image is a working arm64 kernel without needing an arm64 root fs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbisect import runner

pytestmark = pytest.mark.e2e


def test_arm64_cross_build_boots(real_cache: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kbisect", "build", "--arch", "arm64", "--rev", "v6.12-debian",
         "--json"],
        capture_output=True, text=True, env=os.environ.copy(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads(proc.stdout)
    assert manifest["arch"] == "arm64"
    assert manifest["compiler"].startswith("aarch64-linux-gnu-gcc")
    # Older builds of this commit with other fragments sit beside it: pick ours by hash.
    [image] = [
        p
        for p in real_cache.glob(f"builds/*/arm64-*/{manifest['commit']}/Image")
        if hashlib.sha256(p.read_bytes()).hexdigest() == manifest["image_sha256"]
    ]
    # The arm64 Image header carries the magic "ARM\x64" at offset 56.
    assert image.read_bytes()[56:60] == b"ARM\x64"
    cmd = ["qemu-system-aarch64", "-machine", "virt", "-cpu", "max", "-m", "512",
           "-nographic", "-no-reboot", "-kernel", str(image),
           "-append", "console=ttyAMA0 panic=-1"]  # fmt: skip
    result = runner.run(cmd, log=tmp_path / "arm64-boot.log", timeout=600, check=False)
    assert "Unable to mount root fs" in result.output, result.output[-2000:]
