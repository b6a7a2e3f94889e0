"""`kbisect build`: one kernel revision, from Kconfig fragments, into a cached artifact.

Source: a scratch worktree of the revision (or the current checkout with --in-place,
which is how `git bisect run` uses it), with --patch files applied on top as commits in
kbisect's own repository (source/patches.py; then never in place). Output: an O= build dir keyed by
(tree, arch, base config, fragments) reused across revisions with ccache, and an
artifact dir per commit holding the image, .config, System.map and manifest.json.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbisect.core import arch as arch_mod
from kbisect.core import atomic, paths, progress, reading
from kbisect.core.exceptions import BuildError, CommandFailed, CommandTimeout, UserError
from kbisect.kernel import archdeps, kconfig, make
from kbisect.kernel import manifest as buildmanifest
from kbisect.kernel.config import inputs_key, make_config
from kbisect.source import git, patches, scratch, worktree
from kbisect.source.patches import Patch


@dataclass(frozen=True)
class BuildResult:
    artifact_dir: Path
    image: Path
    manifest: dict[str, Any]
    cached: bool


@dataclass(frozen=True)
class Request:
    tree: Path
    rev: str
    arch: arch_mod.Arch
    configs: tuple[str, ...] = ()
    base: str = "tinyconfig"
    allow_dropped: frozenset[str] = frozenset()
    in_place: bool = False
    jobs: int = 0
    patches: tuple[Patch, ...] = ()  # applied in order on top of rev


OBJ_PREFIX = ".kbisect-o-"  # O= dirs inside kbisect's own checkouts (worktree.checkout keeps them)


def obj_dir(root: Path, src: Path) -> Path:
    """The O= dir for one source checkout and one set of build inputs (root).

    In a checkout of kbisect's own (a scratch worktree in the cache) it is a direct
    subdirectory of the checkout: kbuild then names every source file relative to it
    (`srctree := ..`), so the compile commands are the same in every checkout and ccache
    hits across them (a bisect's first build after a compare's is warm). Elsewhere (a
    user's tree built --in-place, never written into) it lives in the cache, one per
    checkout: kbuild records the absolute source path there, and one O= dir shared by two
    checkouts would be rebuilt from scratch at every switch between them."""
    cache = paths.cache_dir().resolve()
    if src.resolve().is_relative_to(cache):
        return src / f"{OBJ_PREFIX}{root.name}"
    where = str(src.resolve())
    return root / f"obj-{scratch.slug(src.name)}-{hashlib.sha256(where.encode()).hexdigest()[:8]}"


def build(req: Request) -> BuildResult:
    """Build (or reuse) the artifact for req; raise BuildError when the kernel fails."""
    base_commit = scratch.rev_parse(req.tree, req.rev)
    commit = patches.apply(req.tree, base_commit, req.patches)
    if req.patches:
        req = replace(req, in_place=False)  # the patched commit is kbisect's: built in its slot
    make.check_compiler(req.arch)
    make.check_dir(paths.cache_dir(), "the cache")
    if req.in_place:
        make.check_dir(req.tree, "--in-place: the tree")
    if req.in_place and git.is_dirty(req.tree):
        raise UserError(f"--in-place: {req.tree} has uncommitted changes; commit or stash them")
    fragments = kconfig.resolve(list(req.configs), req.arch.name, base=req.base)
    # A patched commit lives in kbisect's own repository (which also sees the tree's objects).
    holder = worktree.scratch_repo(req.tree) if req.patches else req.tree
    archdeps.check(holder, commit, req.arch, fragments, req.allow_dropped)
    key = inputs_key(req.arch, req.base, fragments)
    root = paths.cache_dir() / "builds" / worktree.repo_id(req.tree) / f"{req.arch.name}-{key}"
    artifact = root / commit
    if (artifact / "manifest.json").exists():
        # Built maybe with another --allow-dropped: this request must accept its .config too.
        recover = f"remove {artifact} to build that commit again"
        config = reading.text(artifact / "config", recover)
        kconfig.verify(config, fragments, set(req.allow_dropped))
        manifest = buildmanifest.read(artifact / "manifest.json", recover)
        progress.step(f"reusing build of {commit[:12]}: {artifact}")
        return BuildResult(artifact, artifact / Path(req.arch.image).name, manifest, True)
    paths.check(paths.cache_dir(), paths.PER_BUILD, "the cache")
    # The worktree slot is shared by every build of this tree (any arch, any fragments).
    slot = worktree.path_for(req.tree, "build")
    obj = obj_dir(root, req.tree if req.in_place else slot)
    with worktree.locked(root), worktree.locked(slot):
        if req.in_place:
            if git.rev_parse(req.tree, "HEAD") != commit:
                raise UserError(f"--in-place: {req.tree} is not at {req.rev}")
            src = req.tree
        else:
            progress.step(f"checking out {commit[:12]} in a scratch worktree")
            src = worktree.checkout(req.tree, commit)
        artifact.mkdir(parents=True, exist_ok=True)
        log = artifact / "build.log"
        log.write_text(progress.log_header())
        before = make.ccache_stats()
        start = time.monotonic()
        try:
            warnings = make_config(req.arch, req.base, src, obj, fragments, log, req.allow_dropped)
            make.compile_image(req.arch, req.jobs, src, obj, log, root)
        except (CommandFailed, CommandTimeout) as exc:
            progress.step(f"build failed; last lines of {log}:\n{make.tail(log)}")
            raise BuildError(f"build of {commit[:12]} failed: {exc}") from None
        duration = time.monotonic() - start
        manifest = buildmanifest.manifest(
            tree=req.tree,
            arch=req.arch,
            base=req.base,
            in_place=req.in_place,
            commit=commit,
            src=src,
            obj=obj,
            fragments=fragments,
            warnings=warnings,
            duration=duration,
            cache=make.ccache_delta(before, make.ccache_stats()),
        )
        image = buildmanifest.collect(req.arch, obj, artifact)
        if req.patches:
            manifest["patches"] = patches.describe(req.tree, base_commit, req.patches, commit)
        manifest["image_sha256"] = hashlib.sha256(image.read_bytes()).hexdigest()
        atomic.write_json(artifact / "manifest.json", manifest)
    progress.step(f"built {commit[:12]} in {duration:.0f}s: {image}")
    return BuildResult(artifact, image, manifest, False)
