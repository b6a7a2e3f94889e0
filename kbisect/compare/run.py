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

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kbisect.compare import machines, markdown, pgsides, schedule, sequential
from kbisect.compare import sides as sides_mod
from kbisect.compare import summary as summaries
from kbisect.compare.sides import NAMES, Side, Spec
from kbisect.core import clock, lock, paths, progress, room
from kbisect.core.exceptions import EXIT_NEGATIVE, EXIT_OK, BenchmarkError, BootError, UserError
from kbisect.db import noise, runs
from kbisect.kernel import make
from kbisect.measure import results, retake, sample, timeline
from kbisect.scenario import scenario
from kbisect.stats import stopping
from kbisect.targets import registry
from kbisect.targets.base import Target
from kbisect.targets.pool import dispatch


def _scenario_spec(spec: str) -> str:
    """A scenario file is saved as an absolute path: --resume may run from elsewhere."""
    return str(Path(spec).resolve()) if "/" in spec or spec.endswith(".toml") else spec


def start(spec: Spec, policy: retake.Policy) -> int:
    """A new compare: sides checked and built, the plan saved, then every boot; the exit
    code of the verdict (1 for a regression)."""
    sides_mod.check_conflicts(spec)
    base_scen = scenario.load(spec.scenario)
    if pgsides.asked(spec):
        pgsides.check(spec, base_scen)
    a, b = sides_mod.from_spec(spec, base_scen)
    repo = sides_mod.resolve_revisions(spec, a, b)
    if pgsides.asked(spec):
        pgsides.apply(spec, (a, b))
    sides_mod.validate(a, b)
    boots, rule = _boots(spec, base_scen)
    target = registry.get(spec.target, spec.arch)
    results.check_out(spec.out, "compare", room.results_need(2 * boots * (spec.retries + 1)))
    if repo is not None:
        room.check(paths.cache_dir(), 2 * room.PER_BUILD, "the cache")
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
        sides_order, where = schedule.pool_order(boots, machines, spec.order, spec.seed)
        if len(machines) > 1 and rule is not None:
            rule = sequential.over_pool(rule, where)  # a look per round of the machines
        plan = {
            "version": 1,
            "command": progress.reproduce_line(),
            "created": clock.utc_now(),
            "started": time.time(),
            "scenario": _scenario_spec(spec.scenario),
            "scenario_id": {"name": base_scen.name, "hash": a.scen.hash},
            "sides": {"A": a.to_plan(), "B": b.to_plan()},
            "order": schedule.order(boots, spec.order, spec.seed)
            if len(machines) < 2
            else sides_order,
            **({"machines": where} if len(machines) > 1 else {}),
            **sequential.plan_fields(rule),
            **(sequential.asked(spec.noise_prior) if rule and len(machines) < 2 else {}),
            "scheme": spec.order,
            "seed": spec.seed,
            "retries": spec.retries,
            **policy.as_dict(),
            "min_effect": spec.min_effect,
            "target": spec.target,
            "arch": target.arch.name,
            "target_described": target.describe(),
            "resumed": 0,
        }
        if "/" in plan["target"] or plan["target"].endswith(".toml"):
            plan["target"] = str(Path(plan["target"]).resolve())
        schedule.save(out, plan)
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
    sides = {x: Side.from_plan(x, plan["sides"][x], plan["scenario"]) for x in NAMES}
    plan["resumed"] = int(plan.get("resumed", 0)) + 1
    progress.step(f"resuming {out}; its saved options apply")
    with registry.get(plan["target"], plan["arch"]) as target:
        for side in sides.values():
            target.preflight(side.scen)
        return _run(target, sides, plan, out)


def _left_disturbed(out: Path) -> bool:
    """A finished run with slots left disturbed, which --resume takes again."""
    if not (out / schedule.PLAN).is_file():
        return False
    plan = schedule.load(out)
    stored = results.load_samples(out)
    stand = schedule.by_slot if "machines" in plan else schedule.standing
    return bool(stand(plan["order"], int(plan["retries"]), stored).open)


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


