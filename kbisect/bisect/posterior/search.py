"""`kbisect bisect --method posterior`: the driver's loop over the posterior.

Every sample is evidence (posterior.py): the endpoints', every revision's, the
references' and the re-check's. Each round, until `--max-boots` boots after the
endpoints (re-checks and references included):

1. stop: when one commit, or a group no test can split (a range), holds `--confidence`,
   re-check it once (recheck.py: fresh pairs of it and its parent until the ratio's
   interval clears the minimum effect); the fresh samples feed the posterior, and the
   search ends if the answer still holds, or goes on if it does not;
2. a reference boot when one is due (references.Schedule: after every `--references` test
   boots, the good, then the bad endpoint; the posterior then fits a time trend);
3. else the revision with the most expected information per cost (choice.py): its stored
   samples first (a revisit, another bisection's, `--method git`'s), else it is built in
   the driver's worktree (check.revision) and booted once (samples.draw). A build or
   boot failure makes it untestable: no evidence, never a verdict.

The state (visited revisions, failures, re-checks, the reference schedule) is saved in
state.json after every boot, with the posterior's `as_dict()`; `--resume` rebuilds the
posterior from the stored samples of the visited revisions.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kbisect.bisect import check, recheck, references, samples, state
from kbisect.bisect.posterior import graph
from kbisect.bisect.posterior.choice import Cost
from kbisect.bisect.posterior.likelihood import Model
from kbisect.bisect.posterior.posterior import Answer, Posterior
from kbisect.bisect.state import Run
from kbisect.core import progress
from kbisect.core.exceptions import BenchmarkError, BootError, BuildError, InfraError
from kbisect.measure import results, retake, timeline
from kbisect.targets import monitor

BUILD_COST = 0.15  # a build, in boots: an incremental build ~20 s against a ~2.5 min boot


class Search:
    """One posterior bisection: the posterior, and the samples already in it."""

    def __init__(self, ctx: samples.Context, top: Path, run_dir: Path, run: Run) -> None:
        self.ctx, self.top, self.run_dir, self.run = ctx, top, run_dir, run
        self.opts = run.options
        if run.bisect_t0 is None:  # the search begins
            run.bisect_t0 = time.time()
            run.visited = [run.good, run.bad]
        self.t0 = run.bisect_t0
        self.graph = graph.read(top, [run.good], run.bad)
        self.post = Posterior(self.graph, Model(trend=self.opts.references > 0))
        self.seen: dict[str, float] = {}  # sample file -> its start time
        self.rows: list[dict[str, Any]] = []  # every sample, for the report
        self.schedule = None
        if self.opts.references > 0:
            turn = run.schedule or {"tests": 0, "turn": 0}
            self.schedule = references.Schedule(
                run.good, run.bad, self.opts.references, turn["tests"], turn["turn"]
            )
        self._rebuild()

    # --- evidence -----------------------------------------------------------------------

    def _rebuild(self) -> None:
        """The posterior from the stored samples of every visited revision and re-check."""
        ends = (self.run.good, self.run.bad)
        for commit in self.run.visited:
            role = "reference" if commit in ends else "test"
            self.feed(commit, samples.commit_dir(self.run.store, commit), role)
        for culprit, rc in self.run.rechecks.items():
            for commit in (rc["parent"], culprit):
                self.feed(commit, recheck.folder(self.run_dir, culprit, commit), "recheck")
        for commit in self.run.failed:
            self.post.failed(commit)

    def feed(self, commit: str, out: Path, role: str) -> int:
        """Add out's samples not in the posterior yet (oldest first); how many were ok.
        role: test, reference or recheck (samples from before the bisection: endpoint)."""
        if not (out / results.SAMPLES).is_dir():
            return 0
        new = []
        for path in results.sample_paths(out):
            if str(path) not in self.seen:
                s = json.loads(path.read_text())
                self.seen[str(path)] = _when(s)
                new.append(s)
        added = 0
        for s in sorted(new, key=_when):
            if s.get("status") == retake.DISTURBED:  # kept aside and retaken: no evidence
                continue
            ok = s.get("status") == "ok" and bool(s.get("tps"))
            t, load = self.t(s), monitor.load(s)
            self.rows.append(
                {
                    "commit": commit,
                    "t": t,
                    "tps": s["tps"] if ok else None,
                    "load": load,
                    "role": role if t >= 0 else self._before(commit),
                    "error": s.get("error"),
                }
            )
            if ok:
                self.post.update(commit, float(s["tps"]), t, load)
                added += 1
        return added

    def _before(self, commit: str) -> str:
        """The role of a sample taken before the bisection began."""
        return "endpoint" if commit in (self.run.good, self.run.bad) else "stored"

    def t(self, sample: dict[str, Any]) -> float:
        """A sample's time for the posterior: seconds since the bisection began."""
        return _when(sample) - self.t0

    def boots(self) -> int:
        """Boots since the bisection began (the endpoints' are before it)."""
        return sum(t >= self.t0 for t in self.seen.values())

    def fail(self, commit: str, why: str) -> None:
        progress.step(f"{commit[:12]} is untestable (no evidence, never a verdict): {why}")
        self.run.failed[commit] = why
        self.post.failed(commit)

    def save(self) -> None:
        if self.schedule is not None:
            self.run.schedule = {"tests": self.schedule.tests, "turn": self.schedule.turn}
        self.run.posterior = self.post.as_dict()
        self.run.samples = sorted(self.rows, key=lambda r: float(r["t"]))
        state.save(self.run_dir, self.run)

    # --- one round ------------------------------------------------------------------------

    def find(self) -> Answer:
        """Sample until the answer holds after its re-check, or nothing can split the
        rest, or the budget is spent; the final answer."""
        while self.boots() < self.opts.max_boots:
            answer = self.post.stop(self.opts.confidence)
            if answer is not None:
                if not recheck.due(self.run, answer):
                    break
                recheck.run(self, answer)
            elif not self._reference() and not self._test():
                break
            self.save()
        self.save()
        return self.post.answer(self.opts.confidence)

    def revision(self, commit: str) -> samples.Revision:
        """commit built (cached per commit) with its store directory."""
        return check.revision(
            self.ctx, self.top, commit, self.opts, samples.commit_dir(self.run.store, commit)
        )

    def _reference(self) -> bool:
        """One reference boot if one is due; a failure is a warning (it booted before)."""
        ref = self.schedule.due() if self.schedule is not None else None
        if ref is None or self.schedule is None:
            return False
        progress.step(f"reference: {'good' if ref == self.run.good else 'bad'} {ref[:12]}")
        try:
            samples.draw(self.ctx, self.revision(ref))
        except (BootError, BenchmarkError) as exc:
            progress.warn(f"reference {ref[:12]} failed, no sample this time: {exc}")
        self.feed(ref, samples.commit_dir(self.run.store, ref), "reference")
        self.schedule.took(ref)
        return True

    def _test(self) -> bool:
        """One more sample of the best revision; False when no test can split the rest."""
        commit = self.post.next(Cost(build=BUILD_COST))
        if commit is None:
            return False
        p = self.post.p_bad(commit) if commit in self.graph.index else 0.0
        progress.step(f"testing {commit[:12]} (P(bad) = {p:.2f})")
        out = samples.commit_dir(self.run.store, commit)
        tps, failures = samples.stored(out)
        owed = samples.retry_owed(out, tps, failures)  # interrupted before its retry
        if failures and not tps and not owed:
            self.fail(commit, f"stored failure, not retried: {failures[-1]}")
            return True
        if commit not in self.run.visited:
            self.run.visited.append(commit)
        if not owed and self.feed(commit, out, "test"):
            progress.step(f"reusing stored sample(s) of {commit[:12]}")
            return True
        try:
            rev = self.revision(commit)
            self.post.built(commit)
            tps_now = samples.draw(self.ctx, rev, attempts=1 if owed else 2)
        except BuildError as exc:
            self.fail(commit, f"build failed: {exc}")
            return True
        except (BootError, BenchmarkError) as exc:
            self.feed(commit, out, "test")
            kind = "boot" if isinstance(exc, BootError) else "benchmark"
            self.fail(commit, f"{kind} failed: {exc}")
            return True
        self.feed(commit, out, "test")
        if self.schedule is not None:
            self.schedule.took(commit)
        progress.step(f"{commit[:12]}: {tps_now:.1f} tps; {self._standing()}")
        return True

    def _standing(self) -> str:
        probs = self.post.probabilities()
        best = max(range(self.graph.n), key=lambda i: probs[i])
        return f"most likely {self.graph.commits[best][:12]} at P = {probs[best]:.3f}"


def _when(sample: dict[str, Any]) -> float:
    """When a sample this bisection stored was taken (every one has a time)."""
    t = timeline.when(sample)
    if t is None:
        raise InfraError(f"a stored sample without a time: {sample.get('boot_dir')}")
    return t
