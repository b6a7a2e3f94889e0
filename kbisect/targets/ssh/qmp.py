"""QEMU's machine protocol (QMP) on a unix socket: one command at a time.

How kbisect power-cycles the emulated machine (`system_reset`) or shuts it down
(`system_powerdown`); a machine target's `power_cycle = "qmp:/path/qmp.sock"`.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import IO, Any

from kbisect.core.exceptions import InfraError

PREFIX = "qmp:"


def execute(sock: Path, command: str, timeout: float = 10.0) -> dict[str, Any]:
    """Run one QMP command (after the capabilities handshake); its reply."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(sock))
            reader = s.makefile("r")
            reader.readline()  # the greeting
            reply: dict[str, Any] = {}
            for cmd in ("qmp_capabilities", command):
                s.sendall(json.dumps({"execute": cmd}).encode() + b"\n")
                reply = _reply(reader)
                if "error" in reply:
                    raise InfraError(f"QMP {cmd}: {reply['error'].get('desc', reply['error'])}")
            return reply
    except (OSError, ValueError) as exc:
        raise InfraError(f"QMP {command} on {sock}: {exc}") from None


def _reply(reader: IO[str]) -> dict[str, Any]:
    while True:  # skip asynchronous events (RESET, POWERDOWN, ...)
        line = reader.readline()
        if not line:
            raise InfraError("QMP: the connection closed before a reply")
        msg: dict[str, Any] = json.loads(line)
        if "return" in msg or "error" in msg:
            return msg
