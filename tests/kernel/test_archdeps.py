"""Preemption models a tree rules out on the arch, refused before any build
(kbisect/kernel/archdeps.py): pure, then `kbisect build` on a 7.2-shaped fake tree."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core import arch
from kbisect.core.exceptions import EXIT_OK, EXIT_USER, BuildError
from kbisect.kernel import archdeps
from kbisect.kernel.kconfig import ConfigDropped
from tests.fakes import make_fake_kernel_repo

# kernel/Kconfig.preempt as 7.2 has it (7dadeaa6e851), help texts shortened.
KCONFIG_72 = """\
config ARCH_HAS_PREEMPT_LAZY
\tbool

choice
\tprompt "Preemption Model"
\tdefault PREEMPT_LAZY if ARCH_HAS_PREEMPT_LAZY
\tdefault PREEMPT_NONE

config PREEMPT_NONE
\tbool "No Forced Preemption (Server)"
\tdepends on !PREEMPT_RT
\tdepends on ARCH_NO_PREEMPT
\tselect PREEMPT_NONE_BUILD if !PREEMPT_DYNAMIC
\thelp
\t  This is the traditional Linux preemption model.
\t  depends on nothing: help text is prose

config PREEMPT_VOLUNTARY
\tbool "Voluntary Kernel Preemption (Desktop)"
\tdepends on !ARCH_HAS_PREEMPT_LAZY
\tdepends on !ARCH_NO_PREEMPT
\tdepends on !PREEMPT_RT

config PREEMPT
\tbool "Preemptible Kernel (Low-Latency Desktop)"
\tdepends on !ARCH_NO_PREEMPT

config PREEMPT_LAZY
\tbool "Scheduler controlled preemption model"
\tdepends on !ARCH_NO_PREEMPT
\tdepends on ARCH_HAS_PREEMPT_LAZY

endchoice
"""
# 6.12's: every model but for ARCH_NO_PREEMPT arches.
KCONFIG_612 = KCONFIG_72.replace("\tdepends on ARCH_NO_PREEMPT\n", "").replace(
    "\tdepends on !ARCH_HAS_PREEMPT_LAZY\n", ""
)
X86_KCONFIG = """\
config X86_32
\tdef_bool y
\tdepends on !64BIT
\tselect ARCH_NO_PREEMPT

config X86
\tdef_bool y
\tselect ARCH_HAS_PREEMPT_LAZY
\tselect ARCH_MAYBE if EXPERT
"""
X86 = arch.get("x86_64")
WANT_NONE = {"CONFIG_PREEMPT_NONE": ("y", "preempt-none.config")}


def test_depends_and_selects_are_read_per_block() -> None:
    assert archdeps.depends(KCONFIG_72, "PREEMPT_NONE") == ["!PREEMPT_RT", "ARCH_NO_PREEMPT"]
    assert archdeps.selects(X86_KCONFIG, "X86") == {"ARCH_HAS_PREEMPT_LAZY"}  # no `if`
    assert archdeps.selects(X86_KCONFIG, "X86_32") == {"ARCH_NO_PREEMPT"}


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("ARCH_NO_PREEMPT", "x86 does not select ARCH_NO_PREEMPT"),
        ("!ARCH_HAS_PREEMPT_LAZY", "x86 selects ARCH_HAS_PREEMPT_LAZY"),
        ("!ARCH_NO_PREEMPT && ARCH_HAS_PREEMPT_LAZY", None),
        ("!PREEMPT_RT", None),  # not the arch's to say: olddefconfig tells
        ("ARCH_NO_PREEMPT || EXPERT", None),  # not a plain conjunction: not judged
    ],
)
def test_ruled_out(expression: str, why: str | None) -> None:
    assert archdeps.ruled_out(expression, {"ARCH_HAS_PREEMPT_LAZY"}, "x86") == why


def test_72_refuses_none_and_voluntary_on_x86_not_full_or_lazy() -> None:
    wanted = {
        **WANT_NONE,
        "CONFIG_PREEMPT_VOLUNTARY": ("y", "preempt-voluntary.config"),
        "CONFIG_PREEMPT": ("y", "preempt-full.config"),
        "CONFIG_PREEMPT_LAZY": ("y", "preempt-lazy.config"),
        "CONFIG_PREEMPT_RT": ("n", "mine.config"),
    }
    refused = archdeps.refusals(KCONFIG_72, X86_KCONFIG, X86, wanted, ())
    assert [r.symbol for r in refused] == ["CONFIG_PREEMPT_NONE", "CONFIG_PREEMPT_VOLUNTARY"]
    assert archdeps.refusals(KCONFIG_612, X86_KCONFIG, X86, wanted, ()) == []


def test_allow_dropped_lets_it_through() -> None:
    assert archdeps.refusals(KCONFIG_72, X86_KCONFIG, X86, WANT_NONE, ["PREEMPT_NONE"]) == []


def test_the_message_is_one_line_naming_fragment_dependency_and_the_way_out() -> None:
    [r] = archdeps.refusals(KCONFIG_72, X86_KCONFIG, X86, WANT_NONE, ())
    assert archdeps.message([r], "7b097659f971") == (
        "CONFIG_PREEMPT_NONE=y requested by preempt-none.config would be dropped at "
        "7b097659f971: kernel/Kconfig.preempt makes PREEMPT_NONE depend on ARCH_NO_PREEMPT "
        "and x86 does not select ARCH_NO_PREEMPT (use --allow-dropped CONFIG_PREEMPT_NONE "
        "to build without it)"
    )


@pytest.fixture
def tree_72(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake kernel tree shaped like 7.2: its Kconfig.preempt and arch/x86/Kconfig as
    above, PREEMPT_NONE and PREEMPT_VOLUNTARY gone from what olddefconfig keeps."""
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "linux-7.2"
    make_fake_kernel_repo(
        path,
        [
            {
                "subject": "sched: Further restrict the preemption modes",
                "version": "7.2.13",
                "drop": ["PREEMPT_NONE", "PREEMPT_VOLUNTARY"],
                "files": {"kernel/Kconfig.preempt": KCONFIG_72, "arch/x86/Kconfig": X86_KCONFIG},
                "tag": "debian/7.2.13-1",
            }
        ],
    )
    return path


