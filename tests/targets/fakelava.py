"""Stand-ins for a LAVA lab that replay the log of a real job: a `lava-run` script, and a
lava-server's XML-RPC API on 127.0.0.1 for the real lavacli to talk to.

tests/data/lava/lava-run.log is the log (debug lines left out) that Debian 12's
lava-dispatcher 2023.01 printed for one boot of kbisect's smoke scenario under QEMU/TCG:
lava-run's stdout, one entry a line. A lava-server could not be run here (docs/lava.md):
`Server` answers the calls lavacli 1.2 makes (system.version, scheduler.jobs.submit,
show, logs, cancel) as a 2023.01 server would, and serves that log as a server stores
it (a YAML list), so kbisect's server path runs the real lavacli end to end.

What to do is read from mode.txt in the state dir ($FAKELAVA_DIR, which the test sets);
lava-run records its argv in argv.txt, the server the credentials it got in auth.txt and
a cancelled job in cancelled.txt:
- "" (default): the job runs as recorded (the server's, on device qemu02);
- "no-measurement": the tps case of the recorded log without its measurement;
- "infra": the job fails before booting, LAVA's Infrastructure error;
- "cancelled": the job is cancelled while the harness runs (LAVA's Canceled error);
- "hang": lava-run never ends; the server's job runs for ever;
- "queued": the server's job never leaves the queue;
- "unknown-type": the server refuses the job, as one without that device type does.
The server refuses a token other than token.txt's as a 2023.01 server does (Fault 401).
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
import threading
import time
import xmlrpc.client
from pathlib import Path
from typing import Any
from xmlrpc.server import SimpleXMLRPCRequestHandler, SimpleXMLRPCServer

RECORDED = Path(__file__).resolve().parent.parent / "data" / "lava" / "lava-run.log"
CANCELLED = (
    '{"dt": "2026-12-05T18:20:01.9", "lvl": "results", "msg": {"case": "job", "definition": '
    '"lava", "error_msg": "Canceled", "error_type": "Canceled", "result": "fail"}}'
)
INFRA = (
    '{"dt": "2026-12-05T18:19:01.9", "lvl": "results", "msg": {"case": "job", "definition": '
    '"lava", "error_msg": "Unable to download file:///x", "error_type": "Infrastructure", '
    '"result": "fail"}}'
)

LAVA_RUN = f"""#!{sys.executable}
import json, os, sys, time
from pathlib import Path
state = Path(os.environ["FAKELAVA_DIR"])
with (state / "argv.txt").open("a") as f:
    f.write(json.dumps(sys.argv) + "\\n")
mode = (state / "mode.txt").read_text().strip() if (state / "mode.txt").exists() else ""
def log():
    if mode == "infra":
        return [{INFRA!r}]
    lines = Path({str(RECORDED)!r}).read_text().splitlines()
    if mode == "cancelled":
        cut = next(i for i, line in enumerate(lines) if "phase run" in line)
        lines = lines[:cut] + [{CANCELLED!r}]
    if mode == "no-measurement":
        lines = [l.replace('"measurement": ! ', '"ignored": ! ') for l in lines]
    return lines
if mode == "hang":
    time.sleep(3600)
for line in log():
    print(line, flush=True)
sys.exit(1 if mode == "infra" else 0)
"""


def install(where: Path, mode: str = "", token: str = "") -> Path:
    """The lava-run stand-in in where/bin (put it first on PATH), the state in where/state."""
    bin_dir, state = where / "bin", where / "state"
    bin_dir.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "lava-run"
    path.write_text(LAVA_RUN)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    (state / "mode.txt").write_text(mode)
    (state / "token.txt").write_text(token)
    return state


def _lines(state: Path) -> list[str]:
    """The job's log, as the lava-run stand-in prints it in this mode."""
    env = {**os.environ, "FAKELAVA_DIR": str(state)}
    mode = (state / "mode.txt").read_text().strip()
    if mode == "hang":  # the log so far: none
        return []
    done = subprocess.run([state.parent / "bin" / "lava-run"], env=env, capture_output=True)
    return done.stdout.decode().splitlines()


class _Handler(SimpleXMLRPCRequestHandler):
    rpc_paths = ("/RPC2",)

    def do_POST(self) -> None:
        self.server.auth = self.headers.get("Authorization", "")  # type: ignore[attr-defined]
        super().do_POST()

    def log_message(self, format: str, *args: Any) -> None:
        return None


class Server:
    """The XML-RPC API of a lava-server, on 127.0.0.1 (a thread), for one job: 17."""

    def __init__(self, state: Path, user: str) -> None:
        self.state, self.user, self.polls = state, user, 0
        self.rpc = SimpleXMLRPCServer(
            ("127.0.0.1", 0), requestHandler=_Handler, allow_none=True, logRequests=False
        )
        self.rpc.auth = ""  # type: ignore[attr-defined]
        self.rpc.register_function(lambda: "2023.01", "system.version")
        self.rpc.register_function(self.submit, "scheduler.jobs.submit")
        self.rpc.register_function(self.show, "scheduler.jobs.show")
        self.rpc.register_function(self.logs, "scheduler.jobs.logs")
        self.rpc.register_function(self.cancel, "scheduler.jobs.cancel")
        self.thread = threading.Thread(target=self.rpc.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.rpc.server_address[1]}"

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.rpc.shutdown()
        self.rpc.server_close()

    @property
    def mode(self) -> str:
        return (self.state / "mode.txt").read_text().strip()

    def _check(self) -> None:
        given = base64.b64decode(self.rpc.auth.removeprefix("Basic ")).decode()  # type: ignore[attr-defined]
        (self.state / "auth.txt").write_text(given)
        if given != f"{self.user}:{(self.state / 'token.txt').read_text().strip()}":
            raise xmlrpc.client.Fault(
                401, "Authentication with user and token required for this API."
            )

    def submit(self, definition: Any) -> Any:
        self._check()
        if self.mode == "unknown-type":
            raise xmlrpc.client.Fault(400, "Device type 'qemu' is unavailable.")
        return 17

    def show(self, job_id: Any) -> Any:
        self._check()
        self.polls += 1
        state = {"queued": "Submitted", "hang": "Running"}.get(self.mode)
        state = state or ("Running" if self.polls == 1 else "Finished")
        now = xmlrpc.client.DateTime(time.gmtime())
        return {
            "id": int(job_id), "description": "kbisect", "submitter": self.user,
            "device_type": "qemu", "device": "qemu02", "health_check": False,
            "state": state, "health": "Complete" if state == "Finished" else "Unknown",
            "failure_comment": None, "pipeline": True, "tags": [], "visibility": "Public",
            "submit_time": now, "start_time": None if state == "Submitted" else now,
            "end_time": now if state == "Finished" else None,
        }  # fmt: skip

    def logs(self, job_id: Any, start: Any, end: Any) -> Any:
        self._check()
        stored = [f"- {line}\n" for line in _lines(self.state)][start:end]
        return True, xmlrpc.client.Binary("".join(stored).encode())

    def cancel(self, job_id: Any) -> Any:
        self._check()
        (self.state / "cancelled.txt").write_text(str(job_id))
        return True
