"""The vng target: the command line it gives virtme-ng, with a fake vng (tests/fakevng/vng)
in place of QEMU; `kbisect run` through it. The sample itself: tests/measure/test_sample.py."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from kbisect.commands import cli
from kbisect.core.exceptions import EXIT_BENCHMARK, EXIT_BOOT, EXIT_USER, BootError
from kbisect.measure import results, sample
from kbisect.measure.record import Sample
from kbisect.scenario import scenario
from kbisect.targets import registry
from kbisect.targets.base import Kernel, KernelNotFound
from tests.targets import images as fakeimages

FAKEVNG = Path(__file__).resolve().parents[1] / "fakevng"
SHORT = ["timeouts.boot_s=1", "timeouts.idle_s=1", "timeouts.total_s=20"]


def use_fake_vng(
    monkeypatch: pytest.MonkeyPatch, state: Path, mode: str = "ok", images: bool = True, **env: str
) -> Path:
    """Put the fake vng first on PATH, force TCG, stand in the root fs the shipped
    scenarios boot (unless not `images`); return the dir it logs its calls in.

    This Python's own directory comes next, so that the fake's `env python3` starts
    fast (a pyenv shim costs a quarter of a second per boot)."""
    path = [str(FAKEVNG), str(Path(sys.executable).parent), os.environ["PATH"]]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    monkeypatch.setenv("KBISECT_ACCEL", "tcg")
    monkeypatch.setenv("FAKEVNG_MODE", mode)
    state.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("FAKEVNG_STATE", str(state))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if images:
        fakeimages.install_defaults()
    return state


def vng_calls(state: Path) -> list[dict[str, Any]]:
    path = state / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def fake_image(where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "bzImage").write_text("fake-kernel\n6.12.0-fake\n\n0\n")
    return where / "bzImage"


def refused_before_boot(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *extra: str,
    images: bool = True,
) -> str:
    """`kbisect run` on the fake vng with `extra` arguments exits 2 before any boot; its
    last line on stderr."""
    state = use_fake_vng(monkeypatch, tmp_path / "fakevng", images=images)
    out = tmp_path / "run"
    argv = ["run", "--kernel", str(fake_image(tmp_path / "k")), "--scenario", "smoke", *extra]
    assert cli.main([*argv, "--out", str(out)]) == EXIT_USER
    assert vng_calls(state) == [] and not (out / "boots").exists()
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_fake_vng(monkeypatch, tmp_path / "fakevng")


def smoke(*overrides: str) -> scenario.Scenario:
    return scenario.load("smoke").with_overrides(list(overrides))


def stored(out: Path) -> list[Sample]:
    return results.load_samples(out)  # validates each against the schema


# -- a good boot -----------------------------------------------------------------------


def vng_sample(
    image: Path, scen: scenario.Scenario, out: Path, append: str = "", label: str | None = None
) -> Sample:
    return sample.take(registry.get("vng"), sample.Boot(Kernel(image), scen, out, append, label))


def test_a_vng_sample_records_the_target_and_accelerator(tmp_path: Path, state: Path) -> None:
    s = vng_sample(fake_image(tmp_path / "k"), smoke(), tmp_path / "run", label="A")
    results.validate(s.data, "sample")
    target = dict(s.target)
    host = target.pop("vm_host")  # the machine under the guest: this host
    assert target == {
        "kind": "vng",
        "name": "vng",
        "arch": "x86_64",
        "accel": "tcg",
    }
    assert host["cpus"] == os.cpu_count() and host["qemu"].startswith("QEMU emulator")
    assert s.userland["source"] == "image" and s.userland["postgres_major"] == 15
    assert s.image == str((tmp_path / "k" / "bzImage").resolve())


def test_the_vng_command_and_the_boot_dir(tmp_path: Path, state: Path) -> None:
    out = tmp_path / "run"
    on_host = smoke("postgres.source=host")  # the guest sees the host's paths
    s = vng_sample(fake_image(tmp_path / "k"), on_host, out, append="preempt=full quiet")
    [call] = vng_calls(state)
    argv = call["argv"]
    assert "--disable-kvm" in argv and call["append"] == [
        "panic=-1",
        "oops=panic",
        "preempt=full",
        "quiet",
    ]
    guest = shlex.split(argv[argv.index("--exec") + 1])
    boot_dir = Path(guest[guest.index("--out") + 1])
    assert boot_dir.parent == out / "boots" and s.boot_dir == str(boot_dir)
    assert argv[argv.index("--rwdir") + 1] == str(boot_dir)
    sent = json.loads((boot_dir / "scenario.json").read_text())
    assert sent == on_host.data
    log = (boot_dir / "console.log").read_text()
    assert log.startswith("# reproduce: ") and "kbisect-guest: phase init" in log
    assert argv[argv.index("--cpus") + 1] == "2" and argv[argv.index("--memory") + 1] == "1024M"


# -- failures: the fake vng panics; every mode is in test_sample.py --------------------------


def test_a_guest_panic_is_a_boot_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Path
) -> None:
    monkeypatch.setenv("FAKEVNG_MODE", "panic")
    with pytest.raises(BootError, match="Kernel panic"):
        vng_sample(fake_image(tmp_path / "k"), smoke(), tmp_path / "run", label="B")
    [s] = stored(tmp_path / "run")
    assert (s.status, s.tps, s.label) == ("boot-failed", None, "B")


def test_failure_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
    image = str(fake_image(tmp_path / "k"))
    argv = ["run", "--kernel", image, "--scenario", "smoke", "--out", str(tmp_path / "r")]
    monkeypatch.setenv("FAKEVNG_MODE", "panic")
    assert cli.main(argv) == EXIT_BOOT
    monkeypatch.setenv("FAKEVNG_MODE", "pgfail")
    assert cli.main(argv) == EXIT_BENCHMARK
    assert [s.status for s in stored(tmp_path / "r")] == ["boot-failed", "benchmark-failed"]


# -- kbisect run -----------------------------------------------------------------------


def test_run_cli_takes_one_sample_per_boot(
    tmp_path: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    art = tmp_path / "artifact"
    fake_image(art)
    (art / "manifest.json").write_text(json.dumps({"commit": "c" * 40, "config_hash": None}))
    argv = [
        "run",
        "--kernel",
        str(art),
        "--scenario",
        "smoke",
        "--runs",
        "2",
        "--append",
        "preempt=none",
        "--out",
        str(tmp_path / "r"),
        "--retakes",  # the real monitor watches this (shared, maybe busy) host: no retakes,
        "0",  # and a disturbed sample counts
        "--count-disturbed",
    ]
    assert cli.main(argv) == 0
    samples = stored(tmp_path / "r")
    assert [s.commit for s in samples] == ["c" * 40] * 2
    assert len(vng_calls(state)) == 2
    out = capsys.readouterr().out
    assert "boot 1: 990.0 tps" in out and "boot 2: 1000.0 tps" in out


def test_find_kernel(tmp_path: Path) -> None:
    image = fake_image(tmp_path / "art")
    assert Kernel.find(str(image)) == Kernel(image.resolve(), None)
    (tmp_path / "art" / "manifest.json").write_text('{"commit": null}')
    assert Kernel.find(str(tmp_path / "art")) == Kernel(image.resolve(), {"commit": None})
    (tmp_path / "empty").mkdir()
    with pytest.raises(KernelNotFound, match="no bzImage or Image"):
        Kernel.find(str(tmp_path / "empty"))
    with pytest.raises(KernelNotFound, match="no such kernel image"):
        Kernel.find(str(tmp_path / "nope"))


@pytest.mark.parametrize(
    "argv",
    [["--runs", "0"], ["--kernel", "/nonexistent/bzImage"], ["--scenario", "no-such-scenario"]],
)
def test_run_bad_input_exits_2(tmp_path: Path, state: Path, argv: list[str]) -> None:
    base = {"--kernel": str(fake_image(tmp_path / "k")), "--scenario": "smoke"}
    base.update(zip(argv[::2], argv[1::2], strict=True))
    args = ["run", *[x for kv in base.items() for x in kv], "--out", str(tmp_path / "r")]
    assert cli.main(args) == EXIT_USER
    assert vng_calls(state) == []


def test_a_guest_on_its_own_root_keeps_compiled_python_in_the_cache(state: Path) -> None:
    from kbisect.targets.vng import rootfs, target

    out, templates = Path("/kbisect/out"), Path("/kbisect/templates")
    own = target.guest_argv(rootfs.GUEST_HARNESS, out / "s.json", out, templates, Path("/p"))
    assert own[:4] == ["python3", "-X", "pycache_prefix=/p", "/kbisect/harness/guest.py"]
    host = target.guest_argv(Path("/h"), out / "s.json", out, templates)
    assert host[:2] == ["python3", "/h/guest.py"]  # the host's root has its own
    made = rootfs.pycache_dir(Path("/cache/images/x86_64-trixie-pg17-abc/root"))
    assert made.is_dir() and made.name == "x86_64-trixie-pg17-abc"
