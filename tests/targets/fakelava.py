"""Stand-ins for lava-run and lavacli that replay the log of a real job.

tests/data/lava/lava-run.log is the log (debug lines left out) that Debian 12's
lava-dispatcher 2023.01 printed for one boot of kbisect's smoke scenario under QEMU/TCG:
lava-run's stdout, one entry a line; a server's copy (`lavacli jobs logs --raw`) is the
same entries with a leading "- ". A lava-server could not be run here (docs/lava.md), so
the server path is tested against `lavacli` below, which answers as lavacli 1.2 does.

Both record every argv they were started with (argv.txt) and read what to do from
mode.txt in their state dir ($FAKELAVA_DIR, which the test sets):
- "" (default): the job runs as recorded, on device qemu02 (lavacli) or for lava-run;
- "no-measurement": the tps case of the recorded log without its measurement;
- "infra": the job fails before booting, LAVA's Infrastructure error;
- "cancelled": the job is cancelled while the harness runs (LAVA's Canceled error);
- "unreachable": lavacli cannot reach the server (exit 1, as on a refused connection);
- "hang": lava-run never ends; lavacli's job runs for ever;
- "queued": lavacli's job never leaves the queue;
- "unknown-type": lavacli's submit fails as a server without that device type answers.
lavacli checks the token in its lavacli.yaml against token.txt ("Unable to submit" else)
and writes the config it was given to config.txt.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

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

COMMON = f"""#!{sys.executable}
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
"""

LAVA_RUN = (
    COMMON
    + """
if mode == "hang":
    time.sleep(3600)
for line in log():
    print(line, flush=True)
sys.exit(1 if mode == "infra" else 0)
"""
)

LAVACLI = (
    COMMON
    + """
config = Path(os.environ.get("XDG_CONFIG_HOME", "~/.config")).expanduser() / "lavacli.yaml"
given = json.loads(config.read_text())[sys.argv[2]] if config.exists() else {}
(state / "config.txt").write_text(json.dumps(given))
what, job = sys.argv[4], sys.argv[5]
if mode == "unreachable":
    print("Unable to connect: [Errno 111] Connection refused", file=sys.stderr)
    sys.exit(1)
if given.get("token") != (state / "token.txt").read_text().strip():
    print(f"Unable to submit {job}: <Fault 401: 'Authentication failed'>")
elif what == "submit" and mode == "unknown-type":
    print(f"Unable to submit {job}: <Fault 400: \\"Device type 'nope' is unavailable\\">")
elif what == "submit":
    print("17")
elif what == "show":
    polls = state / "polls.txt"
    n = int(polls.read_text()) + 1 if polls.exists() else 1
    polls.write_text(str(n))
    states = {"queued": "Submitted", "hang": "Running"}
    shown = states.get(mode, "Running" if n == 1 else "Finished")
    print(json.dumps({"id": 17, "state": shown, "device": "qemu02", "health": "Complete"}))
elif what == "logs":
    for line in log():
        print("- " + line)
elif what == "cancel":
    (state / "cancelled.txt").write_text(job)
"""
)


def install(where: Path, mode: str = "", token: str = "") -> Path:
    """The stand-ins in where/bin (put it first on PATH), their state in where/state."""
    bin_dir, state = where / "bin", where / "state"
    bin_dir.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    for name, text in (("lava-run", LAVA_RUN), ("lavacli", LAVACLI)):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    (state / "mode.txt").write_text(mode)
    (state / "token.txt").write_text(token)
    return state
