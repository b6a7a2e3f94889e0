"""A LAVA job for one boot, and what its log says, as pure functions (text in, text out).

The job: deploy the kernel, kbisect's ramdisk (files.py: a shell, the harness and the
boot's scenario) and the scenario's root fs; boot (`qemu` for QEMU devices); run the
test, one step: the ramdisk's run.sh, which runs the harness on the root fs, reports the
mean tps with `lava-test-case tps --measurement` and prints the harness's result in the
log (base64 lines after RESULT). LAVA puts its test overlay into the ramdisk itself
(`overlays: lava: true`), so no disk image is opened on the dispatcher (no guestfs).

The log is LAVA's: one entry a line (`{"dt": ..., "lvl": ..., "msg": ...}`, a leading
"- " in a server's copy), YAML flow mappings that are JSON but for LAVA's `! "..."`
tags on some values.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kbisect.core.arch import Arch

PROMPT = "kbisect-lava# "  # the ramdisk's shell, once the root fs is mounted
READY = "kbisect-lava: ready"  # printed by the ramdisk's init just before the prompt
RESULT = "kbisect-result "  # a line of the harness's result, base64
TEST = "kbisect"  # the test definition's name: its cases are `tps`
# What ends a job without a kernel fault: the lab's, not the kernel's.
LAB_ERRORS = ("Infrastructure", "Configuration", "Bug", "Canceled", "LAVATimeout")


@dataclass(frozen=True)
class Spec:
    """One boot's job: the URLs the lab fetches, what the kernel gets, the deadlines."""

    name: str
    device_type: str
    tags: tuple[str, ...]
    arch: Arch
    kernel: str
    ramdisk: str
    rootfs: str
    append: tuple[str, ...]
    memory_mb: int
    cpus: int
    boot_s: int
    total_s: int
    idle_s: int


def lava_arch(a: Arch) -> str:
    """The arch as LAVA's job context names it (`arm64`, `x86_64`)."""
    return a.name


def cmdline(spec: Spec) -> str:
    """The kernel's command line: the console LAVA reads, a panic ends the boot (QEMU
    exits, the job fails at once); nowatchdog as for the emulated machine (emu/vm.py)."""
    base = [f"console={spec.arch.console},115200", "panic=-1", "oops=panic", "nowatchdog"]
    return " ".join([*base, *spec.append])


