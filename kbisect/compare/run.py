"""`kbisect compare`: two sides measured fairly, a ratio with its uncertainty, a verdict.

A new run checks and builds both sides, saves its plan (the boot order, interleaved:
schedule.py) before the first boot, then boots in that order; a failed boot is kept out
of the statistics and retried, a disturbed sample never counts: it is retaken in place
once the host is quiet (measure/retake.py). A slot whose retakes ran out is left out of
the verdict, which says so; `--resume` takes such slots again before anything else. An
interrupted run resumes from its plan and samples (`--resume`). The verdict, the summary
and the report come from the stored samples (summary.py, markdown.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from kbisect.compare import machines, markdown, pgsides, schedule, sequential
from kbisect.compare import report as compare_report
from kbisect.compare import sides as sides_mod
from kbisect.compare import summary as summaries
from kbisect.compare.sides import NAMES, Side, Spec
from kbisect.core import clock, lock, paths, progress
from kbisect.core.exceptions import EXIT_NEGATIVE, EXIT_OK, BenchmarkError, BootError, UserError
from kbisect.db import noise, runs, schema
from kbisect.kernel import make
from kbisect.measure import results, retake, sample, timeline
from kbisect.measure.record import Sample
from kbisect.scenario import scenario
from kbisect.stats import stopping
from kbisect.targets import registry
from kbisect.targets.base import Target
from kbisect.targets.pool import dispatch


def start(spec: Spec, policy: retake.Policy) -> int:
    """A new compare: sides checked and built, the plan saved, then every boot; the exit
    code of the verdict (1 for a regression)."""
    sides_mod.check_conflicts(spec)
    base_scen = scenario.load(spec.scenario)
    if pgsides.asked(spec):
        pgsides.check(spec, base_scen)
    a, b = (sides_mod.side(x, spec, base_scen) for x in NAMES)

    repo = sides_mod.resolve_revisions(spec, a, b)
    if pgsides.asked(spec):
        pgsides.apply(spec, (a, b))
    sides_mod.validate(a, b)
    boots, rule = _boots(spec, base_scen)
    target = registry.get(spec.target, spec.arch)
    results.check_out(spec.out, "compare", paths.results_need(2 * boots * (spec.retries + 1)))
    if repo is not None:
        paths.check(paths.cache_dir(), 2 * paths.PER_BUILD, "the cache")
        make.check_dir(paths.cache_dir(), "the cache")
    with target:
        for side in (a, b):  # each side's scenario may pin another server
            target.preflight(side.scen)
        for side in (a, b):
            if side.kernel is not None:
                target.validate(side.kernel)
        for side in (a, b):
            if repo is not None:
                sides_mod.build_side(repo, side, target, spec.configs, spec.base_config)
        out = results.out_dir(spec.out, "compare", base_scen.name)  # written from here on
        machines = [m.name for m in dispatch.members(target)]
        sides_order, where = schedule.order(boots, spec.order, spec.seed, machines)
        if len(machines) > 1 and rule is not None:
            rule = sequential.over_pool(rule, where)  # a look per round of the machines
        choose = False
        if rule is not None and len(machines) < 2:
            rule, choose = sequential.asked(rule, spec.noise_prior)
        plan = schedule.Plan(
            progress.reproduce_line(),
            paths.saved(spec.scenario),
            {"A": a.to_plan(), "B": b.to_plan()},
            sides_order,
            spec.retries,
            paths.saved(spec.target),
            target.arch.name,
            policy,
            spec.min_effect,
            time.time(),
            version=1,
            created=clock.utc_now(),
            scenario_id={"name": base_scen.name, "hash": a.scen.hash},
            target_described=target.describe(),
            scheme=spec.order,
            seed=spec.seed,
            machines=where if len(machines) > 1 else None,
            rule=rule,
            choose_prior=choose,
        )
        return _run(target, {"A": a, "B": b}, plan, out)


def _boots(spec: Spec, scen: scenario.Scenario) -> tuple[int, stopping.Rule | None]:
    """The boots a side the plan holds, and the sequential rule: --boots N, or else the
    scenario file's [compare] boots, is a fixed count; --boots auto, or --max-boots, or
    neither count given, the rule up to --max-boots (stopping.MOST) a side."""
    own = (scen.raw.get("compare") or {}).get("boots")
    if spec.boots == sequential.AUTO or (
        spec.boots is None and (spec.max_boots is not None or own is None)
    ):
        rule = stopping.Rule.upto(spec.max_boots or stopping.MOST, spec.min_effect)
        return rule.most, rule
    return int(spec.boots or scen.data["compare"]["boots"]), None


def resume(given: Path | None) -> int:
    out = given or schedule.newest_unfinished(paths.results_dir())
    if (out / results.SUMMARY).exists():
        if not (out / markdown.REPORT).exists():
            return _finish(out)
        if not _left_disturbed(out):
            raise UserError(f"{out}: this compare has finished (see its report.md)")
    plan = schedule.load(out)
    sides = {x: Side.from_plan(x, plan.sides[x], plan.scenario) for x in NAMES}
    plan.resumed += 1
    progress.step(f"resuming {out}; its saved options apply")
    with registry.get(plan.target, plan.arch) as target:
        for side in sides.values():
            target.preflight(side.scen)
        return _run(target, sides, plan, out)


def _left_disturbed(out: Path) -> bool:
    """A finished run with slots left disturbed, which --resume takes again."""
    if not (out / schedule.PLAN).is_file():
        return False
    plan = schedule.load(out)
    stored = results.load_samples(out)
    return bool(schedule.standing(plan.order, plan.retries, stored).open)


def _finish(out: Path) -> int:
    """A compare interrupted after its summary, before its report: write the report; exit
    as the run would have."""
    progress.step(f"{out}: all boots were done; writing the report it was interrupted in")
    kind = results.load_summary(out)["verdict"]["kind"]
    print(f"report: {markdown.render(out)[0]}")
    return EXIT_NEGATIVE if kind == "regression" else EXIT_OK


@contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """One process per run directory: a resume while the run still goes on is refused."""
    with lock.hold(
        out / ".compare.lock",
        wait=False,
        busy=lambda pid: f"{out}: a kbisect compare (pid {pid}) is still running there",
    ):
        yield


def _run(target: Target, sides: dict[str, Side], plan: schedule.Plan, out: Path) -> int:
    with _exclusive(out):
        # the stored samples read (a damaged one refused, exit 3) before the plan is written
        st = schedule.standing(plan.order, plan.retries, results.load_samples(out))
        schedule.save(out, plan)
        progress.set_resume(["kbisect", "compare", "--resume", str(out.resolve())])
        target.warn_if_busy()
        rule = plan.rule
        if len(st.todo) < len(plan.order) or any(st.todo.values()):
            progress.step(
                f"{len(plan.order) - len(st.todo)} of {len(plan.order)} boots already done"
            )
        most = f"up to {len(plan.order)}" if rule else f"{len(plan.order)}"
        until = ", until the ratio is settled (--boots auto)" if rule else ""
        over = f" over {len(set(plan.machines))} machines" if plan.machines else ""
        progress.step(f"{most} boots, interleaved ({plan.scheme}){over}{until}; results in {out}")
        stop, reached, st, stored = _measure(target, sides, plan, out, st, rule)
        rule = plan.rule  # with the noise prior chosen on the way
        if stop is not None and rule is not None:
            progress.step(stopping.reason(stop, rule))
    a, b = sides["A"], sides["B"]
    if len(a.tps) < 2 or len(b.tps) < 2:
        raise BootError(
            f"too few boots count (A: {len(a.tps)}, B: {len(b.tps)}; failed A: {a.failed}, "
            f"B: {b.failed}; slots left disturbed: {len(st.open)}); see {out}"
        )
    order = plan.order[:reached]
    verdict = sequential.verdict(
        a.tps,
        b.tps,
        min_effect=plan.min_effect,
        confidence=rule.level if rule else 0.95,
        planned=min(order.count(x) for x in NAMES),
        most=rule.most if rule else None,
        interval=machines.interval(stored) or (rule.interval(a.tps, b.tps) if rule else None),
        blocks=machines.blocks(stored),
    )
    duration = time.time() - plan.started
    taken = dataclasses.replace(plan, order=order)
    seq = stopping.as_dict(stop, rule) if stop is not None and rule is not None else None
    summary = summaries.summary(sides, taken, verdict, duration, out, seq)
    results.write_summary(out, summary)
    summaries.print_table(summary, verdict, stored)
    for line in machines.lines(stored):
        print(f"  {line}")
    for x in NAMES:
        if left := [i for i in st.open if order[i] == x]:
            progress.warn(
                f"side {x}: {len(sides[x].tps)} of {order.count(x)} boots count: "
                f"{len(left)} slot(s) left disturbed (retakes used up)"
                f"{compare_report.again(verdict, plan.min_effect, out)}"
            )
    if moved := timeline.sides(stored)[1]:
        progress.warn(moved)
    print(f"report: {markdown.render(out)[0]}")
    return EXIT_NEGATIVE if verdict.kind == "regression" else EXIT_OK


def _measure(
    target: Target,
    sides: dict[str, Side],
    plan: schedule.Plan,
    out: Path,
    st: schedule.Standing,
    rule: stopping.Rule | None,
) -> tuple[stopping.Stop | None, int, schedule.Standing, list[Sample]]:
    """Every slot still to take, round by round (one target: a round is a pair; a pool:
    a pair on every machine, the machines at once, at most one boot each:
    targets/pool/dispatch.py; a quarantined machine's slots go to the others): the slots
    left disturbed first (a resumed run's), then each round's; a slot whose retakes run
    out is left disturbed. With a sequential rule, look after the rounds it says
    (sequential.play) and stop at the first final look. How it stopped (None without a
    rule), the slots the run got to, and where the run then stands, from the stored
    samples (the boots that count per side in the order stored) and those samples. The
    stored samples are read once between two sets of boots."""
    order, retries = plan.order, plan.retries
    where: list[str | None] = [*plan.machines] if plan.machines else [None] * len(order)
    loaded: list[list[Sample]] = []  # the stored samples, since the last boots
    pace = _Pace()

    def stored() -> list[Sample]:
        if not loaded:
            loaded.append(results.load_samples(out))
        return loaded[0]

    def batch(slots: Iterable[int], again: bool = False) -> None:
        """Of `slots`, those still to take (`again`: those left disturbed), at once."""
        now = schedule.standing(order, retries, stored())
        boots: list[tuple[Boot, str | None]] = []
        for i in (i for i in slots if i in now.todo and (i in now.open) == again):
            first, used = now.todo[i]
            side, slot = sides[order[i]], retake.Slot(used)
            run = partial(
                _slot, side=side, plan=plan, out=out, i=i, first=first, slot=slot, pace=pace
            )
            boots.append((run, where[i]))
        _boot_all(target, boots)
        loaded.clear()

    def take(lo: int, hi: int) -> None:
        batch(range(lo, hi))

    def counted() -> sequential.Looked:
        a, b = (machines.counted(stored(), x)[0] for x in NAMES)
        return a, b, machines.interval(stored())

    try:
        for i in sorted(st.open):
            progress.step(f"boot {i + 1} was left disturbed: taking it again")
        batch(sorted(st.open), again=True)
        start = st.slot
        if plan.choose_prior:  # not chosen yet: after the first pair
            take(start, 2)
            start = max(start, 2)
            rule = _choose_prior(plan, out)
        ends = [2 * n for n in sequential.rounds(plan.machines or [""] * len(order))]
        stop, reached = sequential.play(rule, ends, start, take, counted)
    finally:
        progress.done()
    st = schedule.standing(order, retries, stored())
    for x in NAMES:
        sides[x].tps = machines.counted(stored(), x)[0]
        sides[x].failed = st.failed[x]
    return stop, reached, st, stored()


def _choose_prior(plan: schedule.Plan, out: Path) -> stopping.Rule | None:
    """The noise prior, once, before the first look: from the results index, this
    scenario on the machine the run's first boots ran on; recorded in the plan (with the
    first look it allows), which a resumed run and the report then read."""
    machine = next(
        filter(None, (schema.sample_machine(s.data) for s in results.load_samples(out))), None
    )
    if machine is None:
        got, why = None, "the first boots recorded no machine"
    else:
        assert plan.scenario_id is not None
        got, why = noise.prior(plan.scenario_id["hash"], machine, runs.run_id(out))
    rule = plan.rule
    assert rule is not None
    rule = stopping.Rule.upto(rule.most, rule.min_effect, prior=got, no_prior=why)
    plan.rule, plan.choose_prior = rule, False
    schedule.save(out, plan)
    progress.step(rule.prior_line())
    return rule


Boot = Callable[[Target], bool | None]  # a slot's boot on the machine given


@dataclasses.dataclass
class _Pace:
    """The boots this process has taken, and since when: the rate for the time left."""

    start: float = dataclasses.field(default_factory=time.monotonic)
    boots: int = 0

    def line(self, plan: schedule.Plan, i: int) -> str:
        """Boot i (0-based) of the boots the plan expects: with a sequential rule the
        first look's (2 x its least), or the end of i's pair past it, and the cap; with
        a fixed count that count. The time left for the expected boots from i on (none
        before this process has taken a boot)."""
        cap, rule = len(plan.order), plan.rule
        planned = cap if rule is None else min(cap, max(2 * rule.least, i + 1 + (i + 1) % 2))
        most = f" (at most {cap})" if planned < cap else ""
        left = progress.time_left(time.monotonic() - self.start, self.boots, planned - i)
        return f"boot {i + 1} of {planned}{most}{left and ', '}{left}"


def _boot_all(target: Target, boots: Sequence[tuple[Boot, str | None]]) -> None:
    """The boots of some slots, each on its machine where it is still live, the machines
    at once (one target: one after the other); a machine whose boot gave no figure is
    struck, and quarantined after a few (targets/pool/dispatch.py)."""
    known = {m.name for m in dispatch.members(target)}
    tasks = [dispatch.Task(run, m if m in known else None) for run, m in boots]
    dispatch.run_each(target, tasks, strike=lambda t: t is not True)


def _slot(
    target: Target,
    *,
    side: Side,
    plan: schedule.Plan,
    out: Path,
    i: int,
    first: int,
    slot: retake.Slot,
    pace: _Pace,
) -> bool | None:
    """Boot i of the plan: a failed boot is recorded, kept out of the statistics and
    retried in place (up to the plan's retries) so that both sides keep their boot count;
    a disturbed sample is kept and retaken in place (retake.py). True when a figure
    counts, False when the slot was left disturbed, None when every try failed."""
    assert side.kernel is not None
    retries, policy = plan.retries, plan.policy
    for attempt in range(first, retries + 1):
        again = f", retry {attempt}" if attempt else ""
        progress.status(f"{pace.line(plan, i)}: side {side.name} ({side.label}){again}")
        try:
            boot = sample.Boot(side.kernel, side.scen, out, side.append, side.name, i)
            s = retake.take(target, boot, policy, slot)
        except (BootError, BenchmarkError) as exc:
            progress.warn(
                f"side {side.name} boot {i + 1} failed, kept out of the statistics: {exc}"
            )
            continue
        finally:
            pace.boots += 1
        if s.status == retake.DISTURBED:
            progress.warn(f"side {side.name} boot {i + 1}: left disturbed, not counted")
            return False
        progress.step(f"side {side.name}: {s.tps:.1f} tps")
        return True
    return None