def test_preempt_none_on_72_is_refused_before_any_build(
    tree_72: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["build", "--tree", str(tree_72), "--rev", "debian/7.2.13-1"]
    assert cli.main([*argv, "--config", "preempt-none"]) == EXIT_USER
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(
        "kbisect: CONFIG_PREEMPT_NONE=y requested by preempt-none.config would be dropped at "
    )
    assert "depend on ARCH_NO_PREEMPT and x86 does not select ARCH_NO_PREEMPT" in err
    assert not (tmp_path / "cache" / "builds").exists()  # nothing configured, nothing built


def test_preempt_lazy_on_72_builds_and_allow_dropped_builds_none(
    tree_72: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["build", "--tree", str(tree_72), "--rev", "debian/7.2.13-1", "--json"]
    assert cli.main([*argv, "--config", "preempt-lazy"]) == EXIT_OK
    argv += ["--config", "preempt-none", "--allow-dropped", "PREEMPT_NONE"]
    capsys.readouterr()
    assert cli.main(argv) == EXIT_OK
    [warning] = json.loads(capsys.readouterr().out)["allowed_drops"]
    assert "CONFIG_PREEMPT_NONE=y requested by preempt-none" in warning


def test_a_refusal_exits_2_but_a_bisection_still_skips_it_as_a_build() -> None:
    refused = archdeps.ConfigRefused("x")
    assert refused.exit_code == EXIT_USER
    assert isinstance(refused, BuildError) and isinstance(refused, ConfigDropped)


def test_a_patch_is_judged_on_the_patched_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The patched commit lives in kbisect's own repository: the check reads it there. A
    6.12-shaped tree builds preempt-none; a patch that adds 7.2's restriction makes the
    same build a refusal, before anything is built."""
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "linux-6.12"
    files = {"kernel/Kconfig.preempt": KCONFIG_612, "arch/x86/Kconfig": X86_KCONFIG}
    make_fake_kernel_repo(path, [{"subject": "6.12-shaped", "files": files, "tag": "v6.12"}])
    restricted = KCONFIG_612.replace(
        '\tbool "No Forced Preemption (Server)"\n\tdepends on !PREEMPT_RT\n',
        '\tbool "No Forced Preemption (Server)"\n\tdepends on !PREEMPT_RT\n'
        "\tdepends on ARCH_NO_PREEMPT\n",
    )
    assert restricted != KCONFIG_612
    diff = difflib.unified_diff(
        KCONFIG_612.splitlines(keepends=True),
        restricted.splitlines(keepends=True),
        "a/kernel/Kconfig.preempt",
        "b/kernel/Kconfig.preempt",
    )
    patch = tmp_path / "restrict.patch"
    patch.write_text("".join(diff))
    argv = ["build", "--tree", str(path), "--rev", "v6.12", "--config", "preempt-none"]
    assert cli.main([*argv, "--patch", str(patch)]) == EXIT_USER
    err = capsys.readouterr().err
    assert "depend on ARCH_NO_PREEMPT and x86 does not select ARCH_NO_PREEMPT" in err
    assert not (tmp_path / "cache" / "builds").exists()
    assert cli.main(argv) == EXIT_OK  # the tree itself is fine
