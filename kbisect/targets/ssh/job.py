"""What one boot on a machine needs besides the machine itself: the harness as one tar
file and its command line there, a distro kernel's initramfs, what the switched kernel
must be (release, build id)."""

from __future__ import annotations

import functools
import shlex
import tarfile
from pathlib import Path

from kbisect.core import paths
from kbisect.kernel import kimage
from kbisect.targets.base import Kernel
from kbisect.targets.ssh import config


def harness_tar(dest: Path) -> Path:
    """The harness (no caches) as one tar file to copy over."""
    with tarfile.open(dest, "w") as tar:
        tar.add(paths.harness_dir(), "harness", filter=_no_cache)
    return dest


def _no_cache(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if "__pycache__" in info.name else info


def harness_command(m: config.Machine, run_dir: str, major: int) -> str:
    """Unpack the harness (`<run_dir>.tar`, beside `<run_dir>.json`: the scenario) in the
    boot's dir on the machine and run it there: one ssh round trip."""
    args = [
        "python3",
        "-u",
        f"{run_dir}/harness/guest.py",
        "--scenario-json",
        f"{run_dir}/scenario.json",
        "--out",
        f"{run_dir}/out",
        "--template-dir",
        f"{m.workdir}/pg-templates",
        "--workdir",
        m.pgdata,
    ]
    if m.pg_bindir != config.PG_BINDIR:
        args += ["--pg-bindir", m.pg_bindir.format(major=major)]
    d = shlex.quote(run_dir)
    unpack = f"mkdir -p {d}/out && tar -xf {d}.tar -C {d} && mv {d}.json {d}/scenario.json"
    return f"{m.sudo}sh -c {shlex.quote(unpack)} && exec {m.sudo}{shlex.join(args)}"


def initrd(kernel: Kernel) -> Path | None:
    """An initramfs next to the image (`initrd.img`): a distro kernel needs its own; the
    kernels kbisect builds have their drivers built in and none."""
    path = kernel.image.parent / "initrd.img"
    return path if path.is_file() else None


def expected(kernel: Kernel) -> dict[str, str | None]:
    """What the machine must run after switching to `kernel`: its release and build id
    (read once per image file: a distro kernel's xz payload takes seconds to unpack)."""
    stat = kernel.image.stat()
    release = (kernel.manifest or {}).get("kernelrelease")
    return dict(_expected(kernel.image, stat.st_size, stat.st_mtime_ns, release))


@functools.lru_cache(maxsize=16)
def _expected(
    image: Path, size: int, mtime_ns: int, release: str | None
) -> tuple[tuple[str, str | None], ...]:
    release = release or kimage.release(image.read_bytes()[:65536])
    return (("release", release), ("build_id", kimage.build_id(image)))


def script_env(m: config.Machine, image: str, cmdline: str, ramdisk: str | None) -> dict[str, str]:
    """What a switch_script is told: where the machine is, what to boot, with what."""
    return {
        "KBISECT_HOST": m.host,
        "KBISECT_PORT": str(m.port),
        "KBISECT_USER": m.user,
        "KBISECT_KEY": str(m.key or ""),
        "KBISECT_IMAGE": image,
        "KBISECT_INITRD": ramdisk or "",
        "KBISECT_CMDLINE": cmdline,
    }
