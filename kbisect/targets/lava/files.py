"""What a LAVA job downloads, made on this host and put where the lab fetches it.

- the ramdisk (per boot, ~1 MB): busybox from the scenario's root fs, an init that mounts
  the root fs (the first virtio disk) at /mnt and gives a shell on the console (PROMPT),
  the harness, the boot's scenario.json and run.sh, the test LAVA runs from that shell;
- the root fs: the scenario's (vng/rootfs.py, the one vng guests boot) as an ext4 image,
  made once per root into the cache;
- the kernel: the build's image as it is.

`artifacts` unset (a local dispatcher): the files' own file:// URLs. Else each file is
named by its content's hash and the URL is the base plus that name; `upload` (sh -c)
puts it there, or, for a file:// base, it is copied into that directory.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shlex
import shutil
import stat
from pathlib import Path

from kbisect.core import paths, proc, progress
from kbisect.targets.lava import job
from kbisect.targets.lava.config import Lab

GUEST = "/kbisect"
INIT = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t ext4 /dev/vda /mnt || echo "kbisect-lava: no root fs on /dev/vda"
for d in proc sys dev; do mount --bind /$d /mnt/$d; done
rm -rf /mnt{GUEST}/harness && cp -r {GUEST}/harness /mnt{GUEST}/ && mkdir -p /mnt{GUEST}/out
cp {GUEST}/scenario.json /mnt{GUEST}/out/
echo "{job.READY}"
export PS1='{job.PROMPT}'
exec setsid cttyhack sh
"""
# The test: the harness on the root fs, then its result in the log and the tps as the
# measurement (the mean of the measured runs, as a sample's tps is).
REPORT = (
    "import base64, json; r = json.load(open('/kbisect/out/guest-result.json')); "
    "t = [x['tps'] for x in r.get('runs', []) if not x.get('warmup')]; "
    "b = base64.b64encode(json.dumps(r).encode()).decode(); "
    f"[print('{job.RESULT}' + b[i:i + 512]) for i in range(0, len(b), 512)]; "
    "r.get('status') == 'ok' and t and open('/kbisect/out/tps', 'w').write(str(sum(t) / len(t)))"
)
RUN = f"""chroot /mnt python3 -u {GUEST}/harness/guest.py \\
  --scenario-json {GUEST}/out/scenario.json --out {GUEST}/out --template-dir {GUEST}/templates
chroot /mnt python3 -c "{REPORT}"
if [ -s /mnt{GUEST}/out/tps ]; then
  lava-test-case tps --result pass --measurement "$(cat /mnt{GUEST}/out/tps)" --units tps
else
  lava-test-case tps --result fail
fi
"""
DIRS = ("bin", "dev", "mnt", "proc", "sys", "tmp", "kbisect")


def _entry(out: io.BytesIO, ino: int, name: str, mode: int, data: bytes = b"") -> None:
    """One cpio "newc" record (the kernel's initramfs format)."""
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0]
    out.write(b"070701" + "".join(f"{f:08X}" for f in fields).encode())
    out.write(name.encode() + b"\0")
    out.write(b"\0" * (-(110 + len(name) + 1) % 4))
    out.write(data + b"\0" * (-len(data) % 4))


def ramdisk(dest: Path, busybox: Path, scenario: Path) -> Path:
    """The boot's ramdisk, gzipped cpio, at `dest`."""
    out = io.BytesIO()
    files: list[tuple[str, int, bytes]] = [(d, stat.S_IFDIR | 0o755, b"") for d in DIRS]
    files += [
        ("init", stat.S_IFREG | 0o755, INIT.encode()),
        ("bin/busybox", stat.S_IFREG | 0o755, busybox.read_bytes()),
        ("kbisect/scenario.json", stat.S_IFREG | 0o644, scenario.read_bytes()),
        ("kbisect/run.sh", stat.S_IFREG | 0o755, RUN.encode()),
    ]
    harness = paths.harness_dir()
    for path in sorted(harness.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        name = f"kbisect/harness/{path.relative_to(harness)}"
        is_dir = path.is_dir()
        mode = stat.S_IFDIR | 0o755 if is_dir else stat.S_IFREG | 0o644
        files.append((name, mode, b"" if is_dir else path.read_bytes()))
    for ino, (name, mode, data) in enumerate(files, start=1):
        _entry(out, ino, name, mode, data)
    _entry(out, 0, "TRAILER!!!", 0)
    dest.write_bytes(gzip.compress(out.getvalue(), compresslevel=1, mtime=0))
    return dest


def _size_mb(root: Path) -> int:
    """Room for the tree and the harness's writes (templates, results): 1.5x plus 256 MB."""
    total = sum(p.lstat().st_size for p in root.rglob("*"))
    return int(total * 1.5 / 2**20) + 256


def rootfs(root: Path) -> Path:
    """The root fs image of `root` (vng/rootfs.py's tree), made once into the cache."""
    image = paths.cache_dir() / "lava" / f"{root.parent.name}.ext4"
    if image.is_file():
        return image
    image.parent.mkdir(parents=True, exist_ok=True)
    scratch = image.with_name(f".{image.name}.{os.getpid()}")
    progress.step(f"making the LAVA root fs image {image} from {root}")
    size = f"{_size_mb(root)}M"
    proc.run(["mkfs.ext4", "-q", "-F", "-L", "kbisect-root", "-d", root, scratch, size])
    scratch.rename(image)
    return image


def url(lab: Lab, path: Path, published: dict[Path, str]) -> str:
    """Where the lab fetches `path`: put there now (once per file and command)."""
    if lab.artifacts is None:
        return path.resolve().as_uri()
    if path in published:
        return published[path]
    with path.open("rb") as f:
        name = f"{hashlib.file_digest(f, 'sha256').hexdigest()[:16]}-{path.name}"
    base = lab.artifacts.rstrip("/")
    if lab.upload is not None:
        command = lab.upload.replace("{path}", shlex.quote(str(path)))
        proc.run(["sh", "-c", command.replace("{name}", shlex.quote(name))], timeout=3600)
    elif base.startswith("file://"):
        where = Path(base.removeprefix("file://")) / name
        where.parent.mkdir(parents=True, exist_ok=True)
        if not where.exists():
            shutil.copyfile(path, where)
    published[path] = f"{base}/{name}"
    return published[path]
