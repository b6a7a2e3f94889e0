"""Fragments: parse, resolve, merge (through the fake tree), verify, hashes; and the
fragment files in kernel-configs/ themselves."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from kbisect.core import paths, proc
from kbisect.core.exceptions import EXIT_BUILD, EXIT_USER, BuildError
from kbisect.kernel import kconfig
from kbisect.kernel.kconfig import (
    BadFragment,
    ConfigDropped,
    Fragment,
    UnknownFragment,
    config_hash,
    fragments_hash,
    merge_command,
    parse,
    resolve,
    verify,
)
from tests.fakes import FAKELINUX

CONFIGS = paths.configs_dir()
ARCHES = sorted(p.stem for p in (CONFIGS / "arch").glob("*.config"))


def frag(name: str, text: str) -> Fragment:
    return Fragment(name, Path(name), name, parse(text))


# -- parse --------------------------------------------------------------------------


def test_parse_values_not_set_and_strings() -> None:
    text = (
        "# a comment\n\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=512\n"
        'CONFIG_D="console=ttyS0 quiet"\nCONFIG_E=m\n'
    )
    assert parse(text) == {
        "CONFIG_A": "y",
        "CONFIG_B": "n",
        "CONFIG_C": "512",
        "CONFIG_D": '"console=ttyS0 quiet"',
        "CONFIG_E": "m",
    }


def test_parse_later_line_wins() -> None:
    assert parse("CONFIG_A=y\n# CONFIG_A is not set\n") == {"CONFIG_A": "n"}


@pytest.mark.parametrize("line", ["PREEMPT=y", "CONFIG_A y", "config FOO", "CONFIG_=y"])
def test_parse_rejects_lines_that_are_not_kconfig(line: str) -> None:
    with pytest.raises(BadFragment, match=r"^line 2: "):
        parse(f"CONFIG_OK=y\n{line}\n")


# -- resolve ------------------------------------------------------------------------


@pytest.fixture
def configs(tmp_path: Path) -> Path:
    root = tmp_path / "kernel-configs"
    for rel, text in {
        "base/b.config": "CONFIG_B=y\n",
        "base/a.config": "CONFIG_A=y\n",
        "arch/x86_64.config": "CONFIG_X86_64=y\n",
        "arch/arm64.config": "CONFIG_ARM64=y\n",
        "preempt-none.config": "CONFIG_PREEMPT_NONE=y\n",
        "perf.config": "CONFIG_KALLSYMS=y\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_resolve_order_is_base_sorted_then_arch_then_names(configs: Path) -> None:
    frags = resolve(["perf", "preempt-none.config"], "arm64", configs)
    assert [f.name for f in frags] == [
        "base/a.config",
        "base/b.config",
        "arch/arm64.config",
        "perf.config",
        "preempt-none.config",
    ]
    assert frags[2].settings == {"CONFIG_ARM64": "y"}
    assert frags[3].path == configs / "perf.config"


@pytest.mark.parametrize("base", ["tinyconfig", "allnoconfig"])
def test_resolve_trims_a_minimal_base_after_arch_before_names(configs: Path, base: str) -> None:
    (configs / "trim").mkdir()
    (configs / "trim" / "common.config").write_text("# CONFIG_IPV6 is not set\n")
    (configs / "trim" / "x86_64.config").write_text("# CONFIG_INTEL_MEI is not set\n")
    x86 = [f.name for f in resolve(["perf"], "x86_64", configs, base=base)]
    trims = ["trim/common.config", "trim/x86_64.config"]
    assert x86[2:] == ["arch/x86_64.config", *trims, "perf.config"]
    # no trim/arm64.config: only the common part
    arm = [f.name for f in resolve([], "arm64", configs, base=base)]
    assert arm[2:] == ["arch/arm64.config", "trim/common.config"]


@pytest.mark.parametrize("base", ["defconfig", "/some/distro.config"])
def test_resolve_leaves_a_bigger_base_untrimmed(configs: Path, base: str) -> None:
    (configs / "trim").mkdir()
    (configs / "trim" / "common.config").write_text("# CONFIG_IPV6 is not set\n")
    names = [f.name for f in resolve([], "x86_64", configs, base=base)]
    assert names == ["base/a.config", "base/b.config", "arch/x86_64.config"]


def test_resolve_does_not_offer_trim_fragments_by_name(configs: Path) -> None:
    (configs / "trim").mkdir()
    (configs / "trim" / "common.config").write_text("# CONFIG_IPV6 is not set\n")
    assert "common" not in kconfig.available(configs)
    with pytest.raises(UnknownFragment):
        resolve(["trim/common"], "x86_64", configs)


def test_resolve_accepts_a_file_path(configs: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine.cfg"
    mine.write_text("CONFIG_MINE=y\n")
    last = resolve([str(mine)], "x86_64", configs)[-1]
    assert (last.name, last.path, last.settings) == (str(mine), mine, {"CONFIG_MINE": "y"})


def test_resolve_unknown_name_lists_the_available_ones(configs: Path) -> None:
    with pytest.raises(UnknownFragment) as err:
        resolve(["preempt-nope"], "x86_64", configs)
    message = str(err.value)
    assert "'preempt-nope'" in message and "perf, preempt-none" in message
    assert "\n" not in message
    assert err.value.exit_code == EXIT_USER


def test_resolve_does_not_offer_base_fragments_by_name(configs: Path) -> None:
    with pytest.raises(UnknownFragment):
        resolve(["base/a"], "x86_64", configs)


def test_resolve_unknown_arch(configs: Path) -> None:
    with pytest.raises(UnknownFragment, match="arm64, x86_64"):
        resolve([], "riscv64", configs)


def test_resolve_bad_fragment_names_the_file(configs: Path) -> None:
    (configs / "bad.config").write_text("CONFIG_OK=y\nOOPS\n")
    with pytest.raises(BadFragment, match=r"bad\.config: line 2"):
        resolve(["bad"], "x86_64", configs)
    (configs / "latin1.config").write_bytes(b"# caf\xe9\nCONFIG_OK=y\r\n")
    with pytest.raises(BadFragment, match=r"latin1\.config: not UTF-8 text \(byte 5\)$"):
        resolve(["latin1"], "x86_64", configs)


def test_a_fragment_is_hashed_as_its_bytes(configs: Path) -> None:
    (configs / "crlf.config").write_bytes(b"CONFIG_OK=y\r\n")
    (fragment,) = resolve(["crlf"], "x86_64", configs)[-1:]
    assert fragment.sha256 == hashlib.sha256(b"CONFIG_OK=y\r\n").hexdigest()


def test_resolve_uses_the_checkout_by_default() -> None:
    frags = resolve(["preempt-none"], "x86_64")
    assert frags[-1].path == CONFIGS / "preempt-none.config"
    assert frags[-1].settings["CONFIG_PREEMPT_NONE"] == "y"


# -- merge --------------------------------------------------------------------------


def test_merge_command() -> None:
    cmd = merge_command(Path("/src"), Path("/out"), [Path("/f/a.config"), Path("b.config")])
    assert cmd == [
        "/src/scripts/kconfig/merge_config.sh",
        "-m",
        "-O",
        "/out",
        "/out/.config",
        "/f/a.config",
        "b.config",
    ]


def build_config(tree: Path, out: Path, frags: list[Fragment]) -> str:
    """tinyconfig, merge the fragments, olddefconfig: what kbisect build does."""
    make = ["make", "-C", str(tree), f"O={out}"]
    proc.run([*make, "tinyconfig"])
    proc.run(merge_command(tree, out, [f.path for f in frags]), cwd=out)
    proc.run([*make, "olddefconfig"])
    return (out / ".config").read_text()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(FAKELINUX, tmp_path / "linux")
    return tmp_path / "linux"


@pytest.mark.parametrize("arch", ARCHES)
def test_real_fragments_survive_the_fake_olddefconfig(
    tree: Path, tmp_path: Path, arch: str
) -> None:
    frags = resolve(["preempt-full", "perf"], arch)
    final = build_config(tree, tmp_path / "out", frags)
    assert verify(final, frags, set()) == []
    assert "CONFIG_PREEMPT=y" in final.splitlines()
    assert "# CONFIG_PREEMPT_NONE is not set" in final.splitlines()


def test_dropped_symbol_is_reported_by_name(tree: Path, tmp_path: Path) -> None:
    known = tree / "Kconfig.known"
    known.write_text(known.read_text().replace("CONFIG_PREEMPT_NONE\n", ""))
    frags = resolve(["preempt-none"], "x86_64")
    final = build_config(tree, tmp_path / "out", frags)
    with pytest.raises(ConfigDropped) as err:
        verify(final, frags, set())
    assert str(err.value) == (
        "CONFIG_PREEMPT_NONE=y requested by preempt-none.config became absent "
        "(unknown symbol or unmet dependencies) after olddefconfig "
        "(use --allow-dropped CONFIG_PREEMPT_NONE to accept)"
    )
    [warning] = verify(final, frags, {"CONFIG_PREEMPT_NONE"})
    assert warning.startswith("CONFIG_PREEMPT_NONE=y requested by preempt-none.config became")
    assert warning.endswith("(allowed by --allow-dropped)")


# -- verify -------------------------------------------------------------------------


def test_verify_not_set_matches_absent_and_not_set() -> None:
    frags = [frag("a.config", "# CONFIG_GONE is not set\n# CONFIG_OFF is not set\nCONFIG_ON=y\n")]
    assert verify("CONFIG_ON=y\n# CONFIG_OFF is not set\n", frags, set()) == []


def test_verify_message_for_not_set() -> None:
    frags = [frag("preempt-none.config", "CONFIG_PREEMPT_NONE=y\n")]
    with pytest.raises(ConfigDropped) as err:
        verify("# CONFIG_PREEMPT_NONE is not set\n", frags, set())
    assert str(err.value) == (
        'CONFIG_PREEMPT_NONE=y requested by preempt-none.config became "not set" after '
        "olddefconfig (use --allow-dropped CONFIG_PREEMPT_NONE to accept)"
    )
    assert isinstance(err.value, BuildError) and err.value.exit_code == EXIT_BUILD


def test_verify_last_fragment_wins() -> None:
    frags = [frag("base/a.config", "CONFIG_X=y\n"), frag("off.config", "# CONFIG_X is not set\n")]
    assert verify("# CONFIG_X is not set\n", frags, set()) == []
    with pytest.raises(ConfigDropped, match=r"CONFIG_X=n requested by off\.config became \"y\""):
        verify("CONFIG_X=y\n", frags, set())


def test_verify_names_every_drop_on_one_line() -> None:
    frags = [frag("a.config", 'CONFIG_A=y\nCONFIG_N=512\nCONFIG_S="x"\nCONFIG_OK=y\n')]
    final = 'CONFIG_A=m\nCONFIG_N=64\nCONFIG_S="y"\nCONFIG_OK=y\n'
    with pytest.raises(ConfigDropped) as err:
        verify(final, frags, set())
    message = str(err.value)
    assert "\n" not in message
    assert 'CONFIG_A=y requested by a.config became "m"' in message
    assert 'CONFIG_N=512 requested by a.config became "64"' in message
    assert 'CONFIG_S="x" requested by a.config became "y"' in message
    assert "CONFIG_OK" not in message
    assert message.endswith(
        "(use --allow-dropped CONFIG_A --allow-dropped CONFIG_N --allow-dropped CONFIG_S to accept)"
    )


def test_verify_allows_only_what_was_allowed() -> None:
    frags = [frag("a.config", "CONFIG_A=y\nCONFIG_B=y\n")]
    with pytest.raises(ConfigDropped) as err:
        verify("", frags, {"A"})
    assert "CONFIG_B" in str(err.value) and "CONFIG_A" not in str(err.value)
    assert len(verify("", frags, {"CONFIG_A", "CONFIG_B"})) == 2


def test_allowed_symbols_splits_commas_and_adds_prefix() -> None:
    assert kconfig.allowed_symbols(["PREEMPT_NONE,CONFIG_A", " B "]) == {
        "CONFIG_PREEMPT_NONE",
        "CONFIG_A",
        "CONFIG_B",
    }


# -- hashes -------------------------------------------------------------------------

CONFIG = "#\n# Linux/x86 6.12.0 Kernel Configuration\n#\nCONFIG_A=y\n# CONFIG_B is not set\n"


def test_config_hash_ignores_comments_and_order() -> None:
    reordered = "# CONFIG_B is not set\n# Linux/x86 6.12.22 Kernel Configuration\n\nCONFIG_A=y\n"
    assert config_hash(CONFIG) == config_hash(reordered)
    assert len(config_hash(CONFIG)) == 64


@pytest.mark.parametrize(
    "changed",
    [CONFIG.replace("A=y", "A=m"), CONFIG + "CONFIG_C=y\n", CONFIG + "# CONFIG_C is not set\n"],
)
def test_config_hash_sees_symbol_changes(changed: str) -> None:
    assert config_hash(changed) != config_hash(CONFIG)


def test_fragments_hash_depends_on_content_and_order(configs: Path) -> None:
    a = kconfig.load(configs / "base/a.config", "a")
    b = kconfig.load(configs / "base/b.config", "b")
    renamed = kconfig.load(configs / "base/a.config", "elsewhere/a.config")
    assert fragments_hash([a, b]) == fragments_hash([renamed, b])
    assert fragments_hash([a, b]) != fragments_hash([b, a])
    assert fragments_hash([a]) != fragments_hash([a, b])
    (configs / "base/a.config").write_text("CONFIG_A=n\n")
    assert fragments_hash([kconfig.load(configs / "base/a.config", "a"), b]) != fragments_hash(
        [a, b]
    )


# -- the fragment files -------------------------------------------------------------

ALL_FRAGMENTS = sorted(CONFIGS.rglob("*.config"))


@pytest.mark.parametrize("path", ALL_FRAGMENTS, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_fragment_file_parses_and_sets_only_config_symbols(path: Path) -> None:
    settings = kconfig.load(path, path.name).settings
    assert settings, f"{path} sets nothing"
    assert all(s.startswith("CONFIG_") for s in settings)


@pytest.mark.parametrize("arch", ARCHES)
def test_base_and_arch_fragments_never_disagree(arch: str) -> None:
    seen: dict[str, tuple[str, str]] = {}
    for f in resolve([], arch):
        for symbol, value in f.settings.items():
            previous = seen.setdefault(symbol, (value, f.name))
            assert previous[0] == value, f"{symbol}: {previous} vs {value} in {f.name}"


def test_purpose_fragments_exist_and_readme_lists_every_fragment() -> None:
    names = kconfig.available()
    for name in ["preempt-none", "preempt-voluntary", "preempt-full", "preempt-lazy", "perf"]:
        assert name in names
    readme = (CONFIGS / "README.md").read_text()
    for path in ALL_FRAGMENTS:
        assert f"`{path.relative_to(CONFIGS)}`" in readme, f"README.md misses {path.name}"


@pytest.mark.parametrize("model", ["none", "voluntary", "full", "lazy"])
def test_each_preempt_fragment_chooses_one_model(model: str) -> None:
    settings = kconfig.load(CONFIGS / f"preempt-{model}.config", model).settings
    chosen = [s for s, v in settings.items() if v == "y"]
    assert len(chosen) == 1 and chosen[0].startswith("CONFIG_PREEMPT")


def test_fake_tree_knows_every_symbol_the_fragments_set() -> None:
    known = set((FAKELINUX / "Kconfig.known").read_text().split())
    missing = {s for p in ALL_FRAGMENTS for s in kconfig.load(p, p.name).settings} - known
    assert not missing, f"add to tests/fakelinux/Kconfig.known: {sorted(missing)}"


# Options that make the kernel rewrite its own text (text_poke_bp: an int3 on each site,
# then the new bytes) after the other CPUs are up. Under QEMU's multi-threaded TCG a vCPU
# can still run the int3 once the patch is done: "Oops: int3" (docs/benchmarks-history.md).
RUNTIME_TEXT_PATCHERS = [
    "CONFIG_JUMP_LABEL",
    "CONFIG_FUNCTION_TRACER",
    "CONFIG_DYNAMIC_FTRACE",
    "CONFIG_KPROBES",
    "CONFIG_BPF_JIT",
    "CONFIG_LIVEPATCH",
]


def test_x86_64_minimal_config_turns_static_keys_off() -> None:
    merged: dict[str, str] = {}
    for f in resolve([], "x86_64"):
        merged.update(f.settings)
    assert merged["CONFIG_JUMP_LABEL"] == "n"
    assert merged["CONFIG_PREEMPT_DYNAMIC"] == "y"  # patched by static calls before SMP only


@pytest.mark.parametrize(
    "path",
    [p for p in ALL_FRAGMENTS if p.name != "arm64.config"],
    ids=lambda p: str(p.relative_to(CONFIGS)),
)
def test_no_x86_64_fragment_turns_on_a_runtime_text_patcher(path: Path) -> None:
    settings = kconfig.load(path, path.name).settings
    on = [s for s in RUNTIME_TEXT_PATCHERS if settings.get(s) in ("y", "m")]
    assert not on, f"{path.name}: {on} patch kernel text at run time (TCG int3 Oops)"
