"""What a bisection keeps on disk: the samples per commit, the driver's resume file,
and the parsed `git bisect log`.

Samples: one store per (repository, scenario hash, --append, --config, arch), one
directory per commit, one JSON file per boot (results.write_sample). A revisited
revision reuses them. The store is shared by `git bisect run bisect/run` by hand and
by `kbisect bisect` (which passes it to each step with --store).

Test hook (tests only): when $KBISECT_FAKE_MEASURE names an executable, a sample is
not a boot but `$KBISECT_FAKE_MEASURE <image> <commit> <index>`, which prints a tps
figure, or exits 5 (boot failed) or 6 (benchmark failed). Everything else is real.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kbisect import atomic, git, paths, progress, results, runner, scenario
from kbisect.exceptions import (
    EXIT_BENCHMARK,
    EXIT_BOOT,
    BenchmarkError,
    BootError,
    CommandFailed,
    UserError,
)

STORE_ENV = "KBISECT_BISECT_STORE"
FAKE_ENV = "KBISECT_FAKE_MEASURE"
STATE_FILE = "state.json"
STATE_KIND = "bisect-state"


@dataclass(frozen=True)
class Context:
    """What is measured, the same for every revision of one bisection."""

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
    index_base: int = 0  # fake measure only: re-check samples differ from the step's


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
        if s.get("status") == "ok" and s.get("tps") is not None:
            tps.append(float(s["tps"]))
        else:
            failures.append(str(s.get("error") or s.get("status")))
    return tps, failures


def draw(ctx: Context, target: Target) -> float:
    """Take one more sample of target (a boot, or the fake), store it, return its tps."""
    ok, failed = stored(target.out)
    index = target.index_base + len(ok) + len(failed)
    fake = os.environ.get(FAKE_ENV)
    if fake:
        sample = _fake_sample(fake, ctx, target, index)
    else:
        from kbisect import measure  # here: the simulation and the fake path need no QEMU

        sample = measure.sample(target.image, ctx.scen, append=ctx.append, out_dir=target.out,
                                manifest=target.manifest, arch=ctx.arch)
    return float(sample["tps"])


def fake_command(fake: str, image: Path, commit: str, index: int) -> list[str]:
    return [fake, str(image), commit, str(index)]


def _fake_sample(fake: str, ctx: Context, target: Target, index: int) -> dict[str, Any]:
    res = runner.run(fake_command(fake, target.image, target.commit, index), capture=True,
                     check=False)
    status, error, tps = "ok", None, None
    if res.returncode == EXIT_BOOT:
        status, error = "boot-failed", f"fake measure: boot of {target.commit[:12]} failed"
    elif res.returncode == EXIT_BENCHMARK:
        status, error = "benchmark-failed", "fake measure: benchmark failed"
    elif res.returncode != 0:
        raise CommandFailed(f"{fake} exited {res.returncode}: {res.output.strip()[-200:]}")
    else:
        tps = _last_float(fake, res.output)
    sample = {
        "version": 1, "kind": "sample", "created": _now(), "command": progress.reproduce_line(),
        "label": None, "append": ctx.append, "accel": "tcg", "status": status, "error": error,
        "tps": tps, "runs": [], "fingerprint": {}, "timings": {}, "fake_index": index,
        "scenario": {"name": ctx.scen.name, "hash": ctx.scen.hash, "settings": ctx.scen.data},
        "kernel": {"image": str(target.image), "release": None, "commit": target.commit,
                   "config_hash": (target.manifest or {}).get("config_hash"),
                   "manifest": target.manifest},
    }
    results.write_sample(target.out, sample)
    if status == "boot-failed":
        raise BootError(str(error))
    if status == "benchmark-failed":
        raise BenchmarkError(str(error))
    return sample


def _last_float(fake: str, output: str) -> float:
    lines = output.strip().splitlines()
    try:
        return float(lines[-1])
    except (IndexError, ValueError):
        raise CommandFailed(f"{fake} printed {output.strip()[-80:]!r}, not a tps figure") from None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the driver's resume file -------------------------------------------------------


def save(run_dir: Path, data: dict[str, Any]) -> None:
    """Write the run's state atomically (after every step)."""
    atomic.write_json(run_dir / STATE_FILE, {**data, "kind": STATE_KIND, "updated": _now()})


def load(run_dir: Path) -> dict[str, Any]:
    f = run_dir / STATE_FILE
    if not f.is_file():
        raise UserError(f"{run_dir}: not a kbisect bisect run (no {STATE_FILE})")
    data: dict[str, Any] = json.loads(f.read_text())
    return data


def newest_unfinished(root: Path) -> Path:
    """The most recently started bisect run under root that has not finished."""
    runs = []
    for f in root.glob(f"*/{STATE_FILE}"):
        data = json.loads(f.read_text())
        if data.get("kind") == STATE_KIND and data.get("phase") != "done":
            runs.append((data.get("created", ""), f.parent))
    if not runs:
        raise UserError(f"no unfinished bisect run under {root}")
    return max(runs)[1]


# --- `git bisect log` ---------------------------------------------------------------

_MARK = re.compile(r"# (good|bad|skip): \[([0-9a-f]+)\] ?(.*)")
_FIRST = re.compile(r"# first bad commit: \[([0-9a-f]+)\] ?(.*)")
_POSSIBLE = re.compile(r"# possible first bad commit: \[([0-9a-f]+)\] ?(.*)")


@dataclass(frozen=True)
class Mark:
    verdict: str  # good | bad | skip
    commit: str
    subject: str


@dataclass(frozen=True)
class Outcome:
    marks: list[Mark]
    first_bad: str | None  # git named one commit
    candidates: list[str]  # the commit, or the range when skipped commits hide it

    @property
    def finished(self) -> bool:
        return bool(self.candidates)


def parse_log(text: str) -> Outcome:
    """Marks in order, and the answer if git gave one."""
    marks: list[Mark] = []
    first: str | None = None
    candidates: list[str] = []
    for line in text.splitlines():
        if m := _MARK.fullmatch(line):
            marks.append(Mark(m.group(1), m.group(2), m.group(3)))
        elif m := _FIRST.fullmatch(line):
            first = m.group(1)
            candidates = [first]
        elif m := _POSSIBLE.fullmatch(line):
            candidates.append(m.group(1))
    return Outcome(marks, first, candidates)