def _minutes(seconds: int) -> dict[str, int]:
    return {"minutes": max(1, -(-seconds // 60))}


def job(spec: Spec) -> dict[str, Any]:
    """The job as data (job_text writes it)."""
    test = {
        "metadata": {
            "format": "Lava-Test Test Definition 1.0",
            "name": TEST,
            "description": "kbisect's harness: pgbench on PostgreSQL, tps as a measurement",
        },
        "run": {"steps": ["sh /kbisect/run.sh"]},
    }
    images = {
        "kernel": {
            "url": spec.kernel,
            "image_arg": f'-kernel {{kernel}} -append "{cmdline(spec)}"',
        },
        "ramdisk": {
            "url": spec.ramdisk,
            "compression": "gz",
            "format": "cpio.newc",
            "overlays": {"lava": True},
            "image_arg": "-initrd {ramdisk}",
        },
        "rootfs": {"url": spec.rootfs, "image_arg": "-drive format=raw,if=virtio,file={rootfs}"},
    }
    return {
        "job_name": spec.name,
        "device_type": spec.device_type,
        **({"tags": list(spec.tags)} if spec.tags else {}),
        "visibility": "public",
        "priority": "medium",
        "context": {"arch": lava_arch(spec.arch), "memory": spec.memory_mb, "cpus": spec.cpus},
        "timeouts": {
            "job": _minutes(spec.boot_s + spec.total_s + 600),
            "action": _minutes(spec.total_s),
            "connection": _minutes(spec.idle_s),
        },
        "actions": [
            {"deploy": {"to": "tmpfs", "timeout": _minutes(600), "images": images}},
            {
                "boot": {
                    "method": "qemu",
                    "media": "tmpfs",
                    "timeout": _minutes(spec.boot_s),
                    "prompts": [PROMPT],
                }
            },
            {
                "test": {
                    "timeout": _minutes(spec.total_s),
                    "definitions": [
                        {
                            "from": "inline",
                            "name": TEST,
                            "path": "inline/kbisect.yaml",
                            "repository": test,
                        }
                    ],
                }
            },
        ],
    }


def job_text(spec: Spec) -> str:
    return yaml_text(job(spec))


def device_text(a: Arch, accel: list[str], memory_mb: int, cpus: int) -> str:
    """A rendered QEMU device dictionary for lava-run on this host (what lava-server
    renders from qemu.jinja2 for a lab's device), sized for the scenario's guest."""
    options = [f"-machine {a.machine_type}", " ".join(accel), f"-m {memory_mb}", f"-smp {cpus}"]
    device = {
        "available_architectures": [lava_arch(a)],
        "constants": {
            "failure_retry": 1,
            "boot_retry": 1,
            "spawn_maxread": 4092,
            "shutdown-message": "reboot: Restarting system",
            "kernel-start-message": "Linux version [0-9]",
            "default-shell-prompt": "lava-test: # ",
            "posix": {
                "lava_test_sh_cmd": "/bin/sh",
                "lava_test_results_dir": "/lava-%s",
                "lava_test_shell_file": "~/.bashrc",
            },
        },
        "commands": {"connections": {}},
        "timeouts": {"actions": {}, "connections": {}},
        "actions": {
            "deploy": {"methods": {"image": {"parameters": {"guest": {"size": 512}}}}},
            "boot": {
                "connections": {"serial": None},
                "methods": {
                    "qemu": {
                        "parameters": {
                            "command": a.qemu,
                            "boot_options": {},
                            "options": [*options, "-nographic", "-no-reboot", "-net none"],
                            "extra": [],
                        }
                    }
                },
            },
        },
    }
    return yaml_text(device)


def yaml_text(value: Any) -> str:
    """Block YAML of dicts, lists and scalars; every scalar written as JSON (a JSON
    string, number, true/false/null is a YAML scalar)."""
    return "\n".join(_lines(value, 0)) + "\n"


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, Mapping) and value:
        out = []
        for key, item in value.items():
            if _scalar(item):
                out.append(f"{pad}{_dump(str(key))}: {_dump(item)}")
            else:
                out += [f"{pad}{_dump(str(key))}:", *_lines(item, indent + 2)]
        return out
    if isinstance(value, list) and value:
        out = []
        for item in value:
            inner = [_dump(item)] if _scalar(item) else _lines(item, indent + 2)
            out.append(f"{pad}- {inner[0].lstrip()}")
            out += inner[1:]
        return out
    empty = {} if isinstance(value, Mapping) else [] if isinstance(value, list) else value
    return [pad + _dump(empty)]


# What YAML takes raw in a double-quoted scalar (json.dumps escaped the rest below 0x20):
# not its line breaks (\x85, \u2028, \u2029) nor what it calls non-printable.
RAW_BAD = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _dump(value: Any) -> str:
    """A scalar as YAML: JSON's text, non-ASCII written as itself where YAML takes it."""
    text = json.dumps(value, ensure_ascii=False)
    return RAW_BAD.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _scalar(value: Any) -> bool:
    return not isinstance(value, (Mapping, list)) or not value


# -- the log ----------------------------------------------------------------------------
TAG = re.compile(r'(?<=[:,\[{] )! (?=")')  # LAVA's `! "484"`: outside strings only
# YAML's double-quoted escapes that JSON lacks (lavacli writes every entry that way)
YAML_ESCAPE = re.compile(r"\\(\\|x[0-9A-Fa-f]{2}|U[0-9A-Fa-f]{8}|[0aevN_LP ])")
NAMED = {"0": 0, "a": 7, "e": 27, "v": 11, "N": 0x85, "_": 0xA0, "L": 0x2028, "P": 0x2029}


def _json_escape(m: re.Match[str]) -> str:
    code = m.group(1)
    if code == "\\":
        return "\\\\"
    if code == " ":
        return " "
    char = chr(int(code[1:], 16)) if code[0] in "xU" else chr(NAMED[code])
    return json.dumps(char)[1:-1]


def entry(line: str) -> dict[str, Any] | None:
    """One log line as an entry, None for anything else."""
    text = TAG.sub("", line.strip().removeprefix("- "))
    if not text.startswith("{"):
        return None
    for attempt in (text, YAML_ESCAPE.sub(_json_escape, text)):
        try:
            found = json.loads(attempt)
        except ValueError:
            continue
        return found if isinstance(found, dict) else None
    return None


def target_line(line: str) -> str | None:
    """What the device printed, when the log line is that."""
    e = entry(line)
    return str(e["msg"]) if e and e.get("lvl") == "target" else None


@dataclass
class Outcome:
    """What a job's log says about the boot."""

    result: str | None = None  # the job's own result: pass or fail
    error_type: str | None = None  # LAVA's error class when it failed
    error: str | None = None
    reached: bool = False  # the ramdisk's init got to the prompt
    tps: str | None = None  # the `tps` case: "pass"/"fail"
    measurement: float | None = None
    chunks: list[str] = field(default_factory=list)
    first: str | None = None  # the first and last entry's time
    last: str | None = None

    @property
    def harness(self) -> dict[str, Any] | None:
        """The harness's result (guest-result.json), None when it never came."""
        try:
            found = json.loads(base64.b64decode("".join(self.chunks), validate=True))
        except (ValueError, binascii.Error):
            return None
        return found if isinstance(found, dict) and self.chunks else None

    @property
    def job_s(self) -> float | None:
        """LAVA's own time for the job: its first log entry to its last."""
        if self.first is None or self.last is None:
            return None
        span = datetime.fromisoformat(self.last) - datetime.fromisoformat(self.first)
        return round(span.total_seconds(), 2)

    def lab_fault(self) -> bool:
        """The job ended for the lab's reasons: before the kernel had a say, or cancelled
        (by the lab or an admin) at any point."""
        if self.result != "fail" or self.error_type not in LAB_ERRORS:
            return False
        return self.error_type == "Canceled" or not self.reached


def read(lines: Iterable[str]) -> Outcome:
    out = Outcome()
    for line in lines:
        e = entry(line)
        if e is None:
            continue
        out.first = out.first or str(e.get("dt"))
        out.last = str(e.get("dt"))
        msg = e.get("msg")
        if e.get("lvl") == "target" and isinstance(msg, str):
            out.reached = out.reached or READY in msg
            if RESULT in msg:
                out.chunks.append(msg.split(RESULT, 1)[1].strip())
        elif e.get("lvl") == "results" and isinstance(msg, dict):
            _result(out, msg)
    return out


def _result(out: Outcome, msg: Mapping[str, Any]) -> None:
    if msg.get("definition") == "lava" and msg.get("case") == "job":
        out.result = str(msg.get("result"))
        out.error_type = msg.get("error_type")
        out.error = msg.get("error_msg")
    elif str(msg.get("definition", "")).endswith(f"_{TEST}") and msg.get("case") == "tps":
        out.tps = str(msg.get("result"))
        try:
            out.measurement = float(msg["measurement"])
        except (KeyError, TypeError, ValueError):
            out.measurement = None
