"""The fake kernel tree behaves as tests/fakelinux/README says (real make, real git)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from kbisect.core import proc
from tests.fakes import FAKELINUX, git, make_fake_kernel_repo, read_fake_image

MERGE = Path("scripts/kconfig/merge_config.sh")


def make(tree: Path, *args: str) -> proc.Result:
    return proc.run(["make", "-C", str(tree), *args], check=False, capture=True)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    path = tmp_path / "linux"
    shutil.copytree(FAKELINUX, path)
    return path


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "out"


def configured(tree: Path, out: Path, *extra: str) -> Path:
    """tinyconfig + olddefconfig in `out`; returns the .config path."""
    assert make(tree, f"O={out}", "tinyconfig").returncode == 0
    if extra:
        (out / ".config").write_text((out / ".config").read_text() + "".join(extra))
    assert make(tree, f"O={out}", "olddefconfig").returncode == 0
    return out / ".config"


def test_looks_like_a_kernel_tree() -> None:
    assert (FAKELINUX / "Makefile").is_file()
    assert (FAKELINUX / "Kconfig").is_file()
    assert os.access(FAKELINUX / MERGE, os.X_OK)
    assert (FAKELINUX / "VERSION").read_text().strip() == "6.12.0-fake"


@pytest.mark.parametrize("target", ["tinyconfig", "allnoconfig"])
def test_tinyconfig_writes_64bit_into_O(tree: Path, out: Path, target: str) -> None:
    assert make(tree, f"O={out}", target).returncode == 0
    lines = (out / ".config").read_text().splitlines()
    assert "CONFIG_64BIT=y" in lines
    assert not (tree / ".config").exists()


def test_defconfig_has_more_symbols_than_tinyconfig(tree: Path, tmp_path: Path) -> None:
    make(tree, f"O={tmp_path / 'tiny'}", "tinyconfig")
    make(tree, f"O={tmp_path / 'def'}", "defconfig")
    tiny = set((tmp_path / "tiny/.config").read_text().splitlines())
    full = set((tmp_path / "def/.config").read_text().splitlines())
    assert tiny < full
    assert "CONFIG_SMP=y" in full


def test_olddefconfig_drops_unknown_symbols_and_keeps_not_set(tree: Path, out: Path) -> None:
    config = configured(
        tree,
        out,
        "CONFIG_NOT_A_SYMBOL=y\n",
        "# CONFIG_PREEMPT_NONE is not set\n",
        "CONFIG_PREEMPT=y\n",
    )
    lines = config.read_text().splitlines()
    assert "CONFIG_NOT_A_SYMBOL=y" not in lines
    assert "# CONFIG_PREEMPT_NONE is not set" in lines
    assert "CONFIG_PREEMPT_NONE=y" not in lines  # the later assignment won
    assert "CONFIG_PREEMPT=y" in lines


def test_olddefconfig_follows_kconfig_known(tree: Path, out: Path) -> None:
    known = tree / "Kconfig.known"
    known.write_text(known.read_text().replace("CONFIG_PREEMPT\n", ""))
    config = configured(tree, out, "CONFIG_PREEMPT=y\n")
    assert "CONFIG_PREEMPT=y" not in config.read_text()


def test_olddefconfig_without_config_fails(tree: Path, out: Path) -> None:
    result = make(tree, f"O={out}", "olddefconfig")
    assert result.returncode == 2
    assert "not found" in result.output


def test_kernelrelease_prints_version(tree: Path) -> None:
    (tree / "VERSION").write_text("6.13.0-rc1-fake\n")
    result = make(tree, "-s", "kernelrelease")
    assert (result.returncode, result.output) == (0, "6.13.0-rc1-fake\n")


@pytest.mark.parametrize(
    ("arch", "target", "image"),
    [
        ("x86_64", "bzImage", "arch/x86/boot/bzImage"),
        ("x86", "all", "arch/x86/boot/bzImage"),
        ("arm64", "Image", "arch/arm64/boot/Image"),
        ("arm64", "all", "arch/arm64/boot/Image"),
    ],
)
def test_build_writes_image_and_system_map(
    tree: Path, out: Path, arch: str, target: str, image: str
) -> None:
    config = configured(tree, out)
    (tree / "TPS").write_text("1234.5\n")
    args = [f"O={out}", f"ARCH={arch}", "CROSS_COMPILE=aarch64-linux-gnu-", "-j", "2"]
    result = make(tree, *args, "CC=gcc", "KBUILD_BUILD_TIMESTAMP=@0", target)
    assert result.returncode == 0, result.output
    assert "  CC      kernel/sched/core.o" in result.output
    assert (out / "System.map").is_file()
    fake = read_fake_image(out / image)
    assert fake.release == "6.12.0-fake"
    assert fake.tps == 1234.5
    assert fake.config_sha256 == hashlib.sha256(config.read_bytes()).hexdigest()


def test_image_without_tps_has_an_empty_tps_line(tree: Path, out: Path) -> None:
    configured(tree, out)
    assert make(tree, f"O={out}", "ARCH=x86_64").returncode == 0  # default target: all
    lines = (out / "arch/x86/boot/bzImage").read_text().splitlines()
    assert lines[:3] == ["fake-kernel", "6.12.0-fake", ""]
    assert read_fake_image(out / "arch/x86/boot/bzImage").tps is None


def test_image_changes_with_the_config(tree: Path, out: Path) -> None:
    configured(tree, out)
    make(tree, f"O={out}", "ARCH=x86_64", "bzImage")
    before = read_fake_image(out / "arch/x86/boot/bzImage").config_sha256
    configured(tree, out, "CONFIG_PREEMPT=y\n")
    make(tree, f"O={out}", "ARCH=x86_64", "bzImage")
    assert read_fake_image(out / "arch/x86/boot/bzImage").config_sha256 != before


def test_silent_build_prints_no_cc_lines(tree: Path, out: Path) -> None:
    configured(tree, out)
    result = make(tree, "-s", f"O={out}", "ARCH=arm64", "Image")
    assert result.returncode == 0
    assert "CC" not in result.output


def test_broken_tree_fails_like_a_compiler(tree: Path, out: Path) -> None:
    configured(tree, out)
    (tree / "BROKEN").write_text("")
    result = make(tree, f"O={out}", "ARCH=x86_64", "bzImage")
    assert result.returncode == 2
    assert "kernel/fake.c:1: error: BROKEN" in result.output
    assert not (out / "arch/x86/boot/bzImage").exists()


@pytest.mark.parametrize(
    "args", [["no-such-target"], ["ARCH=arm64", "bzImage"], ["ARCH=x86_64", "Image"], ["ARCH=mips"]]
)
def test_unknown_targets_and_arches_exit_2(tree: Path, out: Path, args: list[str]) -> None:
    configured(tree, out)
    assert make(tree, f"O={out}", *args).returncode == 2


def test_build_without_O_stays_out_of_git_status(tmp_path: Path) -> None:
    repo = tmp_path / "linux"
    make_fake_kernel_repo(repo)
    assert make(repo, "tinyconfig").returncode == 0
    assert make(repo, "ARCH=x86_64", "bzImage").returncode == 0
    assert (repo / "arch/x86/boot/bzImage").is_file()
    assert git(repo, "status", "--porcelain") == ""


def run_merge(tree: Path, *args: str | Path) -> proc.Result:
    return proc.run([tree / MERGE, *args], check=False, capture=True)


def test_merge_config_later_fragments_win(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / ".config").write_text("CONFIG_A=y\nCONFIG_B=y\n# CONFIG_C is not set\n")
    (tmp_path / "one.config").write_text("# CONFIG_B is not set\nCONFIG_C=y\nCONFIG_D=1\n")
    (tmp_path / "two.config").write_text('CONFIG_D=2\nCONFIG_E="x y"\n')
    result = run_merge(
        tree, "-m", "-O", out, out / ".config", tmp_path / "one.config", tmp_path / "two.config"
    )
    assert result.returncode == 0, result.output
    assert "Value of CONFIG_D is redefined by fragment" in result.output
    assert (out / ".config").read_text().splitlines() == [
        "CONFIG_A=y",
        "# CONFIG_B is not set",
        "CONFIG_C=y",
        "CONFIG_D=2",
        'CONFIG_E="x y"',
    ]


def test_merge_config_missing_fragment_fails(tree: Path, tmp_path: Path) -> None:
    (tmp_path / ".config").write_text("CONFIG_A=y\n")
    result = run_merge(tree, "-m", "-O", tmp_path, tmp_path / ".config", tmp_path / "nope")
    assert result.returncode != 0
    assert (tmp_path / ".config").read_text() == "CONFIG_A=y\n"


def test_fake_repo_commits_follow_the_specs(tmp_path: Path) -> None:
    repo = tmp_path / "linux"
    shas = make_fake_kernel_repo(
        repo,
        [
            {"subject": "fast", "tps": 1000, "files": {"kernel/sched/core.c": "fast\n"}},
            {"subject": "slow", "tps": 500, "drop": ["CONFIG_PREEMPT_NONE"], "tag": "v6.13-rc1"},
            {"subject": "broken", "broken": True, "add": ["PREEMPT_RT"], "version": "6.13.0"},
            {"subject": "fixed", "broken": False, "tps": None},
        ],
    )
    assert len(shas) == 5 and len(set(shas)) == 5
    assert git(repo, "log", "--format=%s", "--reverse").splitlines() == [
        "fake linux",
        "fast",
        "slow",
        "broken",
        "fixed",
    ]

    def show(sha: str, path: str) -> str:
        return proc.run(
            ["git", "-C", str(repo), "show", f"{sha}:{path}"], check=False, capture=True
        ).output

    assert show(shas[1], "TPS") == "1000\n"
    assert show(shas[1], "kernel/sched/core.c") == "fast\n"
    assert "CONFIG_PREEMPT_NONE\n" in show(shas[1], "Kconfig.known")
    assert "CONFIG_PREEMPT_NONE\n" not in show(shas[2], "Kconfig.known")
    assert git(repo, "rev-parse", "v6.13-rc1^{commit}") == shas[2]
    assert "CONFIG_PREEMPT_RT\n" in show(shas[3], "Kconfig.known")
    assert show(shas[3], "BROKEN") and show(shas[3], "VERSION") == "6.13.0\n"
    assert git(repo, "ls-tree", "--name-only", shas[4]).count("BROKEN") == 0
    assert "TPS" not in git(repo, "ls-tree", "--name-only", shas[4]).splitlines()
    assert git(repo, "status", "--porcelain") == ""


def test_fake_repo_rejects_unknown_keys(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tsp"):
        make_fake_kernel_repo(tmp_path / "linux", [{"subject": "typo", "tsp": 1}])
