"""Per-arch facts from kbisect/core/arch/*.toml, on an x86_64 and on an arm64 host."""

from __future__ import annotations

import ast
import platform
import tomllib
from pathlib import Path

import pytest

from kbisect.core import arch

HOSTS = ["x86_64", "arm64"]


def test_names_are_the_data_files() -> None:
    assert arch.names() == ["arm64", "x86_64"]
    for name in arch.names():
        data = tomllib.loads((arch.ARCH_DIR / f"{name}.toml").read_text())
        assert data["name"] == name


def test_every_data_file_says_every_fact() -> None:
    keys = [set(tomllib.loads(p.read_text())) for p in sorted(arch.ARCH_DIR.glob("*.toml"))]
    assert all(k == keys[0] for k in keys)
    assert [a.name for a in arch.known()] == arch.names()


def test_qemu_facts_per_arch() -> None:
    x86, arm = arch.get("x86_64"), arch.get("arm64")
    assert (x86.machine_type, x86.virtio_blk, x86.qemu_package) == (
        "pc",
        "virtio-blk-pci",
        "qemu-system-x86",
    )
    assert (arm.machine_type, arm.virtio_blk, arm.qemu_package) == (
        "virt",
        "virtio-blk-device",
        "qemu-system-arm",
    )
    assert x86.bootsector_probe and not arm.bootsector_probe
    assert arch.emulated_machine() == x86  # kbisect emu's machine is a PC by design


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("x86_64", "x86_64"),
        ("x86", "x86_64"),
        ("amd64", "x86_64"),
        ("arm64", "arm64"),
        ("aarch64", "arm64"),
    ],
)
def test_get_by_name_or_alias(alias: str, name: str) -> None:
    assert arch.get(alias).name == name


def test_unknown_arch_is_a_user_error() -> None:
    with pytest.raises(arch.UnknownArch, match=r"unknown arch 'mips' \(known: arm64, x86_64\)"):
        arch.get("mips")


def test_x86_64_facts_on_an_x86_64_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arch, "host_arch", lambda: "x86_64")
    a = arch.get("x86_64")
    assert a.is_native() and a.cross_compile == ""
    assert a.make_vars() == ["ARCH=x86"] and a.compiler() == "gcc"
    assert (a.image, a.image_target) == ("arch/x86/boot/bzImage", "bzImage")
    assert (a.qemu, a.vng_arch, a.console) == ("qemu-system-x86_64", "x86_64", "ttyS0")


def test_arm64_is_cross_compiled_on_an_x86_64_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arch, "host_arch", lambda: "x86_64")
    a = arch.get("arm64")
    assert not a.is_native()
    assert a.make_vars() == ["ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"]
    assert a.compiler() == "aarch64-linux-gnu-gcc"
    assert (a.image, a.image_target) == ("arch/arm64/boot/Image", "Image")
    assert (a.qemu, a.console) == ("qemu-system-aarch64", "ttyAMA0")


def test_on_an_arm64_host_arm64_is_native_and_x86_is_foreign(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(arch, "host_arch", lambda: "arm64")
    native, foreign = arch.get("arm64"), arch.get("x86_64")
    assert native.make_vars() == ["ARCH=arm64"] and native.compiler() == "gcc"
    assert foreign.make_vars() == ["ARCH=x86", "CROSS_COMPILE=x86_64-linux-gnu-"]
    assert foreign.compiler() == "x86_64-linux-gnu-gcc"


@pytest.mark.parametrize(
    ("machine", "name"),
    [
        ("x86_64", "x86_64"),
        ("amd64", "x86_64"),
        ("aarch64", "arm64"),
        ("arm64", "arm64"),
        ("riscv64", "riscv64"),
    ],
)
def test_host_arch_maps_platform_names(
    monkeypatch: pytest.MonkeyPatch, machine: str, name: str
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: machine)
    assert arch.host_arch() == name == arch.from_machine(machine)


def test_main_prints_compiler_and_make_vars_for_scripts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert arch.main(["aarch64"]) == 0
    cc, make_vars = capsys.readouterr().out.splitlines()
    assert cc == arch.get("arm64").compiler() and cc.endswith("gcc")
    assert make_vars.split() == arch.get("arm64").make_vars()
    assert make_vars.startswith("ARCH=arm64 CROSS_COMPILE=")


def test_main_unknown_arch_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert arch.main(["mips"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kbisect: unknown arch 'mips'") and err.count("\n") == 1
    assert arch.main([]) == 2


# -- per-arch facts live in the data files only ------------------------------------------

ARCH_NAMES = {"x86_64", "arm64", "aarch64", "amd64"}
KBISECT = Path(arch.__file__).parents[1]
# (file, function) still naming an arch: `kbisect image`'s parser, which the move of the
# parsers into kbisect/commands/ rewrites (its default: the first arch not the host's).
NOT_YET = {("targets/vng/rootfs.py", "configure")}


def arch_literals(path: Path) -> list[str]:
    """`line: 'literal'` for each string constant in the file that is an arch name."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(KBISECT).as_posix()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and (where, node.name) in NOT_YET:
            skip.update(id(inner) for inner in ast.walk(node))
    return [
        f"{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in ARCH_NAMES and id(node) not in skip
    ]


def test_no_arch_name_is_spelled_outside_the_arch_module() -> None:
    """Per-arch facts are keys of core/arch/*.toml, read through Arch: an arch name as a
    string literal anywhere else is a fact that escaped (help texts take core.arch.names())."""
    files = sorted(p for p in KBISECT.rglob("*.py") if p != Path(arch.__file__))
    assert len(files) > 100
    found = {str(p.relative_to(KBISECT)): arch_literals(p) for p in files}
    assert {name: hits for name, hits in found.items() if hits} == {}
