"""`kbisect build`: one kernel revision, from Kconfig fragments, into a cached artifact.

Source: a scratch worktree of the revision (or the current checkout with --in-place,
which is how `git bisect run` uses it). Output: an O= build dir keyed by
(tree, arch, base config, fragments) reused across revisions with ccache, and an
artifact dir per commit holding the image, .config, System.map and manifest.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect import arch as arch_mod
from kbisect import (
    atomic,
    ccache,
    clock,
    git,
    kconfig,
    options,
    paths,
    proc,
    progress,
    tree,
    worktree,
)
from kbisect.exceptions import BuildError, CommandFailed, CommandTimeout, MissingTool, UserError

BASES = ("tinyconfig", "allnoconfig", "defconfig")
BUILD_TIMEOUT_S = 4 * 3600
IDLE_TIMEOUT_S = 30 * 60
MANIFEST_VERSION = 1


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


def make_command(
    src: Path, obj: Path, arch: arch_mod.Arch, *targets: str, jobs: int = 0, cc: str | None = None
) -> list[str]:
    """The make command line for a kernel build step (pure)."""
    cmd = ["make", "-C", str(src), f"O={obj}", *arch.make_vars()]
    if cc:
        cmd.append(f"CC={cc}")
    if jobs:
        cmd.append(f"-j{jobs}")
    return [*cmd, *targets]


def build_env() -> dict[str, str]:
    """Fixed build identity, so two builds of one tree give the same image."""
    return {
        "KBUILD_BUILD_TIMESTAMP": "2025-01-01",
        "KBUILD_BUILD_USER": "kbisect",
        "KBUILD_BUILD_HOST": "kbisect",
    }


def inputs_key(req: Request, fragments: list[kconfig.Fragment]) -> str:
    base = req.base
    if base not in BASES:
        base = hashlib.sha256(Path(base).read_bytes()).hexdigest()
    text = "\n".join([req.arch.name, base, kconfig.fragments_hash(fragments)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _configure(
    req: Request, src: Path, obj: Path, fragments: list[kconfig.Fragment], log: Path
) -> list[str]:
    progress.step(f"configuring ({req.base} + {len(fragments)} fragments)")
    obj.mkdir(parents=True, exist_ok=True)
    if req.base in BASES:
        proc.run(make_command(src, obj, req.arch, req.base), log=log, env=build_env())
    else:
        shutil.copyfile(req.base, obj / ".config")
    proc.run(
        kconfig.merge_command(src, obj, [f.path for f in fragments]),
        log=log,
        cwd=obj,
        env={**build_env(), **_arch_env(req.arch)},
    )
    proc.run(make_command(src, obj, req.arch, "olddefconfig"), log=log, env=build_env())
    warnings = kconfig.verify((obj / ".config").read_text(), fragments, set(req.allow_dropped))
    for w in warnings:
        progress.warn(w)
    return warnings


def _arch_env(a: arch_mod.Arch) -> dict[str, str]:
    env = {"ARCH": a.kernel_arch}
    if a.cross_compile:
        env["CROSS_COMPILE"] = a.cross_compile
    return env


class _Progress:
    """Turns make's output into a progress line every few seconds."""

    def __init__(self) -> None:
        self.objects = 0
        self.last = time.monotonic()

    def __call__(self, line: str) -> None:
        if line.lstrip().startswith(("CC ", "AS ", "LD ", "AR ")):
            self.objects += 1
        if time.monotonic() - self.last > 15:
            self.last = time.monotonic()
            progress.step(f"compiling: {self.objects} objects so far")


def check_compiler(a: arch_mod.Arch) -> None:
    if shutil.which(a.compiler()) is None:
        raise MissingTool(
            f"{a.compiler()}: compiler for {a.name} not installed (run scripts/setup)"
        )


def _compile(req: Request, src: Path, obj: Path, log: Path) -> None:
    cc = req.arch.compiler()
    if shutil.which("ccache"):
        cc = f"ccache {cc}"
    jobs = req.jobs or os.cpu_count() or 1
    progress.step(f"compiling {req.arch.image_target} with {cc}, {jobs} jobs")
    proc.run(
        make_command(src, obj, req.arch, req.arch.image_target, jobs=jobs, cc=cc),
        log=log,
        env=build_env(),
        timeout=BUILD_TIMEOUT_S,
        idle_timeout=IDLE_TIMEOUT_S,
        on_line=_Progress(),
    )


def _tail(log: Path, n: int = 15) -> str:
    lines = log.read_text(errors="replace").splitlines()
    return "\n".join(lines[-n:])


def obj_dir(root: Path, src: Path) -> Path:
    """The O= dir for one source checkout: kbuild records the source path in every
    object's command, so one O= dir shared by two checkouts (kbisect's build worktree
    and a bisect's) would be rebuilt from scratch at every switch between them."""
    where = str(src.resolve())
    return root / f"obj-{src.name}-{hashlib.sha256(where.encode()).hexdigest()[:8]}"


