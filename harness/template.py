"""The initialized-database template: a tar of PGDATA right after initdb, `pgbench -i`,
CHECKPOINT and a clean shutdown, so a boot restores it instead of running `pgbench -i`.

Stored in the template dir as `<key>.tar.zst` (zstd when installed) or `<key>.tar.gz`,
written to a temp file and renamed, so a reader never sees half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from harness import proc
from harness.proc import Account, HarnessError

FORMAT = 1  # bump when what goes into a template changes
SUFFIXES = (".tar.zst", ".tar.gz")
TOOL_PATH = "/usr/bin:/bin"


def key(
    major: int,
    scale: int,
    fillfactor: int,
    initdb_args: list[str],
    machine: str,
    build: str | None = None,
) -> str:
    """Names the template: PG major, scale, fillfactor, initdb options, CPU architecture,
    and the PostgreSQL build that made it, if one did (a development build's catalog can
    change between commits of one major)."""
    parts: dict[str, object] = {"format": FORMAT, "initdb": initdb_args}
    if build is not None:
        parts["build"] = build
    ident = json.dumps(parts, sort_keys=True)
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    return f"pg{major}-{machine}-s{scale}-ff{fillfactor}-{digest}"


def find(template_dir: Path, name: str) -> Path | None:
    for suffix in SUFFIXES:
        path = template_dir / f"{name}{suffix}"
        if path.is_file():
            return path
    return None


def _add(tar: tarfile.TarFile, pgdata: Path) -> None:
    tar.add(str(pgdata), arcname=".")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(pgdata: Path, tmp: Path, zstd: str | None) -> None:
    if zstd is None:
        with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
            _add(tar, pgdata)
        return
    with tmp.open("wb") as out:
        filt = proc.pipe([zstd, "-q", "-1", "-T0", "-c"], stdin=subprocess.PIPE, stdout=out)
        assert filt.stdin is not None
        with tarfile.open(fileobj=filt.stdin, mode="w|") as tar:
            _add(tar, pgdata)
        filt.stdin.close()
        if filt.wait() != 0:
            raise HarnessError(f"zstd exited {filt.returncode} while saving the template")


def save(pgdata: Path, template_dir: Path, name: str) -> Path:
    """Archive a cleanly shut down PGDATA as the template `name`; returns its path."""
    zstd = shutil.which("zstd", path=TOOL_PATH)
    final = template_dir / f"{name}{SUFFIXES[0] if zstd else SUFFIXES[1]}"
    try:
        template_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=template_dir, prefix=f".{final.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as exc:
        raise HarnessError(f"cannot save template in {template_dir}: {exc}") from exc
    tmp = Path(tmp_name)
    try:
        _write(pgdata, tmp, zstd)
        _fsync(tmp)
        tmp.chmod(0o644)
        os.replace(tmp, final)
        _fsync(template_dir)
    except OSError as exc:
        raise HarnessError(f"cannot save template {final}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return final


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    # Our own archive: trusted. Python >= 3.11.4 takes a filter; Debian 12 has 3.11.2.
    if hasattr(tarfile, "fully_trusted_filter"):
        tar.extractall(dest, filter="fully_trusted")
    else:
        tar.extractall(dest)


def chown_tree(root: Path, account: Account) -> None:
    chown = shutil.which("chown", path=TOOL_PATH)
    if chown is not None:  # one process: a Python walk is slow under TCG
        done = proc.run([chown, "-R", f"{account.uid}:{account.gid}", str(root)], timeout=600)
        if done.returncode != 0:
            why = proc.last_error_line(done.output)
            raise HarnessError(f"chown -R {root} exited {done.returncode}: {why}")
        return
    os.chown(root, account.uid, account.gid)
    for parent, dirs, files in os.walk(root):
        for entry in (*dirs, *files):
            os.lchown(os.path.join(parent, entry), account.uid, account.gid)


def restore(archive: Path, pgdata: Path, account: Account | None) -> None:
    """Unpack the template into an empty `pgdata`, owned by the PostgreSQL account.

    GNU tar when the guest has it (Python's tarfile took 9 of the 10 s of a scale-1
    restore under TCG); Python's tarfile otherwise."""
    pgdata.mkdir(mode=0o700)
    zst = archive.name.endswith(".tar.zst")
    zstd = shutil.which("zstd", path=TOOL_PATH) if zst else None
    if zst and zstd is None:
        raise HarnessError(f"template {archive.name} needs zstd, which is not installed")
    tar = shutil.which("tar", path=TOOL_PATH)
    try:
        if tar is not None:
            _restore_tar(tar, archive, pgdata, zst)
        elif zstd is not None:
            _restore_zstd(zstd, archive, pgdata)
        else:
            with tarfile.open(archive, "r:gz") as tarball:
                _extract(tarball, pgdata)
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise HarnessError(f"cannot restore template {archive.name}: {exc}") from exc
    if account is not None:
        chown_tree(pgdata, account)


def extract_cmd(tar: str, archive: Path, pgdata: Path, zst: bool) -> list[str]:
    return [tar, "--zstd" if zst else "--gzip", "-x", "--no-same-owner", "-f", str(archive),
            "-C", str(pgdata)]  # fmt: skip


def _restore_tar(tar: str, archive: Path, pgdata: Path, zst: bool) -> None:
    done = proc.run(extract_cmd(tar, archive, pgdata, zst), timeout=600)
    if done.returncode != 0:
        why = proc.last_error_line(done.output)
        raise HarnessError(f"tar exited {done.returncode} reading {archive.name}: {why}")


def _restore_zstd(zstd: str, archive: Path, pgdata: Path) -> None:
    with archive.open("rb") as src:
        filt = proc.pipe([zstd, "-q", "-d", "-c"], stdin=src, stdout=subprocess.PIPE)
        assert filt.stdout is not None
        with tarfile.open(fileobj=filt.stdout, mode="r|") as tar:
            _extract(tar, pgdata)
        if filt.wait() != 0:
            raise HarnessError(f"zstd exited {filt.returncode} reading {archive.name}")
