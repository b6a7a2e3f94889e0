"""One `git bisect run` step, answered in git's exit codes.

git runs bisect/run in the checkout under bisection (kbisect/commands/bisect_step.py is
its way in). The step builds the checked-out revision in place, then boots and measures
it until `sequential.decide()` gives a verdict against the threshold (or, with
references, against its position between them), and answers:

    0 good · 1 bad · 125 skip (build, boot or benchmark failed, or no clear verdict
    after --runs-max) · 128 abort the whole bisect (bad options, a missing tool,
    broken infrastructure, a bug).

A build or boot failure is never "bad". Samples are stored per commit (samples.py); a
revisited revision reuses them and only adds if needed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.bisect import samples
from kbisect.bisect.git import judge, liveness, log
from kbisect.core import atomic, progress
from kbisect.core.arch import Arch
from kbisect.core.exceptions import BenchmarkError, BootError, BuildError, KbisectError, UserError
from kbisect.kernel import build
from kbisect.measure import retake
from kbisect.pgbuild import request
from kbisect.scenario import scenario
from kbisect.source import git, patches, tree
from kbisect.source.patches import Patch
from kbisect.stats import sequential
from kbisect.targets import registry
from kbisect.targets.base import Kernel

GOOD, BAD, SKIP, ABORT = 0, 1, 125, 128
EXIT_FOR = {"good": GOOD, "bad": BAD, "unclear": SKIP}


def build_here(
    top: Path,
    arch: Arch,
    configs: tuple[str, ...],
    base: str = "tinyconfig",
    with_patches: tuple[Patch, ...] = (),
) -> build.BuildResult:
    """Build the checkout at top as it is (in place; cached per commit), or its commit
    with the --patch files on top (in kbisect's build worktree). A patch that does not
    apply on this revision fails its build: the revision is skipped, never bad."""
    req = build.Request(
        top, "HEAD", arch=arch, configs=configs, base=base, in_place=True, patches=with_patches
    )
    try:
        return build.build(req)
    except patches.PatchDoesNotApply as exc:
        raise BuildError(str(exc)) from None


def describe(commit: str, d: sequential.Decision) -> str:
    """The one line that logs a decision with its numbers."""
    return f"step: {commit[:12]} {d.verdict}: {d.reason}"


def _record(
    out: Path,
    commit: str,
    verdict: str,
    reason: str,
    threshold: float,
    skip: str | None = None,
    d: sequential.Decision | None = None,
) -> None:
    """step.json: this visit's verdict, for the report and the driver's second pass.

    skip: why the revision was skipped: "build", "boot", "benchmark" or "unclear".
    """
    numbers = d.as_dict() if d is not None else {}
    atomic.write_json(
        out / "step.json",
        {
            **numbers,
            "commit": commit,
            "verdict": verdict,
            "reason": reason,
            "skip": skip,
            "threshold": threshold,
        },
    )


def _skip_kind(exc: Exception) -> str:
    if isinstance(exc, BuildError):
        return "build"
    return "boot" if isinstance(exc, BootError) else "benchmark"


@dataclass(frozen=True)
class Step:
    """What one step measures and how it judges: everything `kbisect bisect-step` (and
    bisect/run) was asked, typed once by the command line."""

    scenario: str
    threshold: float | None = None
    target: str = "vng"
    arch: str | None = None
    append: str = ""
    configs: tuple[str, ...] = ()
    sets: tuple[str, ...] = ()
    base_config: str = "tinyconfig"
    higher_is_better: bool = True
    runs_min: int = 3
    runs_max: int = 10
    policy: retake.Policy = field(default_factory=retake.Policy)
    store: Path | None = None
    references: tuple[str, str] | None = None  # (good, bad) sampled alongside, or None
    reference_every: int = 3  # a reference boot after every N test boots
    patches: tuple[Path, ...] = ()  # applied on every revision, in order
    pg_build: str | None = None  # the PostgreSQL server every revision runs, built
    pg_patch: tuple[Path, ...] = ()  # on pg_build, in order

    def judge_policy(self) -> judge.Policy:
        policy = judge.Policy(
            self.threshold or 1.0, self.higher_is_better, self.runs_min, self.runs_max
        )
        policy.check()
        return policy


def references(
    good: str | None, bad: str | None, threshold: float | None
) -> tuple[str, str] | None:
    """(good, bad) references, or None; UserError without them and without a threshold."""
    if (good is None) != (bad is None):
        raise UserError("--reference-good and --reference-bad go together")
    if good is None and threshold is None:
        raise UserError("--threshold TPS is needed (or --reference-good and --reference-bad)")
    return None if good is None or bad is None else (good, bad)


def step(spec: Step) -> int:
    """Build the checkout in the current directory, measure it until the rule answers;
    git's exit code (0 good, 1 bad, 125 skip). Errors other than a build, boot or
    benchmark failure are raised (the caller aborts the bisect on them)."""
    liveness.check_driver()
    policy = spec.judge_policy()
    top = tree.check_kernel_tree(Path.cwd())
    sets = [*spec.sets, *server_sets(spec)]
    with registry.get(spec.target, spec.arch) as target:
        scen = scenario.load(spec.scenario).with_overrides(sets)
        ctx = samples.Context(
            scen, spec.append, target, spec.policy, patches.read_all(spec.patches)
        )
        store = samples.store_for(spec.store, top, ctx, spec.configs, spec.base_config)
        commit = git.rev_parse(top, "HEAD")
        out = samples.commit_dir(store, commit)
        progress.step(f"step: {commit[:12]} {git.subject(top, commit)}")
        target.preflight(ctx.scen)
        refs = _references(ctx, top, spec, store) if spec.references else None
        threshold = policy.threshold
        try:
            built = build_here(top, target.arch, spec.configs, spec.base_config, ctx.patches)
            rev = samples.Revision(commit, Kernel(built.image, built.manifest), out)
            if refs is None:
                _warn_stale(top, store)
                d = judge.judge(ctx, policy, rev)
            else:
                d, threshold, slope = judge.judge_with_refs(ctx, policy, rev, refs, store)
                progress.step(
                    f"step: drift-corrected threshold {threshold:.1f} tps at the start, "
                    f"drift {slope * 3600:+.2%} per hour"
                )
        except (BuildError, BootError, BenchmarkError) as exc:
            return _skip(out, commit, exc, threshold)
    code = EXIT_FOR[d.verdict]
    progress.step(describe(commit, d))
    verdict = {GOOD: "good", BAD: "bad"}.get(code, "skip")
    skip = "unclear" if code == SKIP else None
    _record(out, commit, verdict, d.reason, threshold, skip, d)
    return code


def server_sets(spec: Step) -> tuple[str, ...]:
    """The overrides naming --pg-build's server, built by the first step and found in the
    cache by every later one (a build that fails aborts the bisect: it is no revision's
    fault). `kbisect bisect` passes its build's key instead (--set postgres.build=KEY)."""
    if spec.pg_build is None:
        return ()
    return request.Request(spec.pg_build, spec.pg_patch).make().sets


def _references(ctx: samples.Context, top: Path, spec: Step, store: Path) -> judge.References:
    """The references built (cached per commit; else in kbisect's build worktree). One
    that does not build is bad input, not this revision's skip."""
    assert spec.references is not None
    revs = []
    for rev in spec.references:
        commit = git.rev_parse(top, rev)
        req = build.Request(
            top,
            commit,
            arch=ctx.target.arch,
            configs=spec.configs,
            base=spec.base_config,
            patches=ctx.patches,
        )
        try:
            built = build.build(req)
        except BuildError as exc:
            raise UserError(f"reference {rev} does not build: {exc}") from None
        kernel = Kernel(built.image, built.manifest)
        revs.append(samples.Revision(commit, kernel, samples.commit_dir(store, commit)))
    return judge.References(revs[0], revs[1], spec.reference_every)


def _warn_stale(top: Path, store: Path) -> None:
    """A fixed threshold: say so when the endpoints' stored samples are old or drifted."""
    marks = log.parse(git.git(top, "bisect", "log", check=False)).marks
    firsts = {m.verdict: m.commit for m in reversed(marks) if m.verdict in ("good", "bad")}
    if "good" in firsts and "bad" in firsts:
        good, bad = (git.rev_parse(top, firsts[v]) for v in ("good", "bad"))
        for line in judge.stale_warning(store, good, bad, time.time()):
            progress.warn(line)


def _skip(out: Path, commit: str, exc: Exception, threshold: float) -> int:
    kind = _skip_kind(exc)
    progress.step(f"step: {commit[:12]} skip: {kind} failed: {exc}")
    _record(out, commit, "skip", f"{kind} failed: {exc}", threshold, kind)
    return SKIP


def bisecting(where: Path) -> bool:
    """Is a `git bisect` in progress in the checkout at `where`?"""
    try:
        start = git.git(where, "rev-parse", "--path-format=absolute", "--git-path", "BISECT_START")
    except KbisectError:
        return False
    return Path(start).is_file()
