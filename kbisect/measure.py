"""`kbisect run`: boot a kernel in virtme-ng and run a pinned pgbench scenario inside.

One boot is one sample. The guest harness (harness/guest.py) writes
guest-result.json into a directory shared read-write with the guest; the host wraps it
into a sample (docs/architecture.md) with the kernel, the command line and timings.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kbisect import arch as arch_mod
from kbisect import atomic, kvm, paths, proc, progress, results, scenario, stats, vng
from kbisect import image as rootfs
from kbisect.exceptions import (
    BenchmarkError,
    BootError,
    CommandTimeout,
    UserError,
)

PANIC = re.compile(r"Kernel panic|Oops:|BUG: |general protection fault|Unable to mount root")
GUEST = "kbisect-guest: "


class KernelNotFound(UserError):
    """--kernel names nothing that exists."""


def find_kernel(spec: str) -> tuple[Path, dict[str, Any] | None]:
    """A kernel image, and its build manifest when it comes from `kbisect build`."""
    path = Path(spec).expanduser()
    if path.is_dir():
        images = [p for p in path.iterdir() if p.name in ("bzImage", "Image")]
        if not images:
            raise KernelNotFound(f"{path}: no bzImage or Image in this directory")
        path = images[0]
    if not path.is_file():
        raise KernelNotFound(f"{spec}: no such kernel image")
    manifest_file = path.parent / "manifest.json"
    manifest = json.loads(manifest_file.read_text()) if manifest_file.exists() else None
    return path.resolve(), manifest


class _Console:
    """Follows the guest console: phases, live tps, panics, boot deadline."""

    def __init__(self, boot_timeout: float) -> None:
        self.start = time.monotonic()
        self.boot_timeout = boot_timeout
        self.reached: float | None = None
        self.panic: str | None = None
        self.last_tps = 0.0

    def __call__(self, line: str) -> None:
        if GUEST in line:
            self._guest(line.split(GUEST, 1)[1].strip())
        elif self.panic is None and PANIC.search(line):
            self.panic = line.strip()
        if self.reached is None and time.monotonic() - self.start > self.boot_timeout:
            raise BootError(f"guest did not reach the harness within {self.boot_timeout:.0f}s")

    def _guest(self, msg: str) -> None:
        if self.reached is None:
            self.reached = time.monotonic() - self.start
        kind, _, value = msg.partition(" ")
        if kind == "phase":
            progress.step(f"guest: {value}")
        elif kind == "tps" and time.monotonic() - self.last_tps > 10:
            self.last_tps = time.monotonic()
            progress.step(f"guest: running, {value} tps")


def _guest_argv(harness: Path, scen_file: Path, out: Path, templates: Path) -> list[str]:
    return [
        "python3",
        str(harness / "guest.py"),
        "--scenario-json",
        str(scen_file),
        "--out",
        str(out),
        "--template-dir",
        str(templates),
    ]


def boot_spec(
    image: Path,
    scen: scenario.Scenario,
    arch: arch_mod.Arch,
    append: str,
    out: Path,
    templates: Path,
    root: Path | None = None,
) -> vng.Boot:
    """`root`: a foreign arch's root fs (rootfs.find), None for a native guest."""
    guest = scen.data["guest"]
    extra = shlex.split(guest.get("append", "")) + shlex.split(append)
    if root is None:  # the guest sees the host's root: same paths inside
        shares = [vng.Share(out), vng.Share(templates)]
        argv = _guest_argv(paths.harness_dir(), out / "scenario.json", out, templates)
    else:  # a root fs of the guest's arch, the host's dirs under rootfs.GUEST_DIR
        shares = [
            vng.Share(paths.harness_dir(), rootfs.GUEST_HARNESS, writable=False),
            vng.Share(out, rootfs.GUEST_OUT),
            vng.Share(templates, rootfs.GUEST_TEMPLATES),
        ]
        argv = _guest_argv(
            rootfs.GUEST_HARNESS,
            rootfs.GUEST_OUT / "scenario.json",
            rootfs.GUEST_OUT,
            rootfs.GUEST_TEMPLATES,
        )
    return vng.Boot(
        image=image,
        arch=arch,
        cpus=guest["vcpus"],
        memory_mb=guest["memory_mb"],
        accel=kvm.accel(arch.name),
        append=extra,
        shares=shares,
        exec_argv=argv,
        root=root,
    )