def build(req: Request) -> BuildResult:
    """Build (or reuse) the artifact for req; raise BuildError when the kernel fails."""
    commit = git.rev_parse(req.tree, req.rev)
    check_compiler(req.arch)
    if req.in_place and git.is_dirty(req.tree):
        raise UserError(f"--in-place: {req.tree} has uncommitted changes; commit or stash them")
    fragments = kconfig.resolve(list(req.configs), req.arch.name, base=req.base)
    key = inputs_key(req, fragments)
    root = paths.cache_dir() / "builds" / worktree.repo_id(req.tree) / f"{req.arch.name}-{key}"
    artifact = root / commit
    if (artifact / "manifest.json").exists():
        # Built maybe with another --allow-dropped: this request must accept its .config too.
        kconfig.verify((artifact / "config").read_text(), fragments, set(req.allow_dropped))
        manifest = json.loads((artifact / "manifest.json").read_text())
        progress.step(f"reusing build of {commit[:12]}: {artifact}")
        return BuildResult(artifact, artifact / Path(req.arch.image).name, manifest, True)
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
        before = ccache.stats()
        start = time.monotonic()
        try:
            warnings = _configure(req, src, obj, fragments, log)
            _compile(req, src, obj, log)
        except (CommandFailed, CommandTimeout) as exc:
            progress.step(f"build failed; last lines of {log}:\n{_tail(log)}")
            raise BuildError(f"build of {commit[:12]} failed: {exc}") from None
        duration = time.monotonic() - start
        manifest = _manifest(
            req,
            commit,
            src,
            obj,
            fragments,
            warnings,
            duration,
            ccache.delta(before, ccache.stats()),
        )
        image = _collect(req.arch, obj, artifact)
        manifest["image_sha256"] = hashlib.sha256(image.read_bytes()).hexdigest()
        atomic.write_json(artifact / "manifest.json", manifest)
    progress.step(f"built {commit[:12]} in {duration:.0f}s: {image}")
    return BuildResult(artifact, image, manifest, False)


def _collect(a: arch_mod.Arch, obj: Path, artifact: Path) -> Path:
    image = artifact / Path(a.image).name
    shutil.copyfile(obj / a.image, image)
    shutil.copyfile(obj / ".config", artifact / "config")
    if (obj / "System.map").exists():
        shutil.copyfile(obj / "System.map", artifact / "System.map")
    return image


def _manifest(
    req: Request,
    commit: str,
    src: Path,
    obj: Path,
    fragments: list[kconfig.Fragment],
    warnings: list[str],
    duration: float,
    cache: dict[str, float],
) -> dict[str, Any]:
    config_text = (obj / ".config").read_text()
    release = proc.capture(
        make_command(src, obj, req.arch, "-s", "kernelrelease"), check=False
    ).splitlines()
    return {
        "version": MANIFEST_VERSION,
        "command": progress.reproduce_line(),
        "created": clock.utc_now(),
        "tree": str(req.tree),
        "commit": commit,
        "describe": git.describe(req.tree, commit),
        "subject": git.subject(req.tree, commit),
        "arch": req.arch.name,
        "base": req.base,
        "fragments": [{"name": f.name, "sha256": f.sha256} for f in fragments],
        "allowed_drops": warnings,
        "compiler": proc.capture([req.arch.compiler(), "--version"]).splitlines()[0],
        "duration_s": round(duration, 1),
        "ccache": cache,
        "config_hash": kconfig.config_hash(config_text),
        "kernelrelease": release[-1] if release else None,
        "in_place": req.in_place,
    }


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tree", help="kernel git tree (default: the embedded 6.12 tree)")
    parser.add_argument("--rev", default="HEAD", help="revision to build (default HEAD)")
    options.add_where(parser)
    options.add_configs(parser)
    parser.add_argument(
        "--base",
        default="tinyconfig",
        help="tinyconfig (default), allnoconfig, defconfig, or a config FILE",
    )
    parser.add_argument(
        "--allow-dropped",
        action="append",
        default=[],
        metavar="SYMBOL",
        help="accept that olddefconfig drops SYMBOL",
    )
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="build the tree's checkout itself (for `git bisect run`)",
    )
    parser.add_argument(
        "-j", "--jobs", type=options.count(0, 4096), default=0, help="make jobs (0: one per CPU)"
    )
    parser.add_argument("--json", action="store_true", help="print the manifest as JSON")


def check_base(base: str, option: str = "--base-config") -> None:
    """A base config kbisect knows, or a config file: one line and exit 2 otherwise."""
    if base not in BASES and not Path(base).is_file():
        raise UserError(f"{option} {base}: not one of {', '.join(BASES)} nor a file")


def request_from_args(args: argparse.Namespace) -> Request:
    check_base(args.base, "--base")
    allow = kconfig.allowed_symbols(args.allow_dropped)
    return Request(
        tree=tree.resolve(args.tree),
        rev=args.rev,
        arch=options.target(args).arch,
        configs=tuple(args.config),
        base=args.base,
        allow_dropped=frozenset(allow),
        in_place=args.in_place,
        jobs=args.jobs,
    )


def main(args: argparse.Namespace) -> int:
    result = build(request_from_args(args))
    if args.json:
        print(json.dumps(result.manifest, indent=2, sort_keys=True))
    else:
        print(result.image)
    return 0
