"""Choosing a target: `--target NAME`, TOML files, the arch resolved once."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from kbisect.commands import build as build_command
from kbisect.commands import cli
from kbisect.core import arch
from kbisect.core.exceptions import EXIT_INFRA, EXIT_USER, UserError
from kbisect.measure import results
from kbisect.targets import registry
from kbisect.targets.fake.target import FakeTarget
from kbisect.targets.vng.target import VngTarget
from tests.fakes import fake_image, fake_target, make_fake_kernel_repo


def test_vng_is_the_default_and_runs_this_hosts_arch() -> None:
    t = registry.get()
    assert isinstance(t, VngTarget) and t.name == "vng"
    assert t.arch.name == arch.host_arch()


def test_on_an_arm64_host_everything_defaults_to_arm64(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert arch.host_arch() == "arm64"
    assert registry.get().arch.name == "arm64" and registry.get().arch.is_native()
    assert registry.get("vng", "x86_64").arch.cross_compile == "x86_64-linux-gnu-"
    parser = cli.build_parser()
    make_fake_kernel_repo(tmp_path / "linux")  # not the embedded tree: a 1-minute import
    args = parser.parse_args(["build", "--tree", str(tmp_path / "linux")])
    assert build_command.request(args).arch.name == "arm64"
    assert parser.parse_args(["doctor"]).arch == "arm64"


def test_a_toml_file_names_a_target_by_path_or_by_name(tmp_path: Path) -> None:
    path = fake_target(tmp_path, name="bench", cv=0.0, arch="arm64")
    by_path = registry.get(str(path))
    assert isinstance(by_path, FakeTarget) and by_path.name == "bench"
    assert by_path.arch.name == "arm64"  # the target's own arch
    configured = registry.config_dir()
    configured.mkdir(parents=True)
    (configured / "bench.toml").write_text(path.read_text())
    assert registry.get("bench").describe()["kind"] == "fake"
    assert "bench" in registry.names()


@pytest.mark.parametrize(
    ("name", "arch_name", "content", "message"),
    [
        ("nope", None, None, "unknown target 'nope'"),
        ("/no/such.toml", None, None, "no such file"),
        ("m", None, 'kind = "teleport"\n', "kind must be one of"),
        ("m", None, "kind = ", "m.toml: invalid TOML"),
        ("m", None, b'kind = "fake"\n# \xff\n', "m.toml: not UTF-8 text"),
        ("m", None, 'kind = "fake"\ncv = nan\n', "target m: cv must be finite, got nan"),
        ("m", None, 'kind = "fake"\ndelay_s = -1\n', "delay_s must be at least 0, got -1"),
        ("m", None, 'kind = "fake"\ntps = inf\n', "tps must be finite, got inf"),
        ("m", None, 'kind = ["fake"]\n', "kind must be one of"),
        ("m", None, 'kind = "fake"\nappend_tps = {a = "x"}\n', "append_tps maps"),
        ("m", None, 'kind = "fake"\nwobble = 1\n', "unknown fake setting 'wobble'"),
        ("m", None, 'kind = "fake"\ncv = "high"\n', "cv must be a float"),
        ("m", None, 'kind = "fake"\nmode = "explode"\n', "unknown mode 'explode'"),
        ("m", None, 'kind = "fake"\npreempt = "rt"\n', "preempt must be one of none, "),
        ("m", "x86_64", 'kind = "fake"\narch = "arm64"\n', "--arch x86_64: target m runs arm64"),
        ("vng", "sparc", None, "unknown arch 'sparc'"),
    ],
)
def test_bad_targets_are_one_line_user_errors(
    tmp_path: Path, name: str, arch_name: str | None, content: str | bytes | None, message: str
) -> None:
    if content is not None:
        registry.config_dir().mkdir(parents=True, exist_ok=True)
        path = registry.config_dir() / f"{name}.toml"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(UserError, match=message):
        registry.get(name, arch_name)


def test_a_directory_where_a_target_file_belongs_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "m.toml"
    folder.mkdir()
    with pytest.raises(UserError, match=f"^{folder}: is a directory, not a file$"):
        registry.get(str(folder))


def test_an_unknown_target_exits_2_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = tmp_path / "bzImage"
    image.write_text("fake-kernel\n")
    argv = ["run", "--kernel", str(image), "--scenario", "smoke", "--target", "nope"]
    assert cli.main([*argv, "--out", str(tmp_path / "r")]) == EXIT_USER
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown target 'nope'" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("where", ["/proc/x", "afile"])
def test_run_out_that_cannot_hold_a_run_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    (tmp_path / "afile").write_text("x")
    out = where if where.startswith("/") else str(tmp_path / where)
    image = tmp_path / "bzImage"
    image.write_text("fake-kernel\n6.12.0-fake\n\n0\n")
    target = fake_target(tmp_path)
    argv = ["run", "--kernel", str(image), "--scenario", "smoke", "--target", str(target)]
    assert cli.main([*argv, "--out", out]) == EXIT_INFRA  # an unusable results dir: 3
    err = capsys.readouterr().err
    problem = "not writable" if where.startswith("/") else "not a directory"
    assert err.count("\n") == 1 and f"--out {out}: {problem}" in err


def test_a_drifting_fake_host_moves_by_drift_per_call(tmp_path: Path) -> None:
    image = fake_image(tmp_path / "k", tps=1000.0)
    target = fake_target(tmp_path, cv=0.0, drift_per_call=0.1)
    argv = ["run", "--kernel", str(image), "--scenario", "smoke", "--runs", "4"]
    assert cli.main([*argv, "--target", str(target), "--out", str(tmp_path / "r")]) == 0
    got = [s.tps for s in results.load_samples(tmp_path / "r")]
    assert got == pytest.approx([1000.0, 1100.0, 1200.0, 1300.0])
    with pytest.raises(UserError, match="drift_per_call must be a float"):
        registry.get(str(fake_target(tmp_path, name="bad", drift_per_call="fast")), None)