def _run(target: Target, sides: dict[str, Side], plan: dict[str, Any], out: Path) -> int:
    with _exclusive(out):
        schedule.save(out, plan)
        progress.set_resume(["kbisect", "compare", "--resume", str(out.resolve())])
        pooled = "machines" in plan
        stand = schedule.by_slot if pooled else schedule.standing
        st = stand(plan["order"], plan["retries"], results.load_samples(out))
        for x in NAMES:
            sides[x].tps, sides[x].failed = st.tps[x], st.failed[x]
        target.warn_if_busy()
        rule = sequential.rule_of(plan)
        if st.slot or st.attempts or st.retakes:
            progress.step(f"{st.slot} of {len(plan['order'])} boots already done")
        most = f"up to {len(plan['order'])}" if rule else f"{len(plan['order'])}"
        until = ", until the ratio is settled (--boots auto)" if rule else ""
        over = f" over {len(set(plan['machines']))} machines" if pooled else ""
        progress.step(
            f"{most} boots, interleaved ({plan['scheme']}){over}{until}; results in {out}"
        )
        if pooled:
            stop, reached, st = _measure_pool(target, sides, plan, out, st, rule)
        else:
            stop, reached = _measure(target, sides, plan, out, st, rule)
        rule = sequential.rule_of(plan)  # with the noise prior chosen on the way
        if stop is not None and rule is not None:
            progress.step(stopping.reason(stop, rule))
    a, b = sides["A"], sides["B"]
    if len(a.tps) < 2 or len(b.tps) < 2:
        raise BootError(
            f"too few boots count (A: {len(a.tps)}, B: {len(b.tps)}; failed A: {a.failed}, "
            f"B: {b.failed}; slots left disturbed: {len(st.open)}); see {out}"
        )
    order = plan["order"][:reached]
    stored = results.load_samples(out)
    verdict = sequential.verdict(
        a.tps,
        b.tps,
        min_effect=plan["min_effect"],
        confidence=rule.level if rule else 0.95,
        planned=min(order.count(x) for x in NAMES),
        most=rule.most if rule else None,
        interval=machines.interval(stored) if pooled else _prior_interval(rule, a.tps, b.tps),
        blocks=machines.blocks(stored) if pooled else None,
    )
    duration = time.time() - float(plan["started"])
    taken = {**plan, "order": order}
    seq = stopping.as_dict(stop, rule) if stop is not None and rule is not None else None
    results.write_summary(out, summaries.summary(sides, taken, verdict, duration, out, seq))
    summaries.print_table(sides, verdict, stored)
    for line in machines.lines(stored):
        print(f"  {line}")
    for x in NAMES:
        if left := [i for i in st.open if order[i] == x]:
            progress.warn(
                f"side {x}: {len(sides[x].tps)} of {order.count(x)} boots count: "
                f"{len(left)} slot(s) left disturbed (retakes used up); "
                f"`kbisect compare --resume {out}` takes them again"
            )
    if moved := timeline.sides(stored)[1]:
        progress.warn(moved)
    print(f"report: {markdown.render(out)[0]}")
    return EXIT_NEGATIVE if verdict.kind == "regression" else EXIT_OK


def _prior_interval(
    rule: stopping.Rule | None, a: list[float], b: list[float]
) -> machines.Interval | None:
    return rule.interval(a, b) if rule is not None else None


def _measure(
    target: Target,
    sides: dict[str, Side],
    plan: dict[str, Any],
    out: Path,
    st: schedule.Standing,
    rule: stopping.Rule | None,
) -> tuple[stopping.Stop | None, int]:
    """Boot in plan order from where the run stands, the slots left disturbed first (a
    resumed run's); a slot whose retakes run out is left disturbed (`st.open`). With a
    sequential rule, stop where it says (sequential.play). How it stopped, and the
    slots the run got to."""
    order = plan["order"]
    for i, used in list(st.open.items()):
        progress.step(f"boot {i + 1}/{len(order)} was left disturbed: taking it again")
        if _slot(target, sides[order[i]], plan, out, i, 0, retake.Slot(used)):
            del st.open[i]

    def take(i: int) -> None:
        first = st.attempts if i == st.slot else 0
        slot = retake.Slot(st.retakes if i == st.slot else 0)
        if _slot(target, sides[order[i]], plan, out, i, first, slot) is False:
            st.open[i] = 0

    start = st.slot
    if plan.get("noise_prior") == sequential.AUTO:  # not chosen yet: after the first pair
        for i in range(start, 2):
            take(i)
        start = max(start, 2)
        rule = _choose_prior(plan, out)
    return sequential.play(order, start, take, lambda: (sides["A"].tps, sides["B"].tps), rule)


