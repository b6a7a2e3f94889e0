"""The one wrapper around the commands that reach LAVA: submit a job, wait for it, read
its log. Local (`lava-run` against a device dictionary on this host, the log streamed
as it runs) or a server (`lavacli`, polling the job's state). The token reaches lavacli
in a lavacli.yaml of a private directory made for the one command (XDG_CONFIG_HOME),
removed after it: never in an argument, a log or the run directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import proc
from kbisect.core.exceptions import CommandTimeout, InfraError, MissingTool, UserError
from kbisect.targets.lava.config import Lab

LAVA_RUN, LAVACLI = "lava-run", "lavacli"
IDENTITY = "kbisect"
POLL_S = 5.0
INSTALL = {LAVA_RUN: "apt-get install lava-dispatcher", LAVACLI: "apt-get install lavacli"}


class LabError(InfraError):
    """The lab failed a job for its own reasons, or could not be reached."""


class BadToken(UserError):
    """The server refused the user's token."""


class UnknownDeviceType(UserError):
    """The server has no (usable) device of the target's device type."""


@dataclass(frozen=True)
class Ran:
    """A finished job: its id, the device that ran it, its log."""

    job_id: str
    device: str
    lines: list[str]


def require(lab: Lab) -> str:
    """The command this lab is reached with: MissingTool (exit 2) when not installed."""
    tool = LAVA_RUN if lab.local else LAVACLI
    if shutil.which(tool) is None:
        raise MissingTool(f"{tool}: not installed (target {lab.name} needs it: {INSTALL[tool]})")
    return tool


def run(
    lab: Lab,
    job_file: Path,
    device_file: Path | None,
    log: Path,
    on_line: Callable[[str], None],
    timeout: float,
) -> Ran:
    """Run the job to its end. Local: `device_file` is the device dictionary."""
    if lab.local:
        assert device_file is not None
        return _local(job_file, device_file, log, on_line, timeout)
    return _server(lab, job_file, log, on_line, timeout)


def _local(
    job_file: Path, device: Path, log: Path, on_line: Callable[[str], None], timeout: float
) -> Ran:
    job_id = str(time.time_ns() // 1000 % 10**9)  # lava-run's scratch dir is named by it
    lines: list[str] = []

    def seen(line: str) -> None:
        lines.append(line)
        on_line(line)

    out = job_file.parent / "lava-run"
    argv = [LAVA_RUN, "--job-id", job_id, "--output-dir", str(out), "--device", str(device)]
    argv.append(str(job_file))
    proc.run(argv, log=log, timeout=timeout, on_line=seen, check=False)
    return Ran(job_id, device.stem, lines)


@contextlib.contextmanager
def _identity(lab: Lab) -> Iterator[dict[str, str]]:
    """lavacli's environment: a config naming the server, the user and the token."""
    where = Path(tempfile.mkdtemp(prefix="kbisect-lavacli-"))  # mode 0700
    try:
        config = {IDENTITY: {"uri": f"{lab.server}/RPC2", "username": lab.user}}
        config[IDENTITY]["token"] = lab.token()
        fd = os.open(where / "lavacli.yaml", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(config, f)  # JSON is YAML
        yield {"XDG_CONFIG_HOME": str(where)}
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _lavacli(lab: Lab, *args: str, log: Path | None = None) -> str:
    with _identity(lab) as env:
        done = proc.run([LAVACLI, "-i", IDENTITY, *args], env=env, capture=True, check=False)
    out = done.output.strip()
    if done.returncode != 0:
        last = out.splitlines()[-1] if out else f"exit {done.returncode}"
        raise LabError(f"target {lab.name}: lavacli {args[0]} {args[1]} failed: {last[:240]}")
    return out


def _submit(lab: Lab, job_file: Path) -> str:
    out = _lavacli(lab, "jobs", "submit", str(job_file))
    if out.isdigit():
        return out
    why = out.splitlines()[-1] if out else "no job id"
    if "device type" in why.lower():
        raise UnknownDeviceType(f"target {lab.name}: device_type: the server says: {why[:200]}")
    if any(word in why for word in ("Authentication", "401", "403")):
        where = lab.token_source
        raise BadToken(f"target {lab.name}: {lab.server} refused the token in {where}: {why[:160]}")
    raise LabError(f"target {lab.name}: {lab.server} refused the job: {why[:240]}")


def _show(lab: Lab, job_id: str) -> dict[str, Any]:
    out = _lavacli(lab, "jobs", "show", job_id, "--json")
    try:
        found = json.loads(out)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise LabError(f"target {lab.name}: lavacli jobs show {job_id}: not a job: {out[:120]}")
    return found


def _server(
    lab: Lab, job_file: Path, log: Path, on_line: Callable[[str], None], timeout: float
) -> Ran:
    job_id = _submit(lab, job_file)
    with log.open("a", encoding="utf-8") as f:
        f.write(f"LAVA job {job_id} submitted to {lab.server}\n")
    started = time.monotonic()
    running: float | None = None
    try:
        while (shown := _show(lab, job_id)).get("state") != "Finished":
            now = time.monotonic()
            if running is None and shown.get("state") == "Running":
                running = now
            if running is None and now - started > lab.queue_timeout_s:
                raise LabError(
                    f"target {lab.name}: LAVA job {job_id} did not start within "
                    f"{lab.queue_timeout_s}s (no free {lab.device_type} device): cancelled"
                )
            if running is not None and now - running > timeout:
                raise CommandTimeout(f"LAVA job {job_id} ran longer than {timeout:.0f}s: cancelled")
            time.sleep(POLL_S)
    except BaseException:
        with contextlib.suppress(InfraError):
            _lavacli(lab, "jobs", "cancel", job_id)
        raise
    lines = _lavacli(lab, "jobs", "logs", job_id, "--raw").splitlines()
    with log.open("a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    for line in lines:
        on_line(line)
    return Ran(job_id, str(shown.get("device") or "?"), lines)
