"""PostgreSQL builds as sides (kbisect/pgbuild/): the source spec, the cache key, patches
applied in kbisect's repository (never the user's), the build's namespace command, and a
guest that runs a build. The build itself is stood in here (a fake configure and make);
the real one runs in `just e2e` and in docs/examples/pg-clock-sweep."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from harness import template
from kbisect.compare import pgsides, sides
from kbisect.core import arch, proc
from kbisect.core.exceptions import CommandFailed, UserError
from kbisect.measure import sample
from kbisect.pgbuild import build, buildroot, spec, store
from kbisect.pgbuild.request import Request
from kbisect.scenario import scenario
from kbisect.scenario.fields import ScenarioError
from kbisect.source.patches import PatchDoesNotApply
from kbisect.targets import registry
from kbisect.targets.base import Kernel
from tests.fakes import git
from tests.targets import images as fakeimages
from tests.targets.test_vng_target import fake_image, use_fake_vng, vng_calls

FREELIST = "src/backend/storage/buffer/freelist.c"


def pg_repo(where: Path, major: str = "20devel") -> tuple[Path, list[str]]:
    """A PostgreSQL-shaped git tree: configure.ac, freelist.c, two commits."""
    repo = where / "postgres"
    (repo / "src/backend/storage/buffer").mkdir(parents=True)
    git(where, "init", "-q", str(repo))
    (repo / "configure.ac").write_text(f"AC_INIT([PostgreSQL], [{major}], [bugs])\n")
    (repo / FREELIST).write_text("tick = fetch_add(hand, 1);\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    first = git(repo, "rev-parse", "HEAD")
    (repo / "README").write_text("docs\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "docs")
    return repo, [first, git(repo, "rev-parse", "HEAD")]


BATCH = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A Hacker <a@example.org>
Date: Mon, 6 Jul 2026 17:25:00 -0400
Subject: [PATCH] Batch the clock sweep

---
 src/backend/storage/buffer/freelist.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/src/backend/storage/buffer/freelist.c b/src/backend/storage/buffer/freelist.c
--- a/src/backend/storage/buffer/freelist.c
+++ b/src/backend/storage/buffer/freelist.c
@@ -1 +1 @@
-tick = fetch_add(hand, 1);
+tick = fetch_add(hand, batch);
--
2.47.3
"""


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[str]]:
    """The build root and the build stood in: each namespace command is recorded and makes
    what configure, make and make install would."""
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(buildroot, "ensure", lambda suite, a: tmp_path / "buildroot")
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # a build needs root: stood in too
    calls: list[list[str]] = []
    real_run = proc.run

    def run(cmd: Sequence[str], **kw: Any) -> proc.Result:
        if cmd[0] != "unshare":
            return real_run(cmd, **kw)
        calls.append(list(cmd))
        binds = dict(
            re.split(r"\s+", m.strip())[2:4][::-1]
            for m in cmd[-1].split(" && ")
            if m.startswith("mount --bind")
        )
        by_name = {Path(k).name: Path(shlex.split(v)[0]) for k, v in binds.items()}
        src = (by_name["src"] / FREELIST).read_text()
        header = by_name["build"] / "src/include"
        header.mkdir(parents=True, exist_ok=True)
        (header / "pg_config.h").write_text(
            '#define PG_VERSION "20devel"\n#define PG_MAJORVERSION_NUM 20\n'
        )
        bindir = by_name["out"] / "kbisect/pg/bin"
        bindir.mkdir(parents=True)
        (bindir / "postgres").write_text(f"server built from: {src}")
        return proc.Result(0, "", None)

    monkeypatch.setattr(proc, "run", run)
    return calls


def test_the_spec_names_a_git_tree_at_a_revision_or_a_debian_major(tmp_path: Path) -> None:
    repo, _ = pg_repo(tmp_path)
    assert spec.parse(f"{repo}@REL_17_6") == spec.Spec("git", tree=repo, rev="REL_17_6")
    assert spec.parse(str(repo)).rev == "HEAD"
    assert spec.parse("debian:17") == spec.Spec("debian", major=17)
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    assert spec.parse(f"{bare}@HEAD").tree == bare
    for bad, message in (
        ("debian:16", "--pg-build debian:16: no Debian suite kbisect knows carries it"),
        ("debian:x", "--pg-build debian:x: debian: takes a major, e.g. debian:17"),
        (f"{repo}@", f"--pg-build {repo}@: a revision after @"),
        (str(tmp_path / "nowhere"), "is not a git repository (want debian:MAJOR or PATH[@REV])"),
    ):
        with pytest.raises(spec.BadBuildSpec) as info:
            spec.parse(bad)
        assert message in str(info.value) and "\n" not in str(info.value)


