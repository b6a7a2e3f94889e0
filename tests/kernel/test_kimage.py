"""Facts read from kernel images: arch, release, build id (ELF notes, bzImage payload)."""

from __future__ import annotations

import gzip
import lzma
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from kbisect.kernel import kimage

BUILD_ID = bytes.fromhex("eb4fbcd037e7253717950bf2b93bd5566f47c56f")


def pad(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def note(name: bytes, kind: int, desc: bytes) -> bytes:
    return struct.pack("<III", len(name), len(desc), kind) + pad(name) + pad(desc)


NOTES = note(b"Xen\0", 6, b"linux\0") + note(b"GNU\0", 3, BUILD_ID) + note(b"Linux\0", 0x101, b"\1")


def elf(notes: bytes) -> bytes:
    """An ELF64 LE file with one PT_LOAD and one PT_NOTE holding `notes`."""
    phoff, phnum, phentsize = 64, 2, 56
    notes_at = phoff + phnum * phentsize
    header = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header += struct.pack(
        "<HHIQQQIHHHHHH", 2, 62, 1, 0, phoff, 0, 0, 64, phentsize, phnum, 64, 0, 0
    )
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, notes_at, notes_at, 4096)
    pnote = struct.pack("<IIQQQQQQ", 4, 4, notes_at, 0, 0, len(notes), len(notes), 4)
    return header + load + pnote + notes


def bzimage(payload: bytes, version: str = "6.12.0-kb (kbisect@kbisect) #1 SMP") -> bytes:
    """A bzImage-shaped file: setup header, version string, compressed payload."""
    setup_sects = 3
    data = bytearray((setup_sects + 1) * 512)
    data[0x1F1] = setup_sects
    data[0x202:0x206] = b"HdrS"
    version_at = 0x400
    data[version_at : version_at + len(version) + 1] = version.encode() + b"\0"
    struct.pack_into("<H", data, 0x20E, version_at - 0x200)
    struct.pack_into("<II", data, 0x248, 0x40, len(payload))
    return bytes(data) + b"\0" * 0x40 + payload + b"\0" * 16


def test_notes_build_id():
    assert kimage.notes_build_id(NOTES) == BUILD_ID.hex()
    assert kimage.notes_build_id(note(b"Xen\0", 6, b"x")) is None
    assert kimage.notes_build_id(NOTES[:30]) is None  # cut short: no crash


def test_elf_build_id():
    assert kimage.elf_build_id(elf(NOTES)) == BUILD_ID.hex()
    assert kimage.elf_build_id(elf(note(b"Xen\0", 6, b"x"))) is None
    assert kimage.elf_build_id(b"MZ not an elf") is None


@pytest.mark.parametrize("pack", [gzip.compress, lzma.compress])
def test_bzimage_facts(tmp_path, pack):
    image = tmp_path / "bzImage"
    image.write_bytes(bzimage(pack(elf(NOTES))))
    data = image.read_bytes()
    assert kimage.arch(data) == "x86_64"
    assert kimage.release(data) == "6.12.0-kb"
    assert kimage.build_id(image) == BUILD_ID.hex()


def test_vmlinux_next_to_the_image_wins(tmp_path):
    other = bytes(reversed(BUILD_ID))
    (tmp_path / "bzImage").write_bytes(bzimage(gzip.compress(elf(NOTES))))
    (tmp_path / "vmlinux").write_bytes(elf(note(b"GNU\0", 3, other)))
    assert kimage.build_id(tmp_path / "bzImage") == other.hex()


def test_arm64_image(tmp_path):
    data = bytearray(0x1000)
    data[0x38:0x3C] = b"ARM\x64"
    data[0x800 : 0x800 + len(NOTES)] = NOTES
    image = tmp_path / "Image"
    image.write_bytes(bytes(data))
    assert kimage.arch(bytes(data)) == "arm64"
    assert kimage.release(bytes(data)) is None
    assert kimage.build_id(image) == BUILD_ID.hex()


def test_unknown_image(tmp_path):
    assert kimage.arch(b"\0" * 4096) is None
    assert kimage.decompress(b"plain") is None


@pytest.mark.real
@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("readelf") is None, reason="gcc")
def test_build_id_agrees_with_readelf(tmp_path):
    src = tmp_path / "x.c"
    src.write_text("int main(void) { return 0; }\n")
    binary = tmp_path / "x"
    subprocess.run(["gcc", "-Wl,--build-id=sha1", "-o", str(binary), str(src)], check=True)
    out = subprocess.run(["readelf", "-n", str(binary)], capture_output=True, text=True).stdout
    want = next(ln.split(":")[1].strip() for ln in out.splitlines() if "Build ID" in ln)
    assert kimage.elf_build_id(Path(binary).read_bytes()) == want
