"""make for a kernel build: the command lines (pure), the fixed build identity, and the
compile step with its progress lines, and ccache's counters around it."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from kbisect.core import arch as arch_mod
from kbisect.core import atomic, proc, progress
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
    """Counts the objects in make's output, for the status line: done of the total when
    one is known (`total`, from the last cold build of these inputs), and the time left
    at the rate so far."""

    def __init__(self, total: int | None) -> None:
        self.objects = 0
        self.total = total
        self.start = time.monotonic()

    def __call__(self, line: str) -> None:
        if not line.lstrip().startswith(("CC ", "AS ", "LD ", "AR ")):
            return
        self.objects += 1
        n, total = self.objects, self.total
        if total is None or n > total:
            progress.status(f"compiling: {n:,} objects so far", progress.EVERY_S)
            return
        left = progress.time_left(time.monotonic() - self.start, n, total - n)
        progress.status(
            f"compiling: {n:,}/{total:,} objects{left and ', '}{left}", progress.EVERY_S
        )


OBJECTS = "objects"  # in a build root: the object count of its first cold build


def expected_objects(root: Path) -> int | None:
    """The objects a cold build of root's inputs compiles, as the first one counted them
    (None when none was counted, or the file is not a count: it is only a hint)."""
    try:
        n = int((root / OBJECTS).read_text().strip())
    except (OSError, ValueError):
        return None
    return n if n > 0 else None


def check_compiler(a: arch_mod.Arch) -> None:
    if shutil.which(a.compiler()) is None:
        raise MissingTool(
            f"{a.compiler()}: compiler for {a.name} not installed (run scripts/setup)"
        )


def compile_image(a: arch_mod.Arch, jobs: int, src: Path, obj: Path, log: Path, root: Path) -> None:
    """make the arch's image target (ccache when installed; jobs 0: one per CPU). A cold
    build (nothing built in obj yet) counts its objects of the total the first cold build
    of root's inputs recorded in root, and records its count there when none is."""
    cc = a.compiler()
    if shutil.which("ccache"):
        cc = f"ccache {cc}"
    jobs = jobs or os.cpu_count() or 1
    progress.step(f"compiling {a.image_target} with {cc}, {jobs} jobs")
    cold = not (obj / "vmlinux").exists()
    counted = _Progress(expected_objects(root) if cold else None)
    try:
        proc.run(
            make_command(src, obj, a, a.image_target, jobs=jobs, cc=cc),
            log=log,
            env=build_env(),
            timeout=BUILD_TIMEOUT_S,
            idle_timeout=IDLE_TIMEOUT_S,
            on_line=counted,
        )
    finally:
        progress.done()
    if cold and counted.objects and expected_objects(root) is None:
        atomic.write_text(root / OBJECTS, f"{counted.objects}\n")


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
