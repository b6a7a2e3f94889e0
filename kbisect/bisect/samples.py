"""Samples of revisions under bisection: where they are stored, and taking one more.

One store per (repository, scenario hash, --append, --config, arch); in it one directory
per commit holding one JSON file per boot (results.write_sample). A revisited revision
reuses what is stored. The store is shared by `git bisect run bisect/run` by hand and by
`kbisect bisect`, which passes it to each step with --store.

Test hook (tests only): when $KBISECT_FAKE_MEASURE names an executable, a sample is not a
boot but `$KBISECT_FAKE_MEASURE <image> <commit> <index>`, which prints a tps figure, or
exits 5 (boot failed) or 6 (benchmark failed). Everything else stays real.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect import git, paths, proc, progress, results, scenario
from kbisect.exceptions import EXIT_BENCHMARK, EXIT_BOOT, BenchmarkError, BootError, CommandFailed

STORE_ENV = "KBISECT_BISECT_STORE"
FAKE_ENV = "KBISECT_FAKE_MEASURE"
TIMINGS = ("boot_s", "restore_s", "init_s", "bench_s", "total_s")


@dataclass(frozen=True)
class Context:
    """What is measured: the same for every revision of one bisection."""

    scen: scenario.Scenario
    append: str
    arch: str


@dataclass(frozen=True)
class Target:
    """One built revision, and the directory its samples go to."""

    commit: str
    image: Path
    manifest: dict[str, Any] | None
    out: Path
    index_base: int = 0  # fake measure only: the re-check's samples are fresh draws


def store_for(explicit: Path | None, top: Path, ctx: Context, configs: tuple[str, ...]) -> Path:
    """--store, else $KBISECT_BISECT_STORE, else results/bisect-store/<repo>-<key>."""
    if explicit is not None:
        return explicit.resolve()
    if env := os.environ.get(STORE_ENV):
        return Path(env).resolve()
    common = git.git(top, "rev-parse", "--path-format=absolute", "--git-common-dir")
    key_text = json.dumps([common, ctx.scen.hash, ctx.append, list(configs), ctx.arch])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:12]
    name = Path(common).parent.name if common.endswith("/.git") else Path(common).name
    return paths.results_dir() / "bisect-store" / f"{name}-{key}"


def commit_dir(store: Path, commit: str) -> Path:
    return store / commit


def stored(out: Path) -> tuple[list[float], list[str]]:
    """The stored tps figures of a revision, and the errors of its failed boots."""
    if not out.is_dir():
        return [], []
    tps: list[float] = []
    failures: list[str] = []
    for s in results.load_samples(out):
        if s["status"] == "ok":
            tps.append(float(s["tps"]))
        else:
            failures.append(str(s["error"]))
    return tps, failures


def draw(ctx: Context, target: Target) -> float:
    """Take one more sample of target (a boot, or the fake), store it, return its tps."""
    taken = len(results.sample_paths(target.out)) if target.out.is_dir() else 0
    fake = os.environ.get(FAKE_ENV)
    if fake:
        sample = _fake_sample(fake, ctx, target, target.index_base + taken)
    else:
        from kbisect import measure  # imported here: the simulation needs no QEMU modules

        sample = _boot_with_retry(measure, ctx, target)
    return float(sample["tps"])


def _boot_with_retry(measure: Any, ctx: Context, target: Target) -> dict[str, Any]:
    """One boot; a boot failure is retried once (both are stored). A panic that is the
    commit's doing fails twice and the step is skipped; a one-off emulation hiccup
    (seen under TCG: an int3 Oops while kernel text is patched) costs one boot."""
    for attempt in (1, 2):
        try:
            sample: dict[str, Any] = measure.sample(
                target.image, ctx.scen, append=ctx.append, out_dir=target.out,
                manifest=target.manifest, arch=ctx.arch,
            )  # fmt: skip
            return sample
        except BootError as exc:
            if attempt == 2:
                raise
            progress.warn(f"{target.commit[:12]}: boot failed, retrying once: {exc}")
    raise AssertionError("unreachable")


def top_up(ctx: Context, target: Target, n: int) -> list[float]:
    """At least n samples of target (stored ones count); BootError if a boot failed."""
    tps, failures = stored(target.out)
    if failures and not tps:
        raise BootError(f"{target.commit[:12]}: stored failure, not retried: {failures[-1]}")
    while len(tps) < n:
        tps.append(draw(ctx, target))
    return tps


def interleaved(ctx: Context, a: Target, b: Target, n: int) -> tuple[list[float], list[float]]:
    """At least n samples of each, taken alternately so that drift hits both alike."""
    ta: list[float] = []
    tb: list[float] = []
    for k in range(1, n + 1):
        ta = top_up(ctx, a, k)
        tb = top_up(ctx, b, k)
    return ta, tb


def fake_command(fake: str, image: Path, commit: str, index: int) -> list[str]:
    return [fake, str(image), commit, str(index)]


def _fake_sample(fake: str, ctx: Context, target: Target, index: int) -> dict[str, Any]:
    res = proc.run(fake_command(fake, target.image, target.commit, index), capture=True,
                     check=False)  # fmt: skip
    status, error, tps = "ok", None, None
    if res.returncode == EXIT_BOOT:
        status, error = "boot-failed", f"fake measure: boot of {target.commit[:12]} failed"
    elif res.returncode == EXIT_BENCHMARK:
        status, error = "benchmark-failed", "fake measure: benchmark failed"
    elif res.returncode != 0:
        last = (res.output.strip().splitlines() or [""])[-1][:160]
        raise CommandFailed(f"{fake} exited {res.returncode}: {last}")
    else:
        tps = _last_float(fake, res.output)
    sample = _sample(ctx, target, status, error, tps)
    results.write_sample(target.out, {**sample, "fake_index": index})
    if status == "boot-failed":
        raise BootError(str(error))
    if status == "benchmark-failed":
        raise BenchmarkError(str(error))
    return sample


def _sample(ctx: Context, target: Target, status: str, error: str | None,
            tps: float | None) -> dict[str, Any]:  # fmt: skip
    """A sample in the format of docs/architecture.md, for a fake measurement."""
    kernel = {"image": str(target.image), "release": None, "commit": target.commit,
              "config_hash": (target.manifest or {}).get("config_hash"),
              "manifest": target.manifest}  # fmt: skip
    run: dict[str, Any] = {"index": 0, "warmup": False, "tps": tps, "latency_avg_ms": None,
           "latency_stddev_ms": None, "failed_transactions": 0, "series": []}  # fmt: skip
    return {
        "version": 1, "kind": "sample", "created": results.utc_now(),
        "command": progress.reproduce_line(), "label": None,
        "scenario": {"name": ctx.scen.name, "hash": ctx.scen.hash, "settings": ctx.scen.data},
        "kernel": kernel, "append": ctx.append, "accel": "tcg", "status": status,
        "error": error, "tps": tps, "runs": [] if tps is None else [run],
        "fingerprint": None, "timings": dict.fromkeys(TIMINGS),
    }  # fmt: skip


def _last_float(fake: str, output: str) -> float:
    lines = output.strip().splitlines()
    try:
        return float(lines[-1])
    except (IndexError, ValueError):
        raise CommandFailed(f"{fake} printed {output.strip()[-80:]!r}, not a tps figure") from None