def sample(
    image: Path,
    scen: scenario.Scenario,
    *,
    append: str = "",
    out_dir: Path,
    label: str | None = None,
    manifest: dict[str, Any] | None = None,
    arch: str = "x86_64",
) -> dict[str, Any]:
    """Boot once and return the sample (also written under out_dir/samples/)."""
    a = arch_mod.get(arch)
    # A missing root fs for a foreign arch is a user error before anything is made.
    root = None if a.is_native() else rootfs.find(a)
    boot_dir = out_dir / "boots" / f"{int(time.time() * 1000)}-{label or 'x'}"
    templates = paths.cache_dir() / "pg-templates"
    boot_dir.mkdir(parents=True)
    templates.mkdir(parents=True, exist_ok=True)
    atomic.write_text(boot_dir / "scenario.json", scen.to_json())
    spec = boot_spec(image, scen, a, append, boot_dir, templates, root)
    vng_bin = vng.binary()
    cmd = vng.command(spec, vng_bin)
    log = boot_dir / "console.log"
    log.write_text(progress.log_header())
    t = scen.data["timeouts"]
    console = _Console(float(t["boot_s"]))
    progress.step(
        f"booting {image.name} ({', '.join([spec.accel, f'{spec.cpus} vCPUs', *spec.append])})"
    )
    start = time.monotonic()
    error: BootError | BenchmarkError | None = None
    try:
        proc.run(
            cmd,
            env=vng.env(vng_bin),
            log=log,
            timeout=float(t["total_s"]),
            idle_timeout=float(t["idle_s"]),
            on_line=console,
            check=False,
        )
    except CommandTimeout as exc:
        error = BootError(f"{exc}; console log kept")
    except BootError as exc:
        error = BootError(f"{exc} (log: {log})")
    total = time.monotonic() - start
    data = _sample(scen, image, manifest, append, spec.accel, label, boot_dir, console, total)
    if error is None:
        error = _error(data, console, log)
    if error is not None:
        data.update(
            status="boot-failed" if isinstance(error, BootError) else "benchmark-failed",
            error=str(error),
            tps=None,
        )
    results.write_sample(out_dir, data)
    if error is not None:
        raise error
    return data


def _error(data: dict[str, Any], console: _Console, log: Path) -> BootError | BenchmarkError | None:
    if console.panic:
        return BootError(f"kernel panic or oops: {console.panic[:160]} (log: {log})")
    if data.get("status") is None:
        return BootError(f"guest never reached the harness (log: {log})")
    if data["status"] != "ok":
        return BenchmarkError(f"{data.get('error') or 'harness failed'} (log: {log})")
    return None


def _sample(
    scen: scenario.Scenario,
    image: Path,
    manifest: dict[str, Any] | None,
    append: str,
    accel: str,
    label: str | None,
    boot_dir: Path,
    console: _Console,
    total: float,
) -> dict[str, Any]:
    result_file = boot_dir / "guest-result.json"
    guest: dict[str, Any] = json.loads(result_file.read_text()) if result_file.exists() else {}
    runs = guest.get("runs", [])
    measured = [r["tps"] for r in runs if not r.get("warmup")]
    timings = {"restore_s": None, "init_s": None, "bench_s": None, **guest.get("timings", {})}
    timings.update(boot_s=round(console.reached or 0.0, 2), total_s=round(total, 2))
    return {
        "version": 1,
        "kind": "sample",
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": progress.reproduce_line(),
        "label": label,
        "scenario": {"name": scen.name, "hash": scen.hash, "settings": scen.data},
        "kernel": {
            "image": str(image),
            "release": (guest.get("fingerprint") or {}).get("uname_r"),
            "commit": (manifest or {}).get("commit"),
            "config_hash": (manifest or {}).get("config_hash"),
            "manifest": manifest,
        },
        "append": append,
        "accel": accel,
        "status": guest.get("status"),
        "error": guest.get("error"),
        "tps": sum(measured) / len(measured) if measured and guest.get("status") == "ok" else None,
        "runs": runs,
        "fingerprint": guest.get("fingerprint"),
        "timings": timings,
        "boot_dir": str(boot_dir),
    }


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", required=True, help="kernel image, or a build artifact dir")
    parser.add_argument("--scenario", required=True, help="scenario name or .toml file")
    parser.add_argument("--append", default="", help="kernel command line extras")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario field, e.g. postgres.settings.huge_pages=on",
    )
    parser.add_argument("--runs", type=int, default=1, help="boots (one sample each)")
    parser.add_argument("--arch", default="x86_64")
    parser.add_argument("--out", type=Path, help="results dir (default: a new one in results/)")


def main(args: argparse.Namespace) -> int:
    if args.runs < 1:
        raise UserError("--runs must be at least 1")
    image, manifest = find_kernel(args.kernel)
    scen = scenario.load(args.scenario).with_overrides(args.set)
    out = args.out or results.new_run_dir("run", scen.name)
    tps: list[float] = []
    for i in range(args.runs):
        progress.step(f"boot {i + 1}/{args.runs}")
        s = sample(image, scen, append=args.append, out_dir=out, manifest=manifest, arch=args.arch)
        tps.append(s["tps"])
        print(f"boot {i + 1}: {s['tps']:.1f} tps  (preempt={s['fingerprint'].get('preempt')})")
    summary = stats.summarize(tps)
    print(
        f"{scen.name}: mean {summary.mean:.1f} tps over {summary.n} boot(s), "
        f"CV {summary.cv * 100:.1f}%  results: {out}"
    )
    return 0
