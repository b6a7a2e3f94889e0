"""Where the posterior's search builds and boots revisions: the port (Bench) the search
loop (search.py) reaches them through, and the driver's implementation of it (Store):
builds in the driver's worktree, boots on the target, every sample in the sample store
(a re-check's in the run's recheck folder), read back as evidence; the revert check's
(bad with the answer reverted, against bad: bisect/verify.py) in the run's
verify/<culprit>/{reverted,bad}/ folders. The simulator's implementation
(kbisect/simulate/) builds and boots in a modelled world.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kbisect.bisect import check, recheck, samples, state
from kbisect.bisect import round as pool_round
from kbisect.bisect.posterior.posterior import Posterior
from kbisect.bisect.references import Schedule
from kbisect.bisect.state import Run
from kbisect.core import reading
from kbisect.core.exceptions import BenchmarkError, BuildError, InfraError
from kbisect.measure import record, results, retake, timeline
from kbisect.source import worktree
from kbisect.targets import monitor
from kbisect.targets.base import Target

# a disturbed boot (--count-disturbed keeps it) set against the bad endpoint's quiet ones
# would read the host's load as the revert's effect; the revert check has no load model
DISTURBED = "it ran while other work took the host (the check has no load model)"


@dataclass(frozen=True)
class Sample:
    """One sample as evidence: its time (seconds since the bisection began; earlier
    samples before 0), its tps and the load around it."""

    commit: str
    t: float
    tps: float
    load: float = 0.0
    machine: str = ""  # the pool's machine it ran on ("": the one machine)


RecheckOf = str | Sequence[str | None] | None  # a round's recheck_of: all its boots', or each's


def each(recheck_of: RecheckOf, n: int) -> list[str | None]:
    """The recheck_of of each of a round's n boots."""
    if recheck_of is None or isinstance(recheck_of, str):
        return [recheck_of] * n
    assert len(recheck_of) == n
    return list(recheck_of)


class Bench(Protocol):
    """What the search needs of the world. A failed build raises BuildError, a failed
    boot or benchmark BootError or BenchmarkError (the revision is then untestable)."""

    def boots(self) -> int:
        """Boots since the bisection began (re-checks and references included)."""
        ...

    def stored(self, commit: str) -> tuple[list[Sample], str | None]:
        """Samples of commit stored (by a revisit, another bisection, --method git) and not
        yet evidence; and a stored failure that is not to be retried, if that is all."""
        ...

    def build(self, commit: str) -> None:
        """Build commit (cached per commit)."""
        ...

    def tps(self, commit: str) -> list[float]:
        """Every stored sample's tps of commit (with the rests' reverts), oldest first."""
        ...

    def fresh(self, culprit: str, commit: str) -> list[float]:
        """The tps of commit's fresh samples for the re-check of culprit."""
        ...

    def width(self) -> int:
        """The machines a round samples on at once (1: one target)."""
        ...

    def boot_round(
        self, commits: list[str], recheck_of: RecheckOf = None
    ) -> list[list[Sample] | BaseException]:
        """One sample of each built commit (a commit twice: two samples; a failed boot is
        retried once), at once on the pool's machines (a plain target: one after the
        other); per commit its new evidence, or the BootError or BenchmarkError that
        failed it (the others' samples count). recheck_of: a fresh sample for the
        re-check of that culprit, for every boot of the round or one for each (each())."""
        ...

    def revert(self, culprit: str, members: Sequence[str] = ()) -> str | None:
        """Build BAD with culprit reverted (a merge against its first parent; the --patch
        files and the pass's earlier reverts on top); a range answer's `members` (oldest
        first) all reverted, newest first. None when it is built; else one line
        saying why not ("the revert of X does not apply on bad B", "... does not build: ...")."""
        ...

    def verify_round(self, culprit: str, sides: list[str]) -> list[float | BaseException]:
        """One boot per entry, in order (over a pool at once): of BAD with culprit reverted
        ("revert"), of BAD ("bad") or of the good endpoint ("good"); fresh samples kept for
        the revert check of culprit (good's with the endpoint's). Each boot's tps, or the
        BootError/BenchmarkError that failed it."""
        ...

    def verify_tps(self, culprit: str) -> tuple[list[float], list[float], list[float]]:
        """The check's samples so far: the good endpoint's tps, BAD's (the endpoint's stored
        samples and the check's fresh ones; in a rest, the check's own only: the samples
        of BAD with the earlier answers reverted are the earlier check's, which chose the
        rest because they looked slow, and would read any revert as a help) and the
        revert's."""
        ...

    def rest(self, culprit: str, reverts: Callable[[str], list[str]]) -> None:
        """From now on, every revision that contains culprit (reverts(revision): the commits
        of the answer it contains, newest first; a range answer's several) is built and
        booted with them reverted (on top of the earlier rests' reverts), its
        samples kept apart from its plain ones (stored() and boot_round() name it still);
        a revert that does not apply there is a BuildError. BAD becomes BAD with culprit
        reverted: its samples are the revert check's, and revert() reverts on it."""
        ...

    def save(self, run: Run, post: Posterior, schedule: Schedule | None) -> None:
        """Keep the state (the driver: state.json after every boot)."""
        ...

    def say(self) -> bool:
        """Whether to print progress lines."""
        ...


