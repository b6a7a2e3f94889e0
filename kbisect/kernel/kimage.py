"""Facts read from a kernel image file: its arch, its release string, and the GNU build
id of the vmlinux inside it (the same note the running kernel shows in /sys/kernel/notes).

An x86 bzImage carries its version string in the setup header and its vmlinux, stripped
but with its notes, as the compressed payload (boot protocol >= 2.08); an arm64 Image is
the raw vmlinux binary, whose notes are found by scanning for the GNU note.
"""

from __future__ import annotations

import bz2
import lzma
import re
import struct
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

from kbisect.core import arch as arch_mod
from kbisect.core import proc

NT_GNU_BUILD_ID = 3
PT_NOTE = 4
ARM64_MAGIC = b"ARM\x64"
GNU_NOTE = re.compile(rb"\x04\x00\x00\x00(.)\x00\x00\x00\x03\x00\x00\x00GNU\x00", re.S)
MAGICS = {  # payload compression: first bytes
    b"\x1f\x8b": "gzip",
    b"\xfd7zXZ\x00": "xz",
    b"\x5d\x00\x00": "lzma",
    b"BZh": "bzip2",
    b"\x28\xb5\x2f\xfd": "zstd",
}


def is_bzimage(data: bytes) -> bool:
    """The x86 boot protocol's "HdrS" in the setup header."""
    return len(data) > 0x206 and data[0x202:0x206] == b"HdrS"


def is_arm64_image(data: bytes) -> bool:
    """The magic of the arm64 Image header."""
    return len(data) > 0x3C and data[0x38:0x3C] == ARM64_MAGIC


# image_format (core/arch/*.toml) -> how a file of that format is recognized
FORMATS: dict[str, Callable[[bytes], bool]] = {
    "bzimage": is_bzimage,
    "arm64-image": is_arm64_image,
}


def arch(data: bytes) -> str | None:
    """The arch whose image format the file has (bzImage: x86_64), else None."""
    return next((a.name for a in arch_mod.known() if FORMATS[a.image_format](data)), None)


def release(data: bytes) -> str | None:
    """The release a bzImage announces (`6.1.0-27-amd64` of its version string)."""
    if not is_bzimage(data):
        return None
    (pointer,) = struct.unpack_from("<H", data, 0x20E)
    start = pointer + 0x200
    end = data.find(b"\0", start)
    words = data[start:end].decode(errors="replace").split() if 0x200 < start < end else []
    return words[0] if words else None


def notes_build_id(data: bytes) -> str | None:
    """The GNU build id among ELF notes laid end to end (/sys/kernel/notes, PT_NOTE)."""
    pos = 0
    while pos + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from("<III", data, pos)
        name_at = pos + 12
        desc_at = name_at + ((namesz + 3) & ~3)
        if desc_at + descsz > len(data):
            return None
        if kind == NT_GNU_BUILD_ID and data[name_at : name_at + namesz] == b"GNU\0":
            return data[desc_at : desc_at + descsz].hex()
        pos = desc_at + ((descsz + 3) & ~3)
    return None


def elf_build_id(data: bytes) -> str | None:
    """The GNU build id of an ELF64 little-endian file (vmlinux), from its PT_NOTEs."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        kind, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if kind == PT_NOTE:
            found = notes_build_id(data[offset : offset + filesz])
            if found:
                return found
    return None


def scan_build_id(data: bytes) -> str | None:
    """A GNU build-id note found anywhere in a raw binary (an arm64 Image)."""
    m = GNU_NOTE.search(data)
    if m is None:
        return None
    size = m.group(1)[0]
    start = m.end()
    return data[start : start + size].hex()


def payload(data: bytes) -> bytes:
    """A bzImage's compressed vmlinux (boot protocol >= 2.08)."""
    setup_sects = data[0x1F1] or 4
    offset, length = struct.unpack_from("<II", data, 0x248)
    start = (setup_sects + 1) * 512 + offset
    return data[start : start + length]


def decompress(blob: bytes) -> bytes | None:
    kind = next((k for m, k in MAGICS.items() if blob.startswith(m)), None)
    if kind == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(blob)
    if kind in ("xz", "lzma"):
        fmt = lzma.FORMAT_XZ if kind == "xz" else lzma.FORMAT_ALONE
        return lzma.LZMADecompressor(format=fmt).decompress(blob)
    if kind == "bzip2":
        return bz2.BZ2Decompressor().decompress(blob)
    if kind == "zstd":
        return _zstd(blob)
    return None


def _zstd(blob: bytes) -> bytes:
    with tempfile.TemporaryDirectory(prefix="kbisect-kimage-") as tmp:
        src, out = Path(tmp) / "payload.zst", Path(tmp) / "vmlinux"
        src.write_bytes(blob)
        proc.run(["zstd", "-q", "-d", "-o", str(out), str(src)])
        return out.read_bytes()


def build_id(image: Path) -> str | None:
    """The build id of the vmlinux a kernel image holds (None if it cannot be found).
    A `vmlinux` next to the image (a build's artifact dir) is read first."""
    vmlinux = image.parent / "vmlinux"
    if vmlinux.is_file():
        found = elf_build_id(vmlinux.read_bytes())
        if found:
            return found
    data = image.read_bytes()
    if is_bzimage(data):
        inner = decompress(payload(data))
        return elf_build_id(inner) if inner else None
    return elf_build_id(data) or scan_build_id(data)
