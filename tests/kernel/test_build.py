"""`kbisect build` on the fake kernel tree: real git, real make, the real fragments."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kbisect.commands import cli
from kbisect.core import arch, paths, proc, progress
from kbisect.core.exceptions import EXIT_BUILD, EXIT_USER, BuildError
from kbisect.core.reading import CorruptFile
from kbisect.kernel import build, kconfig, make
from kbisect.kernel.kconfig import ConfigDropped
from kbisect.source import worktree
from tests.fakes import git, make_fake_kernel_repo, read_fake_image

HISTORY: list[dict[str, Any]] = [
    {"subject": "sched: fast", "tps": 1000, "tag": "v6.12-fake1"},
    {"subject": "sched: slow", "tps": 500, "version": "6.12.1-fake"},
    {"subject": "oops: does not build", "broken": True},
    {"subject": "sched: remove PREEMPT_NONE", "broken": False, "drop": ["PREEMPT_NONE"]},
]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "linux"
    return path, make_fake_kernel_repo(path, HISTORY)


def request(tree: Path, rev: str, **kw: Any) -> build.Request:
    return build.Request(tree=tree, rev=rev, arch=kw.pop("arch", arch.get("x86_64")), **kw)


def record_commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every command proc.run starts from now on (they still run)."""
    seen: list[list[str]] = []
    real = proc.run

    def spy(cmd: Any, **kw: Any) -> proc.Result:
        seen.append([str(c) for c in cmd])
        return real(cmd, **kw)

    monkeypatch.setattr(proc, "run", spy)
    return seen


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- artifacts and manifest -----------------------------------------------------------