def test_a_build_is_made_once_per_inputs_and_the_users_repository_is_untouched(
    builds: list[list[str]], tmp_path: Path
) -> None:
    repo, shas = pg_repo(tmp_path)
    before = git(repo, "for-each-ref"), git(repo, "status", "--porcelain")
    patch = tmp_path / "0001-batch.patch"
    patch.write_text(BATCH)
    plain, made = build.build(spec.parse(f"{repo}@{shas[0][:10]}"))
    assert plain.startswith("pg20-") and store.KEY.fullmatch(plain)
    assert made["version"] == "20devel" and made["major"] == 20 and made["patches"] == []
    assert made["commit"] == made["base"] == shas[0]
    assert made["runs_on"] == {"suite": "trixie", "major": 17}
    installed = store.install_dir(plain) / "bin/postgres"
    assert installed.read_text() == "server built from: tick = fetch_add(hand, 1);\n"
    assert json.loads((store.dir_for(plain) / store.MANIFEST).read_text()) == made
    again, _ = build.build(spec.parse(f"{repo}@{shas[0][:10]}"))
    assert again == plain and len(builds) == 1  # cached
    patched, with_patch = build.build(spec.parse(f"{repo}@{shas[0]}"), [patch])
    assert patched != plain and len(builds) == 2
    assert (store.install_dir(patched) / "bin/postgres").read_text().endswith("batch);\n")
    [described] = with_patch["patches"]
    assert described["file"] == "0001-batch.patch"
    assert described["subject"] == "Batch the clock sweep"
    assert with_patch["commit"] != shas[0] and with_patch["base"] == shas[0]
    assert (git(repo, "for-each-ref"), git(repo, "status", "--porcelain")) == before
    with pytest.raises(CommandFailed):
        git(repo, "cat-file", "-e", with_patch["commit"])  # lives in kbisect's repository


def test_a_patch_that_does_not_apply_is_one_line_before_any_build(
    builds: list[list[str]], tmp_path: Path
) -> None:
    repo, _ = pg_repo(tmp_path)
    patch = tmp_path / "stale.patch"
    patch.write_text(BATCH.replace("-tick = fetch_add(hand, 1);", "-tick = other();"))
    with pytest.raises(PatchDoesNotApply) as info:
        build.build(spec.parse(str(repo)), [patch])
    assert str(info.value).startswith(f"{patch}: does not apply on ")
    assert "\n" not in str(info.value) and builds == []


