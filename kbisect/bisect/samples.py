"""Samples of revisions under bisection: where they are stored, and taking one more.

One store per (repository, scenario hash, --append, --config, arch, target, --patch); in it one
directory per commit holding one JSON file per boot (results.write_sample). A revisited
revision reuses what is stored. The store is shared by `git bisect run bisect/run` by
hand and by `kbisect bisect`, which passes it to each step with --store.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from kbisect.core import digest, paths, progress
from kbisect.core.exceptions import BenchmarkError, BootError
from kbisect.measure import results, retake, sample
from kbisect.measure.record import Sample
from kbisect.scenario import scenario
from kbisect.source import git
from kbisect.source.patches import Patch
from kbisect.targets.base import Kernel, Target

STORE_ENV = "KBISECT_BISECT_STORE"


@dataclass(frozen=True)
class Context:
    """What is measured, and where: the same for every revision of one bisection."""

    scen: scenario.Scenario
    append: str
    target: Target
    policy: retake.Policy = field(default_factory=retake.Policy)  # disturbed: retaken how often
    patches: tuple[Patch, ...] = ()  # applied on every revision built (--patch)


@dataclass(frozen=True)
class Revision:
    """One built revision, and the directory its samples go to."""

    commit: str
    kernel: Kernel
    out: Path


def store_for(
    explicit: Path | None,
    top: Path,
    ctx: Context,
    configs: tuple[str, ...],
    base: str = "tinyconfig",
) -> Path:
    """--store, else $KBISECT_BISECT_STORE, else results/bisect-store/<repo>-<key>."""
    if explicit is not None:
        return explicit.resolve()
    if env := os.environ.get(STORE_ENV):
        return Path(env).resolve()
    common = git.git(top, "rev-parse", "--path-format=absolute", "--git-common-dir")
    parts = [common, ctx.scen.hash, ctx.append, list(configs), ctx.target.arch.name]
    if ctx.target.name != "vng":  # samples of different places never mix
        parts.append(ctx.target.name)
    if base != "tinyconfig":  # nor samples of kernels built from another base config
        parts.append(base)
    if ctx.patches:  # nor samples of kernels built with patches
        parts.append([p.sha256 for p in ctx.patches])
    key = digest.key(parts, 12)  # no tables among the parts: sorting keys changes nothing
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
        if retake.counts(s):
            tps.append(s.tps or 0.0)
        elif s.status not in ("ok", retake.DISTURBED):  # disturbed: neither one
            failures.append(str(s.error))
    return tps, failures


def boot_failures(out: Path) -> int:
    """How many boots of the revision failed to boot (status boot-failed)."""
    if not (out / results.SAMPLES).is_dir():
        return 0
    return sum(1 for s in results.load_samples(out) if s.status == "boot-failed")


def retry_owed(out: Path, tps: list[float], failures: list[str]) -> bool:
    """No figure stored and exactly one failure, a failed boot: the run was interrupted
    between that boot and the one retry draw() gives it, so the retry is still owed (an
    uninterrupted run stores either a figure or two failures)."""
    return not tps and len(failures) == 1 and boot_failures(out) == 1


def loaded(store: Path, commit: str) -> list[Sample]:
    """The stored samples of commit (every status), each at its commit (`revision`)."""
    out = commit_dir(store, commit)
    if not (out / results.SAMPLES).is_dir():
        return []
    return [s.at(commit) for s in results.load_samples(out)]


def draw(ctx: Context, rev: Revision, attempts: int = 2) -> float:
    """One more sample of rev; a boot failure is retried once (both are stored). A panic
    that is the commit's doing fails twice and the step is skipped; a one-off emulation
    hiccup costs one boot. A disturbed sample is retaken once the host is quiet
    (retake.py), counting the retakes already stored for this draw; when they run out
    the draw fails like a benchmark (BenchmarkError: the revision is left untested this
    time; a later draw tries again), since a disturbed sample never counts."""
    stored_now = results.load_samples(rev.out) if (rev.out / results.SAMPLES).is_dir() else []
    slot = retake.Slot(retake.trailing(stored_now))
    for attempt in range(3 - attempts, 3):
        try:
            boot = sample.Boot(rev.kernel, ctx.scen, rev.out, ctx.append)
            taken = retake.take(ctx.target, boot, ctx.policy, slot)
            if taken.status == retake.DISTURBED:
                raise BenchmarkError(
                    f"{rev.commit[:12]}: {slot.used + 1} samples in a row disturbed by other "
                    "work on the host (none counts): run it on a quiet host, or "
                    "--count-disturbed"
                )
            return taken.tps or 0.0
        except BootError as exc:
            if attempt == 2:
                raise
            progress.warn(f"{rev.commit[:12]}: boot failed, retrying once: {exc}")
    raise AssertionError("unreachable")


def drawer(ctx: Context, rev: Revision, attempts: int = 2) -> Callable[[Target], float]:
    """draw() as a boot of a round (bisect/round.py): one sample of rev on the machine
    the round gives it."""
    return lambda target: draw(replace(ctx, target=target), rev, attempts)


def owed_retry(ctx: Context, rev: Revision, failure: str) -> float:
    """The retry of a failed boot whose run was interrupted before it (retry_owed)."""
    progress.warn(f"{rev.commit[:12]}: a stored failed boot, retrying it once: {failure}")
    return draw(ctx, rev, attempts=1)


def top_up(ctx: Context, rev: Revision, n: int) -> list[float]:
    """At least n samples of rev (stored ones count); BootError if a boot failed."""
    tps, failures = stored(rev.out)
    if retry_owed(rev.out, tps, failures):
        tps.append(owed_retry(ctx, rev, failures[-1]))
    elif failures and not tps:
        raise BootError(f"{rev.commit[:12]}: stored failure, not retried: {failures[-1]}")
    while len(tps) < n:
        tps.append(draw(ctx, rev))
    return tps


def interleaved(ctx: Context, a: Revision, b: Revision, n: int) -> tuple[list[float], list[float]]:
    """At least n samples of each, taken alternately so that drift hits both alike."""
    ta: list[float] = []
    tb: list[float] = []
    for k in range(1, n + 1):
        ta = top_up(ctx, a, k)
        tb = top_up(ctx, b, k)
    return ta, tb
