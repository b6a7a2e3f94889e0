"""The founding pair on arm64 (slow: `just e2e`): Linux 7.2 as Debian ships it and 7.2
with the revert of 7dadeaa6e851 (kernel-patches/7.2/), each cross-built and booted under
qemu-system-aarch64 (TCG) on the arm64 root fs, asked for `preempt=none`, to the harness's
first sample. The sample's fingerprint says which model the kernel gave: 7.2 keeps
`lazy` (it refuses `none` on an ARCH_HAS_PREEMPT_LAZY arch), the revert gives `none`.
Too slow to measure (TCG on 2 cores); it shows both kernels boot and run PostgreSQL, and
that the model in effect is read from the guest."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.core import paths
from kbisect.measure import results, retake
from tests import arm64

pytestmark = pytest.mark.e2e

REVERT = (
    paths.CHECKOUT
    / "kernel-patches/7.2/0001-Revert-sched-Further-restrict-the-preemption-modes.patch"
)


@pytest.mark.parametrize(
    ("patches", "model"),
    [((), "lazy"), ((str(REVERT),), "none")],
    ids=["7.2", "7.2+revert"],
)
def test_founding_pair_boots_on_arm64(
    real_cache: Path, tmp_path: Path, patches: tuple[str, ...], model: str
) -> None:
    added = arm64.kbisect("tree", "add", "debian:7.2")
    assert added.returncode == 0, added.stderr[-3000:]
    patch_args = [w for p in patches for w in ("--patch", p)]
    manifest, image = arm64.build(real_cache, "--tree", "debian:7.2", *patch_args)
    assert manifest["kernelrelease"].startswith("7.2.")
    out = tmp_path / "run"
    arm64.run_smoke(real_cache, image, out, "--append", "preempt=none")
    # a sample a busy host disturbed is kept aside and retaken: judge the one that counts
    [sample] = [s for s in results.load_samples(out) if retake.counts(s)]
    assert sample.data["status"] == "ok" and sample.data["tps"] > 0
    assert sample.data["fingerprint"]["uname_r"] == manifest["kernelrelease"]
    assert sample.data["fingerprint"]["preempt"] == model
    # the sample records what was asked and what the kernel gave
    assert sample.data["preempt"]["asked"] == "none"
    assert sample.data["preempt"]["effective"] == model