def test_build_writes_artifact_and_manifest(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    result = build.build(request(tree, "v6.12-fake1", configs=("preempt-none",)))
    art = result.artifact_dir
    assert not result.cached
    assert result.image == art / "bzImage"
    assert {p.name for p in art.iterdir()} >= {"bzImage", "config", "System.map", "manifest.json"}
    assert art.is_relative_to(paths.cache_dir() / "builds")
    assert art.name == shas[1]
    m = json.loads((art / "manifest.json").read_text())
    assert m == result.manifest
    assert m["commit"] == shas[1]
    assert m["describe"] == "v6.12-fake1"
    assert m["subject"] == "sched: fast"
    assert m["arch"] == "x86_64" and m["base"] == "tinyconfig"
    names = [f["name"] for f in m["fragments"]]
    assert names[-4:] == [
        "arch/x86_64.config",
        "trim/common.config",
        "trim/x86_64.config",
        "preempt-none.config",
    ]
    assert names[0].startswith("base/") and len(names) == 9
    none = paths.configs_dir() / "preempt-none.config"
    assert m["fragments"][-1]["sha256"] == sha256(none)
    assert m["compiler"].startswith("gcc")
    assert isinstance(m["duration_s"], float) and m["duration_s"] >= 0
    assert set(m["ccache"]) == {"hits", "misses", "hit_rate"}
    config = (art / "config").read_text()
    assert m["config_hash"] == kconfig.config_hash(config)
    assert "CONFIG_PREEMPT_NONE=y" in config
    assert m["kernelrelease"] == "6.12.0-fake"
    assert m["allowed_drops"] == [] and m["in_place"] is False
    assert m["image_sha256"] == sha256(result.image)
    image = read_fake_image(result.image)
    assert image.tps == 1000.0 and image.release == "6.12.0-fake"
    assert image.config_sha256 == sha256(art / "config")


def test_second_build_is_cached_and_runs_no_make(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree, shas = repo
    first = build.build(request(tree, shas[1]))
    seen = record_commands(monkeypatch)
    again = build.build(request(tree, "v6.12-fake1"))
    assert again.cached and again.artifact_dir == first.artifact_dir
    assert again.manifest == first.manifest and again.image == first.image
    assert seen and not [c for c in seen if c[0] == "make"]


def test_a_cached_manifest_with_a_wrong_field_is_one_line_naming_it(
    repo: tuple[Path, list[str]],
) -> None:
    tree, shas = repo
    first = build.build(request(tree, shas[1]))
    path = first.artifact_dir / "manifest.json"
    path.write_text(json.dumps({**first.manifest, "config_hash": "abc123abc123"}))
    with pytest.raises(CorruptFile) as info:
        build.build(request(tree, shas[1]))
    assert str(info.value) == (
        f'{path}: config_hash must be a sha256 (64 hex digits), got "abc123abc123"; '
        f"remove {first.artifact_dir} to build that commit again"
    )


def test_other_commit_reuses_the_o_dir(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    one = build.build(request(tree, shas[1]))
    two = build.build(request(tree, shas[2]))
    assert one.artifact_dir.parent == two.artifact_dir.parent
    assert one.artifact_dir != two.artifact_dir
    obj = build.obj_dir(one.artifact_dir.parent, worktree.path_for(tree, "build"))
    for r in (one, two):
        assert f"O={obj} " in (r.artifact_dir / "build.log").read_text()
    assert two.manifest["kernelrelease"] == "6.12.1-fake"
    assert read_fake_image(two.image).tps == 500.0
    assert read_fake_image(one.image).tps == 1000.0  # the first artifact was not overwritten


def test_each_checkout_keeps_its_own_o_dir(repo: tuple[Path, list[str]]) -> None:
    """The scratch worktree and an in-place checkout (a bisect's) never share an O= dir:
    kbuild would rebuild everything at each switch, as their source paths differ."""
    tree, shas = repo
    scratch = build.build(request(tree, shas[1]))
    git(tree, "checkout", "-q", shas[2])
    here = build.build(request(tree, "HEAD", in_place=True))
    assert scratch.artifact_dir.parent == here.artifact_dir.parent  # same config inputs
    logs = [(r.artifact_dir / "build.log").read_text() for r in (scratch, here)]
    dirs = [re.search(r"O=(\S+)", log).group(1) for log in logs]  # type: ignore[union-attr]
    assert dirs[0] != dirs[1]
    assert dirs[1] == str(build.obj_dir(here.artifact_dir.parent, tree))


def test_a_cold_build_counts_its_objects_of_the_first_cold_builds_with_the_time_left(
    repo: tuple[Path, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The first cold build of a config has no total: "N objects so far"; it records its
    count in the build root, once, and the next cold build of that config (here an
    in-place checkout's own O= dir) counts of it, with the time left at its rate; an
    incremental build (its O= dir built) has no total. Plain lines, not on a terminal."""
    tree, shas = repo
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    first = build.build(request(tree, shas[1]))
    root = first.artifact_dir.parent
    assert (root / make.OBJECTS).read_text() == "3\n"  # the fake tree: two CC and an LD
    err = capsys.readouterr().err
    assert re.search(r"^\[kbisect \d\d:\d\d\] compiling: 3 objects so far$", err, re.M)
    git(tree, "checkout", "-q", shas[2])
    build.build(request(tree, "HEAD", in_place=True))
    lines = re.findall(r"compiling: \d.*", capsys.readouterr().err)
    assert re.fullmatch(r"compiling: 1/3 objects, ~\d+ s left", lines[0])  # the fake is quick
    assert re.fullmatch(r"compiling: 2/3 objects, ~\d+ s left", lines[1])
    assert lines[2] == "compiling: 3/3 objects"  # nothing left: no time left
    (root / make.OBJECTS).write_text("5\n")  # recorded once: not rewritten
    build.build(request(tree, shas[0]))  # the scratch O= dir is built: incremental
    assert (root / make.OBJECTS).read_text() == "5\n"
    assert re.findall(r"compiling: \d.*", capsys.readouterr().err)[-1] == (
        "compiling: 3 objects so far"
    )


def test_kbisect_checkouts_build_in_a_subdirectory_that_survives_a_checkout(
    repo: tuple[Path, list[str]],
) -> None:
    """In kbisect's own checkouts the O= dir is a direct child of the checkout, so kbuild
    names sources relative to it (`srctree := ..`) and ccache hits from any checkout's
    path; checking out another commit there keeps it; a user's tree is never written."""
    tree, shas = repo
    one = build.build(request(tree, shas[1]))
    slot = worktree.path_for(tree, "build")
    obj = build.obj_dir(one.artifact_dir.parent, slot)
    assert obj.parent == slot and obj.name.startswith(build.OBJ_PREFIX)
    assert (obj / ".config").is_file()
    build.build(request(tree, shas[2]))  # worktree.checkout cleans, but not the O= dir
    assert (obj / ".config").is_file()
    assert build.obj_dir(one.artifact_dir.parent, tree).parent == one.artifact_dir.parent
    assert not any(p.name.startswith(build.OBJ_PREFIX) for p in tree.iterdir())


def test_other_fragments_get_another_o_dir(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    one = build.build(request(tree, shas[1]))
    two = build.build(request(tree, shas[1], configs=("preempt-full",)))
    assert not two.cached
    assert one.artifact_dir.parent != two.artifact_dir.parent
    assert one.manifest["config_hash"] != two.manifest["config_hash"]


def test_broken_commit_raises_build_error_naming_the_log(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    with pytest.raises(BuildError) as info:
        build.build(request(tree, shas[3]))
    assert info.value.exit_code == EXIT_BUILD
    found = re.search(r"\(log: (\S+)\)", str(info.value))
    assert found, str(info.value)
    log = Path(found.group(1))
    text = log.read_text()
    assert text.startswith("# reproduce: ")
    assert "kernel/fake.c:1: error: BROKEN" in text
    assert not (log.parent / "manifest.json").exists()


def test_broken_commit_exits_4_from_the_cli(
    repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    tree, shas = repo
    assert cli.main(["build", "--tree", str(tree), "--rev", shas[3]]) == EXIT_BUILD
    assert "build.log" in capsys.readouterr().err


def test_dropped_symbol_raises_config_dropped(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    with pytest.raises(ConfigDropped, match="CONFIG_PREEMPT_NONE=y requested by preempt-none"):
        build.build(request(tree, shas[4], configs=("preempt-none",)))


def test_custom_fragment_with_unknown_symbol_exits_4(
    repo: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree, shas = repo
    frag = tmp_path / "mine.config"
    frag.write_text("CONFIG_KBISECT_NO_SUCH_SYMBOL=y\n")
    argv = ["build", "--tree", str(tree), "--rev", shas[1], "--config", str(frag)]
    assert cli.main(argv) == EXIT_BUILD
    err = capsys.readouterr().err
    assert "CONFIG_KBISECT_NO_SUCH_SYMBOL=y requested by" in err
    assert "--allow-dropped CONFIG_KBISECT_NO_SUCH_SYMBOL" in err


def test_allow_dropped_accepts_with_a_warning_in_the_manifest(
    repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    tree, shas = repo
    argv = [
        "build",
        "--tree",
        str(tree),
        "--rev",
        shas[4],
        "--config",
        "preempt-none",
        "--allow-dropped",
        "PREEMPT_NONE",
        "--json",
    ]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    manifest = json.loads(out)
    [warning] = manifest["allowed_drops"]
    assert "CONFIG_PREEMPT_NONE" in warning and "allowed by --allow-dropped" in warning
    assert "warning: CONFIG_PREEMPT_NONE" in err


def test_cached_build_still_checks_dropped_symbols(repo: tuple[Path, list[str]]) -> None:
    """An artifact built with --allow-dropped does not satisfy a build without it."""
    tree, shas = repo
    allowed = frozenset({"CONFIG_PREEMPT_NONE"})
    build.build(request(tree, shas[4], configs=("preempt-none",), allow_dropped=allowed))
    with pytest.raises(ConfigDropped, match="CONFIG_PREEMPT_NONE"):
        build.build(request(tree, shas[4], configs=("preempt-none",)))


# -- bad input: exit 2 before building ------------------------------------------------


def no_builds() -> bool:
    cache = paths.cache_dir()
    return not (cache / "builds").exists() and not (cache / "worktrees").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rev", "no-such-rev"], "unknown revision 'no-such-rev'"),
        (["--arch", "mips"], "unknown arch 'mips'"),
        (["--config", "no-such-fragment"], "unknown config fragment 'no-such-fragment'"),
        (["--base", "no-such-base"], "--base no-such-base"),
        (["-j", "-1"], "-j/--jobs: -1 is not in 0..4096"),  # was a build failure
        (["-j", "100000"], "-j/--jobs: 100000 is not in 0..4096"),  # make hung
    ],
)
def test_bad_input_exits_2(
    repo: tuple[Path, list[str]],
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    tree, _ = repo
    assert cli.main(["build", "--tree", str(tree), *extra]) == EXIT_USER
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert no_builds()


@pytest.mark.parametrize("kind", ["plain-dir", "git-repo", "missing"])
def test_non_kernel_tree_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = tmp_path / "notlinux"
    if kind != "missing":
        path.mkdir()
        (path / "Makefile").write_text("all:\n")
    if kind == "git-repo":
        git(path, "init", "-q")
    assert cli.main(["build", "--tree", str(path)]) == EXIT_USER
    assert str(path) in capsys.readouterr().err
    assert no_builds()


def test_missing_cross_compiler_exits_2_before_building(
    repo: tuple[Path, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tree, _ = repo
    real_which = shutil.which

    def which(name: str, *args: Any, **kw: Any) -> str | None:
        return None if name.endswith("-linux-gnu-gcc") else real_which(name, *args, **kw)

    monkeypatch.setattr(shutil, "which", which)
    monkeypatch.setattr(arch, "host_arch", lambda: "x86_64")
    assert cli.main(["build", "--tree", str(tree), "--arch", "arm64"]) == EXIT_USER
    assert "aarch64-linux-gnu-gcc" in capsys.readouterr().err
    assert no_builds()


# -- the user's checkout ---------------------------------------------------------------


def snapshot(repo: Path) -> dict[str, str]:
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": proc.capture(["git", "-C", str(repo), "symbolic-ref", "-q", "HEAD"], check=False),
        "cached": git(repo, "diff", "--cached"),
        "status": git(repo, "status", "--porcelain"),
        "bisect": git(repo, "bisect", "log"),
        "stash": git(repo, "stash", "list"),
    }


def test_users_checkout_is_never_changed(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    git(tree, "bisect", "start", shas[4], shas[0])  # checks out a midpoint: detached
    (tree / "README").write_text("staged change\n")
    git(tree, "add", "README")
    (tree / "VERSION").write_text("unstaged change\n")
    (tree / "untracked.txt").write_text("x\n")
    before = snapshot(tree)
    assert before["cached"] and before["status"] and "git bisect start" in before["bisect"]
    result = build.build(request(tree, shas[2]))
    assert snapshot(tree) == before
    assert (tree / "VERSION").read_text() == "unstaged change\n"
    worktrees = paths.cache_dir() / "worktrees"
    log = (result.artifact_dir / "build.log").read_text()
    assert f"make -C {worktrees}/" in log and f"make -C {tree} " not in log
    assert result.manifest["kernelrelease"] == "6.12.1-fake"  # the commit, not the checkout


# -- in place --------------------------------------------------------------------------


def test_in_place_refuses_a_dirty_tree(
    repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    tree, _ = repo
    (tree / "VERSION").write_text("6.13.0-dirty\n")
    assert cli.main(["build", "--tree", str(tree), "--in-place"]) == EXIT_USER
    assert "uncommitted changes" in capsys.readouterr().err
    assert no_builds()


def test_in_place_builds_the_checkout_itself(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    git(tree, "checkout", "-q", "--detach", shas[2])
    result = build.build(request(tree, "HEAD", in_place=True))
    assert result.manifest["in_place"] is True and result.manifest["commit"] == shas[2]
    assert f"make -C {tree} " in (result.artifact_dir / "build.log").read_text()
    assert not worktree.path_for(tree, "build").exists()  # nothing checked out
    assert git(tree, "status", "--porcelain") == ""  # O= kept the tree clean


def test_in_place_refuses_another_revision(repo: tuple[Path, list[str]]) -> None:
    tree, shas = repo
    with pytest.raises(Exception, match="is not at") as info:
        build.build(request(tree, shas[1], in_place=True))
    assert getattr(info.value, "exit_code", None) == EXIT_USER


# -- arm64 -----------------------------------------------------------------------------


@pytest.mark.skipif(
    shutil.which("aarch64-linux-gnu-gcc") is None, reason="aarch64-linux-gnu-gcc not installed"
)
def test_arm64_build_produces_image(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(arch, "host_arch", lambda: "x86_64")
    tree, shas = repo
    result = build.build(request(tree, shas[1], arch=arch.get("arm64")))
    assert result.image.name == "Image" and (result.artifact_dir / "Image").is_file()
    assert read_fake_image(result.image).tps == 1000.0
    m = result.manifest
    assert m["arch"] == "arm64" and m["compiler"].startswith("aarch64-linux-gnu-gcc")
    assert [f["name"] for f in m["fragments"]][-2:] == ["arch/arm64.config", "trim/common.config"]
    assert "CONFIG_ARM64_4K_PAGES=y" in (result.artifact_dir / "config").read_text()
    log = (result.artifact_dir / "build.log").read_text()
    assert "ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-" in log


def test_make_command_is_pure() -> None:
    a = arch.get("x86_64")
    cmd = make.make_command(Path("/src"), Path("/obj"), a, "bzImage", jobs=3, cc="ccache gcc")
    assert cmd[:4] == ["make", "-C", "/src", "O=/obj"]
    assert cmd[-3:] == ["CC=ccache gcc", "-j3", "bzImage"]
    assert "ARCH=x86" in cmd


# -- ccache and progress (what the manifest and the log header are made of) -----------


def test_ccache_stats_parses_print_stats(monkeypatch: pytest.MonkeyPatch) -> None:
    out = (
        "autoconf_test\t0\ncache_miss\t17\ndirect_cache_hit\t5\ndirect_cache_miss\t9\n"
        "preprocessed_cache_hit\t2\nstats_updated_timestamp\t1700000000\n"
    )
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(proc, "capture", lambda cmd, **kw: out)
    want = {"cache_miss": 17, "direct_cache_hit": 5, "preprocessed_cache_hit": 2}
    assert make.ccache_stats() == want
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert make.ccache_stats() == {}


def test_ccache_delta() -> None:
    before = {"direct_cache_hit": 10, "preprocessed_cache_hit": 1, "cache_miss": 5}
    after = {"direct_cache_hit": 16, "preprocessed_cache_hit": 3, "cache_miss": 7}
    assert make.ccache_delta(before, after) == {"hits": 8, "misses": 2, "hit_rate": 0.8}
    assert make.ccache_delta({}, {}) == {"hits": 0, "misses": 0, "hit_rate": 0.0}


def test_reproduce_line_and_log_header_quote_arguments() -> None:
    argv = ["build", "--rev", "v6.13-rc1", "--config", "my frag.config"]
    line = "kbisect build --rev v6.13-rc1 --config 'my frag.config'"
    assert progress.reproduce_line(argv) == line
    assert progress.log_header(argv) == f"# reproduce: {progress.reproduce_line(argv)}\n"


def test_builds_of_one_tree_share_the_worktree_slot_one_at_a_time(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another arch or other fragments (another O= dir) still wait for the worktree."""
    tree, shas = repo
    held, release = threading.Event(), threading.Event()
    checked_out_while_held: list[bool] = []
    real_checkout = worktree.checkout

    def checkout(*args: Any, **kw: Any) -> Path:
        checked_out_while_held.append(not release.is_set())
        return real_checkout(*args, **kw)

    def hold() -> None:
        with worktree.locked(worktree.path_for(tree, "build")):
            held.set()
            release.wait(10)
            time.sleep(0.05)  # still held just after release is set

    monkeypatch.setattr(worktree, "checkout", checkout)
    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    threading.Timer(0.3, release.set).start()
    build.build(request(tree, shas[1], configs=("perf",)))
    holder.join()
    assert checked_out_while_held == [False]
