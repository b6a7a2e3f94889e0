"""How one `git bisect run` step judges a revision: sequential sampling against a
threshold (sequential.py), optionally with drift-aware references (drift.py).

Without references the threshold is fixed (`--threshold`, the driver's geometric mean of
the endpoint means). With references (`--reference-good G --reference-bad B`), one boot of
G or B (in turn) follows every `--reference-every` boots of revisions under test, across
steps (the schedule is kept in the sample store); the common drift of the references'
stored samples over time is fitted (drift.correction), and the revision is decided on its
samples brought back to time 0 along it, against the references' geometric mean brought
back the same way: its position between the references, not against a stale figure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbisect.bisect import references, samples, wallclock
from kbisect.core import progress
from kbisect.core.exceptions import BenchmarkError, BootError, UserError
from kbisect.measure import timeline
from kbisect.stats import drift, sequential

STALE_S = 3600.0  # endpoint samples older than this make a fixed threshold suspect


@dataclass(frozen=True)
class Policy:
    """How a revision is judged: against a threshold, with sequential sampling."""

    threshold: float
    higher_is_better: bool = True
    runs_min: int = 3
    runs_max: int = 10

    def check(self) -> None:
        if not self.threshold > 0:
            raise UserError(f"--threshold {self.threshold}: must be a positive tps figure")
        if not 2 <= self.runs_min <= self.runs_max:
            raise UserError(
                f"--runs-min {self.runs_min} --runs-max {self.runs_max}: "
                "need 2 <= runs-min <= runs-max"
            )


def decide(tps: list[float], policy: Policy, threshold: float) -> sequential.Decision:
    """sequential.decide, or "unclear" once runs_max samples are in and it wants more."""
    d = sequential.decide(
        tps,
        threshold,
        higher_is_better=policy.higher_is_better,
        runs_min=policy.runs_min,
        runs_max=policy.runs_max,
    )
    if d.verdict == "more" and len(tps) >= policy.runs_max:
        why = f"still unclear after {len(tps)} samples"
        return sequential.Decision("unclear", why, d.mean, d.low, d.high, d.n)
    return d


def sample_until(
    tps: list[float], draw: Callable[[], float], policy: Policy
) -> sequential.Decision:
    """Add samples (draw() each) to `tps` until the decision is not "more"."""
    while (d := decide(tps, policy, policy.threshold)).verdict == "more":
        tps.append(draw())
    return d


def judge(ctx: samples.Context, policy: Policy, rev: samples.Revision) -> sequential.Decision:
    """The verdict on a built revision; BootError/BenchmarkError (skip it) if a boot failed."""
    tps, failures = samples.stored(rev.out)
    if samples.retry_owed(rev.out, tps, failures):
        tps.append(samples.owed_retry(ctx, rev, failures[-1]))
    elif failures and not tps:
        raise BootError(f"stored failure, not retried: {failures[-1]}")
    if tps:
        progress.step(f"reusing {len(tps)} stored sample(s) of {rev.commit[:12]}")
    return sample_until(tps, lambda: samples.draw(ctx, rev), policy)


@dataclass(frozen=True)
class References:
    """The good and bad references, built, and how often to boot one."""

    good: samples.Revision
    bad: samples.Revision
    every: int


def judge_with_refs(
    ctx: samples.Context, policy: Policy, rev: samples.Revision, refs: References, store: Path
) -> tuple[sequential.Decision, float, float]:
    """The verdict on rev's samples brought back along the references' drift; with the
    threshold (at time 0) and the slope (log tps per second) it was decided with."""
    tps, failures = samples.stored(rev.out)
    if samples.retry_owed(rev.out, tps, failures):
        samples.owed_retry(ctx, rev, failures[-1])  # stored: read back with the rest below
    elif failures and not tps:
        raise BootError(f"stored failure, not retried: {failures[-1]}")
    schedule = references.in_store(store, refs.good.commit, refs.bad.commit, refs.every)
    ends = (refs.good.commit, refs.bad.commit)

    def draw(commit: str) -> None:
        if commit == rev.commit:
            samples.draw(ctx, rev)
        else:
            _reference(ctx, refs.good if commit == refs.good.commit else refs.bad)

    return sample_with_refs(
        rev.commit,
        policy,
        schedule,
        lambda: wallclock.store_rows(store, [*ends, rev.commit]),
        draw,
        lambda: references.save_in_store(store, schedule),
    )


def sample_with_refs(
    commit: str,
    policy: Policy,
    schedule: references.Schedule,
    rows: Callable[[], list[drift.Timed]],
    draw: Callable[[str], object],
    took: Callable[[], None] = lambda: None,
) -> tuple[sequential.Decision, float, float]:
    """Sample commit (draw(commit)) and the references when due (draw(reference)) until
    the decision on commit's samples, brought back along the references' drift, is not
    "more"; rows(): the timed samples of the references and of commit so far; took():
    after each boot, the schedule updated. The decision, the threshold (at time 0) and
    the slope (log tps per second) it was decided with."""
    ends = (schedule.good, schedule.bad)
    while True:
        every = rows()
        ref_rows = [r for r in every if r.revision in ends]
        slope = drift.correction(ref_rows)
        threshold = drift.threshold(ref_rows, *ends, slope)
        own = drift.detrended([r for r in every if r.revision == commit], slope)
        d = decide(own, policy, threshold)
        if d.verdict != "more":
            return d, threshold, slope
        ref = schedule.due()
        draw(ref or commit)
        schedule.took(ref or commit)
        took()


def _reference(ctx: samples.Context, ref: samples.Revision) -> None:
    progress.step(f"reference boot: {ref.commit[:12]}")
    try:
        samples.draw(ctx, ref)
    except (BootError, BenchmarkError) as exc:  # it booted before: not this revision's fault
        progress.warn(f"reference {ref.commit[:12]} failed, no sample this time: {exc}")


def stale_warning(store: Path, good: str, bad: str, now: float) -> list[str]:
    """Lines for a step with a fixed threshold: the endpoints' stored samples are old, or
    drifted while they were taken."""
    loaded = [s for c in (good, bad) for s in samples.loaded(store, c)]
    if not loaded:
        return []
    out = []
    age = now - max(timeline.when(s) or now for s in loaded)
    if age > STALE_S:
        out.append(
            f"the threshold comes from endpoint samples {timeline.span(age)} old: if the host "
            f"changed since, it is stale; pass --reference-good {good[:12]} --reference-bad "
            f"{bad[:12]} to re-measure them alongside (one boot in 4 more)"
        )
    rows = timeline.timed(loaded, lambda s: s.revision)
    line = timeline.check(
        rows,
        "the endpoints' stored samples",
        "not corrected (a fixed threshold): pass --reference-good/--reference-bad",
    )[1]
    return out + ([line] if line else [])