def test_a_build_needs_root_and_says_so_before_anything(
    builds: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = pg_repo(tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match=r"^a PostgreSQL build: run as root \(unshare"):
        build.build(spec.parse(str(repo)))
    assert builds == []


def test_the_namespace_command_binds_the_same_paths_for_every_build() -> None:
    root = Path("/c/root")
    binds = {m: Path(f"/host/{m}") for m in build.MOUNTS}
    cmd = build.namespace_command(root, binds, "make")
    assert cmd[:7] == ["unshare", "--mount", "--propagation", "private", "--fork",
                       "--kill-child", "sh"]  # fmt: skip
    steps = cmd[-1].split(" && ")
    assert steps[:4] == [f"mount --bind /host/{m} /c/root/{m}" for m in build.MOUNTS]
    assert steps[4] == "mount -t proc proc /c/root/proc"
    assert steps[5] == "exec chroot /c/root /bin/sh -c make"
    assert "--prefix=/kbisect/pg" in build.SCRIPT.format(
        configure=" ".join(build.CONFIGURE), jobs=2
    )


def test_a_pg_patch_without_a_source_patches_the_scenarios_own_server() -> None:
    """`--pg-patch-b FILE` alone: both sides build Debian's source of the major the
    scenario pins, B with the patch; a scenario on the host's own server has no source."""
    smoke = scenario.load("smoke")  # pins 15
    only_b = sides.Spec(scenario="smoke", kernel="k", pg_patch_b=(Path("x"),))
    sides.check_conflicts(only_b)
    assert pgsides.wanted(only_b, "A", smoke) == Request("debian:15", ())
    assert pgsides.wanted(only_b, "B", smoke) == Request("debian:15", (Path("x"),))
    pinned = smoke.with_overrides(["postgres.major=18"])
    assert pgsides.wanted(only_b, "A", pinned) == Request("debian:18", ())
    given = sides.Spec(scenario="smoke", kernel="k", pg_build="a", pg_patch_b=(Path("x"),))
    assert pgsides.wanted(given, "A", smoke) == Request("a", ())
    host = smoke.with_overrides(["postgres.source=host"])
    with pytest.raises(sides.ConflictingOptions, match="--pg-patch needs a PostgreSQL source"):
        pgsides.check(only_b, host)
    assert pgsides.wanted(sides.Spec(scenario="smoke", kernel="k"), "B", host) is None
    assert not pgsides.asked(sides.Spec(scenario="smoke", kernel="k"))
    assert pgsides.asked(only_b) and pgsides.asked(given)
    with pytest.raises(sides.ConflictingOptions, match="both say which PostgreSQL"):
        sides.check_conflicts(
            sides.Spec(scenario="smoke", kernel="k", pg_build="a", pg_build_b="b")
        )


def test_a_scenario_names_a_build_by_its_key() -> None:
    smoke = scenario.load("smoke")
    named = smoke.with_overrides(["postgres.build=pg20-0123456789ab", "postgres.major=20"])
    assert named.data["postgres"]["build"] == "pg20-0123456789ab"
    with pytest.raises(ScenarioError, match=r"postgres\.build must be a build key"):
        smoke.with_overrides(["postgres.build=latest"])
    with pytest.raises(ScenarioError, match='goes with source = "image"'):
        smoke.with_overrides(["postgres.build=pg20-0123456789ab", "postgres.source=host"])


def test_the_template_of_a_build_is_its_own() -> None:
    args = (20, 10, 100, ["--no-sync"], "x86_64")
    assert template.key(*args) == template.key(*args, None)
    assert template.key(*args, "pg20-0123456789ab") != template.key(*args)
    assert template.key(*args, "pg20-0123456789ab") != template.key(*args, "pg20-ba9876543210")


def test_a_guest_runs_the_build_shared_at_its_prefix(
    builds: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = pg_repo(tmp_path)
    key, made = build.build(spec.parse(str(repo)))
    state = use_fake_vng(monkeypatch, tmp_path / "fakevng")
    root = fakeimages.installed(arch.get("x86_64"))
    scen = scenario.load("smoke").with_overrides([f"postgres.build={key}", "postgres.major=20"])
    target = registry.get("vng", "x86_64")
    target.preflight(scen)
    s = sample.take(target, sample.Boot(Kernel(fake_image(tmp_path / "k")), scen, tmp_path / "r"))
    [call] = vng_calls(state)
    argv = call["argv"]
    assert argv[argv.index("--root") + 1] == str(root)  # the root the build was made for
    ro = [argv[i + 1] for i, x in enumerate(argv) if x == "--rodir"]
    assert f"/kbisect/pg={store.install_dir(key)}" in ro
    guest = shlex.split(argv[argv.index("--exec") + 1])
    assert guest[guest.index("--pg-bindir") + 1] == "/kbisect/pg/bin"
    assert s.userland["build"]["key"] == key
    assert s.userland["build"]["postgres_sha256"] == made["postgres_sha256"]


def test_a_build_missing_from_the_cache_is_refused_before_any_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake_vng(monkeypatch, tmp_path / "fakevng")
    scen = scenario.load("smoke").with_overrides(["postgres.build=pg20-0123456789ab"])
    with pytest.raises(store.NoBuild, match=r"postgres\.build = pg20-0123456789ab: no such"):
        registry.get("vng", "x86_64").preflight(scen)


def test_compare_sides_run_their_builds_named_in_their_scenarios(
    builds: list[list[str]], tmp_path: Path
) -> None:
    repo, shas = pg_repo(tmp_path)
    patch = tmp_path / "0001-batch.patch"
    patch.write_text(BATCH)
    spec_ = sides.Spec(
        scenario="smoke", kernel="k", pg_build=f"{repo}@{shas[0]}", pg_patch_b=(patch,)
    )
    base = scenario.load("smoke")
    pgsides.check(spec_, base)
    a, b = (sides.Side(n, n, "", [], base, []) for n in ("A", "B"))
    pgsides.apply(spec_, (a, b))
    key_a, key_b = (s.scen.data["postgres"]["build"] for s in (a, b))
    assert key_a != key_b and len(builds) == 2
    assert a.scen.data["postgres"]["major"] == b.scen.data["postgres"]["major"] == 20
    assert b.sets == [f"postgres.build={key_b}", "postgres.major=20"] == b.overrides
    assert (a.label, b.label) == (
        "A, PostgreSQL 20devel",
        "B, PostgreSQL 20devel + 0001-batch.patch",
    )
    with pytest.raises(spec.BadBuildSpec):
        pgsides.check(sides.Spec(scenario="smoke", kernel="k", pg_build_b="debian:16"), base)


def test_one_kernel_on_both_sides_names_side_b_by_that_kernel(
    builds: list[list[str]], tmp_path: Path
) -> None:
    """`--base REV --pg-patch-b FILE`: B runs A's kernel, so its label is A's kernel and
    the patched server, not "B"."""
    repo, shas = pg_repo(tmp_path)
    patch = tmp_path / "0001-batch.patch"
    patch.write_text(BATCH)
    spec_ = sides.Spec(
        scenario="smoke", base="v1", pg_build=f"{repo}@{shas[0]}", pg_patch_b=(patch,)
    )
    base = scenario.load("smoke")
    a = sides.Side("A", "base v1", "", [], base, [], rev="c0ffee")
    b = sides.Side("B", "B", "", [], base, [], rev="c0ffee")
    pgsides.apply(spec_, (a, b))
    assert (a.label, b.label) == (
        "base v1, PostgreSQL 20devel",
        "base v1, PostgreSQL 20devel + 0001-batch.patch",
    )
