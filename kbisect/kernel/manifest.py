"""What a build leaves in its artifact dir: the image, config, System.map, and
manifest.json (the inputs, the commit, the compiler, the time, ccache's hit rate), and
that manifest read back (`read`: beside a --kernel image, or a build reused from the
cache), checked as the samples that record it will be."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from kbisect.core import arch as arch_mod
from kbisect.core import clock, proc, progress, reading
from kbisect.kernel import kconfig
from kbisect.kernel.make import make_command
from kbisect.source import git, scratch

MANIFEST_VERSION = 1
# the fields a sample copies into its own `kernel` (measure/schemas/sample.json's patterns)
HEX = {
    "commit": (re.compile(r"[0-9a-f]{7,64}"), "a commit id (7 to 64 hex digits)"),
    "config_hash": (re.compile(r"[0-9a-f]{64}"), "a sha256 (64 hex digits)"),
}
NAMES = ("arch", "kernelrelease", "subject", "describe")


def read(path: Path, recover: str) -> dict[str, Any]:
    """A build's manifest.json, each field a boot reads or a sample records of its type
    (any may be absent or null: an image from elsewhere may carry a partial one), no NaN;
    CorruptFile, one line naming the field and ending with `recover`."""
    data = reading.json_table(path, recover)
    if not reading.finite(data):
        reading.fail(path, "holds NaN or Infinity, which no build writes", recover)
    f = reading.own_fields(data, path, recover)
    for key in NAMES:
        f.string(key, None)
    for key, (pattern, what) in HEX.items():
        value = f.string(key, None)
        if value is not None and not pattern.fullmatch(value):
            f.fail(key, f"must be {what}, got {reading.got(value)}")
    return data


def collect(a: arch_mod.Arch, obj: Path, artifact: Path) -> Path:
    """Copy the image, .config and System.map out of the O= dir; the image's path."""
    image = artifact / Path(a.image).name
    shutil.copyfile(obj / a.image, image)
    shutil.copyfile(obj / ".config", artifact / "config")
    if (obj / "System.map").exists():
        shutil.copyfile(obj / "System.map", artifact / "System.map")
    return image


def manifest(
    *,
    tree: Path,
    arch: arch_mod.Arch,
    base: str,
    in_place: bool,
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
        make_command(src, obj, arch, "-s", "kernelrelease"), check=False
    ).splitlines()
    return {
        "version": MANIFEST_VERSION,
        "command": progress.reproduce_line(),
        "created": clock.utc_now(),
        "tree": str(tree),
        "commit": commit,
        "describe": git.describe(scratch.reader(tree, commit), commit),
        "subject": git.subject(scratch.reader(tree, commit), commit),
        "arch": arch.name,
        "base": base,
        "fragments": [{"name": f.name, "sha256": f.sha256} for f in fragments],
        "allowed_drops": warnings,
        "compiler": proc.capture([arch.compiler(), "--version"]).splitlines()[0],
        "duration_s": round(duration, 1),
        "ccache": cache,
        "config_hash": kconfig.config_hash(config_text),
        "kernelrelease": release[-1] if release else None,
        "in_place": in_place,
    }
