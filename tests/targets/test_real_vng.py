"""Real kernel tests: the embedded 6.12 tree, the minimal x86_64 config, a real build,
real virtme-ng boots under TCG (or KVM where usable) and real PostgreSQL/pgbench inside.

They use the real kbisect cache (tree, O= dirs, ccache, builds), so only the first run
on a machine pays for the cold build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbisect.measure import results

pytestmark = pytest.mark.real


def kbisect(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "kbisect", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    sys.stderr.write(proc.stderr[-4000:])
    if check and proc.returncode != 0:
        raise AssertionError(
            f"kbisect {' '.join(args)} exited {proc.returncode}:\n"
            f"{proc.stdout}\n{proc.stderr[-3000:]}"
        )
    return proc


def run_on(kernel: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`kbisect run` of one boot of `kernel`, results in `out`; returns whatever it exits."""
    return kbisect("run", "--kernel", str(kernel), *args, "--out", str(out), check=False)


@pytest.fixture(scope="module")
def kernel() -> Path:
    """The minimal x86_64 kernel of the embedded tree, built once (cached)."""
    from tests.conftest import REAL_CACHE

    env = {"KBISECT_CACHE": str(REAL_CACHE)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        out = kbisect("build", "--rev", "v6.12-debian").stdout
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    # The image kbisect printed, not a glob: the cache holds builds of the same commit
    # from other fragment sets (an earlier config once made these tests boot a stale image).
    image = Path(out.strip().splitlines()[-1])
    assert image.name == "bzImage" and image.is_file(), out
    manifest = json.loads((image.parent / "manifest.json").read_text())
    assert manifest["arch"] == "x86_64"
    assert manifest["kernelrelease"].startswith("6.12")
    return image.parent


def test_manifest_records_inputs(kernel: Path) -> None:
    manifest = json.loads((kernel / "manifest.json").read_text())
    assert manifest["base"] == "tinyconfig"
    names = [f["name"] for f in manifest["fragments"]]
    assert any(n.startswith("base/") for n in names) and "arch/x86_64.config" in names
    assert len(manifest["config_hash"]) == 64
    assert "CONFIG_9P_FS=y" in (kernel / "config").read_text()


def test_compare_two_command_lines_on_one_kernel(
    kernel: Path, real_cache: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cmp"
    proc = kbisect(
        "compare",
        "--kernel",
        str(kernel),
        "--scenario",
        "smoke",
        "--boots",
        "2",
        "--append-a",
        "preempt=none",
        "--append-b",
        "preempt=full",
        # and each side its server: smoke's pin (15, bookworm's root) and 17 (trixie's)
        "--set-b",
        "postgres.major=17",
        "--out",
        str(out),
        # This test is about two command lines, not the host: on a busy one a slot whose
        # retakes run out would be left out and the run would end short; its last try counts.
        "--count-disturbed",
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    results.validate(summary, "summary")
    assert summary["verdict"]["kind"] in ("regression", "improvement", "no significant difference")
    assert (out / "report.md").exists()
    samples = results.load_samples(out)
    for s in samples:
        results.validate(s.data, "sample")
    # A boot that dies under TCG (seen: an early "Oops: int3") is stored as boot-failed
    # and retried, and on a busy host a disturbed sample is kept on disk but set aside
    # and retaken; so the run may hold extra samples; the ok ones are 2 per side.
    aside = [s for s in samples if s.status == "disturbed"]
    assert all(s.disturbed and (s.tps or 0) > 0 for s in aside)
    failed = [s for s in samples if s.status not in ("ok", "disturbed")]
    assert all(s.status == "boot-failed" and s.tps is None for s in failed)
    assert summary["failed"] == {side: sum(s.label == side for s in failed) for side in "AB"}
    ok = [s for s in samples if s.ok]
    assert sorted(s.label or "" for s in ok) == ["A", "A", "B", "B"]
    for s in ok:
        fp, userland = s.fingerprint, s.userland
        assert (s.tps or 0) > 0
        want = "none" if s.label == "A" else "full"
        assert fp["preempt"] == want, fp
        assert f"preempt={want}" in fp["cmdline"]
        major, suite = (15, "bookworm") if s.label == "A" else (17, "trixie")
        assert fp["pg_version"].startswith(f"{major}.")
        assert fp["pg_server"].startswith(f"PostgreSQL {major}.")
        assert len(fp["pg_binary_sha256"]) == 64
        assert userland["source"] == "image" and userland["suite"] == suite
        manifest = json.loads(
            (real_cache / "images" / userland["image"] / "image.json").read_text()
        )
        assert userland["content_hash"] == manifest["content_hash"]
        debian = manifest["postgres_debian_version"]
        assert fp["pg_version"].endswith(f"(Debian {debian})")
        assert s.commit is not None


# vng appends its own init= and root flags after ours, so the panic comes from
# keeping 9p (the root fs) from registering: "VFS: Unable to mount root fs".
def test_panic_is_a_boot_failure(kernel: Path, real_cache: Path, tmp_path: Path) -> None:
    proc = run_on(
        kernel, tmp_path / "p", "--scenario", "smoke", "--append", "initcall_blacklist=init_v9fs"
    )
    assert proc.returncode == 5, proc.stderr[-2000:]
    assert "panic" in proc.stderr.lower()
    [sample] = results.load_samples(tmp_path / "p")
    assert sample.status == "boot-failed" and sample.tps is None


def test_pgbench_failure_is_a_benchmark_failure(
    kernel: Path, real_cache: Path, tmp_path: Path
) -> None:
    smoke = (Path(__file__).parents[2] / "harness/scenarios/smoke.toml").read_text()
    (tmp_path / "bad.sql").write_text("SELECT * FROM kbisect_no_such_table;\n")
    broken = smoke.replace('builtin = "simple-update"', 'script = "bad.sql"')
    assert broken != smoke
    (tmp_path / "broken.toml").write_text(broken.replace('name = "smoke"', 'name = "broken"'))
    # on the host's own root and PostgreSQL (the other boots run images): it starts, and
    # pgbench fails on the script
    host = ["--set", "postgres.source=host"]
    proc = run_on(kernel, tmp_path / "b", "--scenario", str(tmp_path / "broken.toml"), *host)
    assert proc.returncode == 6, proc.stderr[-2000:]
    [sample] = results.load_samples(tmp_path / "b")
    assert sample.status == "benchmark-failed" and sample.tps is None
    assert sample.runs == []
    assert sample.userland == {"source": "host", "postgres_major": 15}
    assert "kbisect_no_such_table" in (sample.error or "")
    assert sample.fingerprint["pg_server"].startswith("PostgreSQL 15.")


def test_hang_is_a_timeout(kernel: Path, real_cache: Path, tmp_path: Path) -> None:
    # Two 19 s runs fit the 40 s limit (kbisect refuses a limit below the runs' own
    # length), but with the boot and PostgreSQL's setup the guest cannot: it is killed.
    longer = ["--set", "pgbench.duration_s=19", "--set", "timeouts.total_s=40"]
    proc = run_on(kernel, tmp_path / "h", "--scenario", "smoke", *longer)
    assert proc.returncode == 5, proc.stderr[-2000:]
    assert "longer than" in proc.stderr
    [sample] = results.load_samples(tmp_path / "h")
    assert sample.status == "boot-failed" and sample.tps is None