class Store:
    """The driver's bench: the target, the sample store and the run's folder."""

    def __init__(self, ctx: samples.Context, top: Path, run_dir: Path, run: Run) -> None:
        self.ctx, self.top, self.run_dir, self.run = ctx, top, run_dir, run
        self.t0 = run.bisect_t0 if run.bisect_t0 is not None else math.inf  # git: no search
        self.seen: dict[str, float] = {}  # sample file -> its start time
        self.rows: list[dict[str, Any]] = []  # every sample, for the report
        self.revs: dict[str, samples.Revision] = {}
        self.ends = (run.good, run.bad)
        self.reverts: dict[str, tuple[samples.Revision, samples.Revision]] = {}  # reverted, bad
        self.without: list[tuple[str, Callable[[str], list[str]]]] = []  # the rests' reverts
        self.made: dict[tuple[str, str], str | None] = {}  # (base, culprit) -> revert_onto's
        self.checks: set[str] = set()  # a revert check's samples a rest reads as bad's

    def out(self, commit: str, recheck_of: str | None = None) -> Path:
        """Where commit's samples go: the store's folder of commit (with the rests'
        reverts: of the commit revert_onto made, their own), BAD's with them the last
        revert check's; a re-check's in the run. RevertConflict: a revert does not apply."""
        if recheck_of is not None:
            return recheck.folder(self.run_dir, recheck_of, commit)
        made = self._reverted(commit)
        if made != commit and commit == self.run.bad:
            return verify_dir(self.run_dir, self.without[-1][0]) / "reverted"
        return samples.commit_dir(self.run.store, made)

    def _reverted(self, commit: str) -> str:
        """commit with each rest's revert it contains, in turn (worktree.revert_onto);
        RevertConflict when one does not apply."""
        made = commit
        for _, reverts in self.without:
            for culprit in reverts(commit):
                if (made, culprit) not in self.made:
                    try:
                        self.made[made, culprit] = worktree.revert_onto(self.top, made, culprit)
                    except worktree.RevertConflict:
                        self.made[made, culprit] = None
                if (done := self.made[made, culprit]) is None:
                    raise worktree.RevertConflict(
                        f"the revert of {culprit[:12]} does not apply on {commit[:12]}"
                    )
                made = done
        return made

    def rest(self, culprit: str, reverts: Callable[[str], list[str]]) -> None:
        """Bench.rest; bad's folder is now culprit's revert check's (out()), whose first
        samples, the check's boots, are not the rest's (boots())."""
        self.without.append((culprit, reverts))
        self.rows = [r for r in self.rows if not reverts(str(r["commit"]))]
        v = next(p.verification for p in self.run.passes if p.verification.culprit == culprit)
        taken = results.sample_paths(verify_dir(self.run_dir, culprit) / "reverted")
        self.checks |= {str(p) for p in taken[: len(v.reverted_tps or [])]}

    def evidence(self) -> list[Sample]:
        """The stored samples of every visited revision and re-check (a resumed search)."""
        ends = (self.run.good, self.run.bad)
        found = []
        for commit in self.run.visited:
            role = "reference" if commit in ends else "test"
            if commit not in self.run.failed:
                found += self.feed(commit, self.out(commit), role)
        for culprit, rc in self.run.rechecks.items():
            for commit in (rc.parent, culprit):
                found += self.feed(commit, self.out(commit, culprit), "recheck")
        return found

    def feed(self, commit: str, out: Path, role: str) -> list[Sample]:
        """out's samples not read yet (oldest first), as rows for the report; the ok ones.
        role: test, reference or recheck (samples from before the bisection: endpoint)."""
        if not (out / results.SAMPLES).is_dir():
            return []
        new = []
        for path in results.sample_paths(out):
            if str(path) not in self.seen:
                s = record.Sample.of(reading.json_table(path, reading.SAMPLE_RECOVER))
                self.seen[str(path)] = _when(s)
                new.append(s)
        ok_ones = []
        pooled = self.width() > 1  # each sample's machine in the likelihood
        for s in sorted(new, key=_when):
            if s.status == retake.DISTURBED or (s.tps and not retake.counts(s)):
                continue  # disturbed, not counted (retake.py): no evidence
            ok = retake.counts(s)
            t, load = _when(s) - self.t0, monitor.load(s.disturbance)
            machine = s.machine if pooled else ""
            self.rows.append(
                {
                    "commit": commit,
                    "t": t,
                    "tps": s.tps if ok else None,
                    "load": load,
                    "role": role if t >= 0 else self._before(commit),
                    "error": s.error,
                }
            )
            if ok:
                ok_ones.append(Sample(commit, t, s.tps or 0.0, load, machine))
        return ok_ones

    def _before(self, commit: str) -> str:
        """The role of a sample taken before the bisection began."""
        return "endpoint" if commit in (self.run.good, self.run.bad) else "stored"

    def _role(self, commit: str) -> str:
        return "reference" if commit in (self.run.good, self.run.bad) else "test"

    def boots(self) -> int:
        return sum(t >= self.t0 for p, t in self.seen.items() if p not in self.checks)

    def stored(self, commit: str) -> tuple[list[Sample], str | None]:
        try:
            out = self.out(commit)
        except worktree.RevertConflict:
            return [], None  # build() says so
        tps, failures = samples.stored(out)
        if samples.retry_owed(out, tps, failures):  # interrupted before its retry
            return [], None
        if failures and not tps:
            return [], failures[-1]
        return self.feed(commit, out, self._role(commit)), None

    def tps(self, commit: str) -> list[float]:
        return samples.stored(self.out(commit))[0]

    def build(self, commit: str) -> None:
        try:
            made, out = self._reverted(commit), self.out(commit)
        except worktree.RevertConflict as exc:
            raise BuildError(str(exc)) from None
        self.revs[commit] = check.revision(self.ctx, self.top, made, self.run.options, out)

    def _next(self, commit: str, recheck_of: str | None) -> tuple[samples.Revision, int, str]:
        """A boot of commit: its revision (the store its sample goes to), the draw's
        attempts (1: a stored failure is owed its one retry) and the sample's role."""
        out = self.out(commit, recheck_of)
        rev = samples.Revision(commit, self.revs[commit].kernel, out)
        owed = recheck_of is None and samples.retry_owed(out, *samples.stored(out))
        role = "recheck" if recheck_of is not None else self._role(commit)
        return rev, 1 if owed else 2, role

    def fresh(self, culprit: str, commit: str) -> list[float]:
        return samples.stored(self.out(commit, culprit))[0]

    def width(self) -> int:
        return pool_round.width(self.ctx.target, self.run.options.batch)

    def boot_round(
        self, commits: list[str], recheck_of: RecheckOf = None
    ) -> list[list[Sample] | BaseException]:
        """The round's boots through round.take_round, each drawn by samples.draw on the
        machine it is given; then each commit's new samples (a commit twice in the
        round: the first gets both)."""
        whose = each(recheck_of, len(commits))
        nexts = [self._next(c, r) for c, r in zip(commits, whose, strict=True)]
        boots = [samples.drawer(self.ctx, rev, attempts) for rev, attempts, _ in nexts]
        taken = pool_round.take_round(self.ctx.target, boots)
        found: list[list[Sample] | BaseException] = []
        for (rev, _, role), got in zip(nexts, taken, strict=True):
            new = self.feed(rev.commit, rev.out, role)
            found.append(got if isinstance(got, BaseException) and not new else new)
        return found

    def revert(self, culprit: str, members: Sequence[str] = ()) -> str | None:
        out, bad = verify_dir(self.run_dir, culprit), self.run.bad
        try:
            base = reverted = self._reverted(bad)
            for commit in reversed(members or [culprit]):
                reverted = worktree.revert_onto(self.top, reverted, commit)
            made = check.revision(self.ctx, self.top, reverted, self.run.options, out / "reverted")
            bad_rev = check.revision(self.ctx, self.top, base, self.run.options, out / "bad")
        except worktree.RevertConflict:
            return f"the revert of {culprit[:12]} does not apply on bad {bad[:12]}"
        except BuildError as exc:
            return f"BAD with {culprit[:12]} reverted does not build: {exc}"
        self.reverts[culprit] = (made, bad_rev)
        if (v := self.run.verification) is not None and v.culprit == culprit:
            v.reverted = reverted
        return None

    def verify_round(self, culprit: str, sides: list[str]) -> list[float | BaseException]:
        reverted, bad = self.reverts[culprit]
        if "good" in sides and self.run.good not in self.revs:
            self.build(self.run.good)
        revs = {"revert": reverted, "bad": bad, "good": self.revs.get(self.run.good)}
        boots = [_quiet(self.ctx, revs[side]) for side in sides]  # type: ignore[arg-type]
        got: list[float | BaseException] = list(pool_round.take_round(self.ctx.target, boots))
        if "good" in sides:  # good's boots are the endpoint's samples: in the report's rows
            self.feed(self.run.good, self.out(self.run.good), "reference")
        return got

    def verify_tps(self, culprit: str) -> tuple[list[float], list[float], list[float]]:
        out = verify_dir(self.run_dir, culprit)
        good, bad = (samples.stored(self.out(c))[0] for c in self.ends)
        if self.without:  # a rest's: the check's own (verify_tps)
            bad = []
        return good, bad + samples.stored(out / "bad")[0], samples.stored(out / "reverted")[0]

    def save(self, run: Run, post: Posterior, schedule: Schedule | None) -> None:
        if schedule is not None:
            run.schedule = {"tests": schedule.tests, "turn": schedule.turn}
        run.posterior = post.as_dict()
        run.samples = sorted(self.rows, key=lambda r: float(r["t"]))
        state.save(self.run_dir, run)

    def say(self) -> bool:
        return True


def verify_dir(run_dir: Path, culprit: str) -> Path:
    """Where the revert check of culprit stores its samples (`reverted/`, `bad/`)."""
    return run_dir / "verify" / culprit


def _quiet(ctx: samples.Context, rev: samples.Revision) -> Callable[[Target], float]:
    """A boot of the revert check: one that ran disturbed (counted: --count-disturbed)
    fails the check (DISTURBED)."""

    def boot(target: Target) -> float:
        tps = samples.drawer(ctx, rev)(target)
        if results.load_samples(rev.out)[-1].disturbed:
            raise BenchmarkError(DISTURBED)
        return tps

    return boot


def _when(sample: record.Sample) -> float:
    """When a stored sample was taken (every one has a time)."""
    t = timeline.when(sample)
    if t is None:
        raise InfraError(f"a stored sample without a time: {sample.boot_dir}")
    return t
