"""make for a kernel build: the command lines (pure), the fixed build identity, and the
compile step with its progress lines, and ccache's counters around it."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from kbisect.core import arch as arch_mod
from kbisect.core import proc, progress
from kbisect.core.exceptions import MissingTool, UserError

BUILD_TIMEOUT_S = 4 * 3600
IDLE_TIMEOUT_S = 30 * 60


class UnbuildablePath(UserError):
    """The kernel's make cannot build under this path (a space or a colon in it)."""


def check_dir(path: Path, what: str) -> None:
    """The kernel's Makefile refuses a source or output directory whose absolute path has
    whitespace or a colon ("cannot contain spaces or colons"): one line now, before any
    work, instead of a failed build per commit."""
    where = str(path.absolute())
    if any(c.isspace() or c == ":" for c in where):
        raise UnbuildablePath(
            f"{what} {where!r}: the kernel's make cannot build under a path with a space "
            "or a colon; choose another (KBISECT_CACHE sets the cache's)"
        )


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


def arch_env(a: arch_mod.Arch) -> dict[str, str]:
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


def compile_image(a: arch_mod.Arch, jobs: int, src: Path, obj: Path, log: Path) -> None:
    """make the arch's image target (ccache when installed; jobs 0: one per CPU)."""
    cc = a.compiler()
    if shutil.which("ccache"):
        cc = f"ccache {cc}"
    jobs = jobs or os.cpu_count() or 1
    progress.step(f"compiling {a.image_target} with {cc}, {jobs} jobs")
    proc.run(
        make_command(src, obj, a, a.image_target, jobs=jobs, cc=cc),
        log=log,
        env=build_env(),
        timeout=BUILD_TIMEOUT_S,
        idle_timeout=IDLE_TIMEOUT_S,
        on_line=_Progress(),
    )


def tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-15:])


CCACHE_KEYS = ("direct_cache_hit", "preprocessed_cache_hit", "cache_miss")


def ccache_stats() -> dict[str, int]:
    """ccache's counters from `ccache --print-stats` (empty without ccache), to report a
    build's hit rate."""
    if shutil.which("ccache") is None:
        return {}
    out = proc.capture(["ccache", "--print-stats"], check=False)
    counters: dict[str, int] = {}
    for line in out.splitlines():
        key, _, value = line.partition("\t")
        if key in CCACHE_KEYS and value.strip().isdigit():
            counters[key] = int(value)
    return counters


def ccache_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """Hits, misses and hit rate between two snapshots."""
    hits = sum(after.get(k, 0) - before.get(k, 0) for k in CCACHE_KEYS[:2])
    misses = after.get("cache_miss", 0) - before.get("cache_miss", 0)
    total = hits + misses
    return {"hits": hits, "misses": misses, "hit_rate": round(hits / total, 3) if total else 0.0}
