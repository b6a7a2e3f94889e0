"""What the arm64 end-to-end tests share (`just e2e`): kbisect as a subprocess, an arm64
cross build picked out of the cache by its image hash, the arm64 root fs made once, and a
smoke run in an arm64 guest under TCG."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def kbisect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbisect", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )


def build(real_cache: Path, *args: str) -> tuple[dict[str, Any], Path]:
    """`kbisect build --arch arm64 ARGS --json`: its manifest and its Image."""
    proc = kbisect("build", "--arch", "arm64", *args, "--json")
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
    return manifest, image


def run_smoke(real_cache: Path, image: Path, out: Path, *args: str) -> None:
    """`kbisect run --arch arm64 --scenario smoke ARGS` on the arm64 root fs of the pinned
    PostgreSQL (the run makes it first if it is not there: these tests run as root)."""
    run = kbisect(
        "run",
        "--arch",
        "arm64",
        "--kernel",
        str(image.parent),
        "--scenario",
        "smoke",
        *args,
        "--out",
        str(out),
    )
    assert run.returncode == 0, run.stderr[-3000:]