def _choose_prior(plan: dict[str, Any], out: Path) -> stopping.Rule | None:
    """The noise prior, once, before the first look: from the results index, this
    scenario on the machine the run's first boots ran on; recorded in the plan (with the
    first look it allows), which a resumed run and the report then read."""
    machine = next(filter(None, (noise.machine_of(s) for s in results.load_samples(out))), None)
    if machine is None:
        got, why = None, "the first boots recorded no machine"
    else:
        got, why = noise.prior(plan["scenario_id"]["hash"], machine, runs.run_id(out))
    rule = sequential.rule_of(plan)
    assert rule is not None
    rule = stopping.Rule.upto(rule.most, rule.min_effect, prior=got, no_prior=why)
    plan.update(sequential.plan_fields(rule))
    schedule.save(out, plan)
    progress.step(rule.prior_line())
    return rule


def _measure_pool(
    target: Target,
    sides: dict[str, Side],
    plan: dict[str, Any],
    out: Path,
    st: schedule.Standing,
    rule: stopping.Rule | None,
) -> tuple[stopping.Stop | None, int, schedule.Standing]:
    """Every slot still to take, on its machine, the machines at once (at most one boot
    each: targets/pool/dispatch.py); a quarantined machine's slots go to the others.
    With a sequential rule, round by round (sequential.play_rounds): the slots left
    disturbed first (a resumed run's), then each round's, looking after each. How it
    stopped (None without a rule), the slots the run got to, and where the run then
    stands, from the stored samples (the boots that count per side in the order stored,
    as the report reads them)."""
    order, where, retries = plan["order"], plan["machines"], int(plan["retries"])

    def batch(slots: list[int], now: schedule.Standing) -> None:
        known = {m.name for m in dispatch.members(target)}

        def task(i: int) -> dispatch.Task[bool | None]:
            first, used = now.todo[i]

            def run(machine: Target) -> bool | None:
                return _slot(machine, sides[order[i]], plan, out, i, first, retake.Slot(used))

            return dispatch.Task(run, where[i] if where[i] in known else None)

        if slots:
            dispatch.run_batch(target, [task(i) for i in slots], strike=lambda t: t is not True)

    def standing() -> schedule.Standing:
        return schedule.by_slot(order, retries, results.load_samples(out))

    stop, reached = None, len(order)
    if rule is None:
        batch(sorted(st.todo), st)
    else:
        batch(sorted(st.open), st)

        def take(lo: int, hi: int) -> None:
            now = standing()
            batch([i for i in sorted(now.todo) if lo <= i < hi and i not in now.open], now)

        def counted() -> sequential.Looked:
            stored = results.load_samples(out)
            a, b = (machines.counted(stored, x)[0] for x in NAMES)
            return a, b, machines.interval(stored)

        start = min((i for i in st.todo if i not in st.open), default=len(order))
        stop, reached = sequential.play_rounds(rule, start, take, counted)
    stored = results.load_samples(out)
    st = schedule.by_slot(order, retries, stored)
    for x in NAMES:
        sides[x].tps = machines.counted(stored, x)[0]
        sides[x].failed = st.failed[x]
    return stop, reached, st


def _slot(
    target: Target,
    side: Side,
    plan: dict[str, Any],
    out: Path,
    i: int,
    first: int,
    slot: retake.Slot,
) -> bool | None:
    """Boot i of the plan: a failed boot is recorded, kept out of the statistics and
    retried in place (up to the plan's retries) so that both sides keep their boot count;
    a disturbed sample is kept and retaken in place (retake.py). True when a figure
    counts, False when the slot was left disturbed, None when every try failed."""
    assert side.kernel is not None
    order, retries = plan["order"], int(plan["retries"])
    policy = retake.Policy.from_dict(plan)
    for attempt in range(first, retries + 1):
        again = f", retry {attempt}" if attempt else ""
        progress.step(f"boot {i + 1}/{len(order)}: side {side.name} ({side.label}){again}")
        try:
            boot = sample.Boot(side.kernel, side.scen, out, side.append, side.name, i)
            s = retake.take(target, boot, policy, slot)
        except (BootError, BenchmarkError) as exc:
            side.failed += 1
            progress.warn(
                f"side {side.name} boot {i + 1} failed, kept out of the statistics: {exc}"
            )
            continue
        if s.get("status") == retake.DISTURBED:
            progress.warn(f"side {side.name} boot {i + 1}: left disturbed, not counted")
            return False
        side.tps.append(float(s["tps"]))
        progress.step(f"side {side.name}: {s['tps']:.1f} tps")
        return True
    return None
