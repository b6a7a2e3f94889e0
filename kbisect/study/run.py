"""Running a study: every check before the first build (`prepare`), the plan printed
and saved, the kernels built once, the boots taken in blocks, the report written;
`--resume` picks up the saved plan where it stopped."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kbisect.core import clock, paths, progress
from kbisect.core.exceptions import EXIT_OK, BootError, UserError
from kbisect.kernel import make
from kbisect.measure import results, retake
from kbisect.scenario import scenario
from kbisect.study import (
    analysis,
    axes,
    budget,
    fanout,
    kernels,
    machine,
    pgaxis,
    report,
    schedule,
    spec,
    store,
)
from kbisect.study.spec import Study
from kbisect.targets import registry
from kbisect.targets.base import Target


@dataclass(frozen=True)
class Request:
    """How a study runs on this machine (the study itself is a spec.Study)."""

    target: str = "vng"
    share: str | None = None  # "I/N": only share I of N (fanout.py)
    yes: bool = False  # run even if over the budget
    dry_run: bool = False  # print the plan and stop
    out: Path | None = None
    policy: retake.Policy = field(default_factory=retake.Policy)


@dataclass(frozen=True)
class Prepared:
    study: Study
    definition: dict[str, Any]
    refs: list[kernels.Ref]
    repos: dict[str | None, Path]  # each tree a revision is built in (kernels.tree_name)
    cells: list[int]  # this run's cells (all, or a share's)
    estimate: budget.Estimate


def _baseline(study: Study, refs: list[kernels.Ref]) -> int:
    if study.baseline is None:
        return 0
    for i, ref in enumerate(refs):
        if study.baseline in (ref.label, ref.rev) or (ref.commit or "").startswith(study.baseline):
            return i
    raise UserError(f"baseline {study.baseline!r} is not one of the study's kernels")


def cells(study: Study) -> tuple[list[axes.Cell], list[scenario.Scenario], scenario.Scenario]:
    if study.boots < 2:
        raise UserError(f"--boots {study.boots}: need at least 2 per cell for an interval")
    base = scenario.load(study.scenario)
    all_cells = axes.cells(study.axes)
    pgaxis.check(base, study.sets, all_cells, study.axes)
    return all_cells, axes.scenarios(base, study.sets, all_cells, study.axes), base


def _layout(
    study: Study, all_cells: list[axes.Cell], scens: list[scenario.Scenario]
) -> dict[str, Any]:
    """study.json's axes and cells (each cell with its overrides and scenario hash)."""
    rows = [
        {
            "id": c.id,
            "label": c.label(study.axes),
            "values": c.values,
            "set": list(c.sets),
            "append": c.append,
            "scenario_hash": s.hash,
        }
        for c, s in zip(all_cells, scens, strict=True)
    ]
    return {"axes": [a.as_dict() for a in study.axes], "cells": rows}


def prepare(study: Study, target: Target, share: tuple[int, int] | None) -> Prepared:
    """Every check before the first build; the study.json to save."""
    all_cells, scens, base = cells(study)
    repos, refs = kernels.resolve(study.kernels)
    kernels.check_arches(refs, target.arch.name)
    chosen = list(range(len(all_cells)))
    share_info = None
    if share is not None:
        parts = fanout.partition([budget.boot_seconds(s) for s in scens], share[1])
        chosen = parts[share[0]]
        share_info = {"index": share[0] + 1, "of": share[1], "cells": [f"c{c}" for c in chosen]}
    builds = sum(1 for r in refs if r.rev is not None) + pgaxis.builds(study.axes)
    est = budget.estimate(len(refs), builds, [scens[c] for c in chosen], study.boots)
    d = {
        "version": 1,
        "kind": "study-definition",
        "name": study.name,
        "description": study.description,
        "source": study.source,
        "command": progress.reproduce_line(),
        "created": clock.utc_now(),
        "scenario": {
            "name": base.name,
            "source": paths.saved(study.scenario),
            "hash": base.hash,
        },
        "sets": list(study.sets),
        "append": study.append,
        "boots": study.boots,
        "retries": study.retries,
        "min_effect": study.min_effect,
        "baseline": _baseline(study, refs),
        "seed": study.seed,
        "arch": target.arch.name,
        "target": target.name,
        "tree": kernels.tree_name(study.kernels.tree),
        "configs": list(study.kernels.configs),
        "base_config": study.kernels.base_config,
        "budget_hours": study.budget_hours,
        "kernels": [{**r.as_dict(), "name": r.short} for r in refs],
        **_layout(study, all_cells, scens),
        "share": share_info,
    }
    return Prepared(study, d, refs, repos, chosen, est)


def with_servers(p: Prepared) -> Prepared:
    """The PostgreSQL servers of a `postgres` axis built, once, and the cells to save
    naming them (pgaxis.py); p itself without one."""
    if not pgaxis.builds(p.study.axes):
        return p
    study = replace(p.study, axes=pgaxis.build(p.study.axes))
    all_cells, scens, _ = cells(study)
    d = {**p.definition, **_layout(study, all_cells, scens)}
    return replace(p, study=study, definition=d)


def announce(p: Prepared) -> None:
    d = p.definition
    print(f"study {d['name']}: scenario {d['scenario']['name']} on {d['target']} ({d['arch']})")
    print(
        f"kernels ({len(p.refs)}): {', '.join(r.short for r in p.refs)}; baseline "
        f"{p.refs[d['baseline']].short}"
    )
    for r in p.refs:
        print(f"  {_kernel_line(r, p.repos)}")
    share = d["share"]
    where = f" (share {share['index']}/{share['of']})" if share else ""
    print(f"cells ({len(p.cells)} of {len(d['cells'])}){where}:")
    for c in p.cells:
        print(f"  c{c:<3} {d['cells'][c]['label']}")
    print(f"{p.estimate.line()} (budget {p.study.budget_hours:g} h)")


def _kernel_line(ref: kernels.Ref, repos: dict[str | None, Path]) -> str:
    """`7.2: debian/7.2.13-1 (0123456789ab) in tree debian:7.2 (PATH)` (the label left
    out when it is the revision), or `NAME: image PATH`."""
    if ref.rev is None:
        return f"{ref.short}: image {ref.image}"
    label = f"{ref.label}: " if ref.label != ref.rev else ""
    commit = (ref.commit or "")[:12]
    return f"{label}{ref.rev} ({commit}) in tree {ref.tree or 'default'} ({repos[ref.tree]})"


def _scens(d: dict[str, Any]) -> dict[int, scenario.Scenario]:
    """Each cell's scenario again (on resume too), checked against the stored hashes."""
    base = scenario.load(d["scenario"]["source"])
    out = {}
    for i, c in enumerate(d["cells"]):
        out[i] = base.with_overrides([*d["sets"], *c["set"]])
        if out[i].hash != c["scenario_hash"]:
            raise UserError(
                f"cell {c['id']}: the scenario {d['scenario']['name']} changed "
                "since the study started: start a new study"
            )
    return out


def execute(out: Path, d: dict[str, Any], target: Target, repos: dict[str | None, Path]) -> int:
    progress.set_resume(["kbisect", "study", "--resume", str(out.resolve())])
    refs = kernels.from_definition(d)
    spec_k = spec.KernelSpec(configs=tuple(d["configs"]), base_config=d["base_config"])
    scens = _scens(d)
    built = kernels.build_all(refs, repos, spec_k, d["arch"])
    appends = {
        i: " ".join(filter(None, [d["append"], c["append"]])) for i, c in enumerate(d["cells"])
    }

    def name(slot: schedule.Slot) -> str:
        return f"{refs[slot.kernel].short} in {d['cells'][slot.cell]['label']}"

    policy = retake.Policy.from_dict(d)
    boots = schedule.Boots(target, built, scens, appends, name, policy)
    slots = schedule.from_json(store.load_schedule(out))
    with target:
        target.warn_if_busy()
        missing = schedule.run(boots, slots, out, int(d["retries"]))
    written = report.write(out)
    report.print_findings(analysis.analyze(d, store.samples(out)))
    print(f"report: {written}")
    if missing:
        raise BootError(
            f"{len(missing)} planned sample(s) still missing after retries (failed boots) "
            "or retakes (disturbed samples, which never count): "
            f"`kbisect study --resume {out}` takes them"
        )
    return EXIT_OK


def start(study: Study, req: Request) -> int:
    """Check everything, print and save the plan, then build and boot; the exit code."""
    target = registry.get(req.target, study.kernels.arch)
    share = fanout.parse_share(req.share) if req.share else None
    p = prepare(study, target, share)
    announce(p)
    budget.check(p.estimate, study.budget_hours, req.yes)
    if req.dry_run:
        return EXIT_OK
    p = with_servers(p)
    study = p.study
    _, scens, _ = cells(study)
    for scen in {s.hash: s for s in scens}.values():  # each cell may pin another server
        target.preflight(scen)
    boots = len(p.refs) * len(p.cells) * study.boots * (study.retries + 1)
    results.check_out(req.out, "study", paths.results_need(boots))
    if p.repos:
        paths.check(paths.cache_dir(), len(p.refs) * paths.PER_BUILD, "the cache")
        make.check_dir(paths.cache_dir(), "the cache")
    out = req.out or results.new_run_dir("study", study.name)
    seed = study.seed if study.seed is not None else schedule.new_seed()
    where = paths.saved(req.target)
    d = {**p.definition, "seed": seed, "target_spec": where, "machine": machine.host(target)}
    d.update(req.policy.as_dict())
    store.write_definition(out, d)
    slots = schedule.plan(len(p.refs), p.cells, study.boots, seed)
    store.write_schedule(out, schedule.to_json(slots, seed, study.boots))
    progress.step(f"{len(slots)} boots in {study.boots} blocks (seed {seed}); results in {out}")
    return execute(out, store.load_definition(out), target, p.repos)


def resume(given: Path | None) -> int:
    """Continue the study in `given` (default: the newest unfinished one)."""
    out = given or store.unfinished()
    d = store.load_definition(out)
    slots = schedule.from_json(store.load_schedule(out))
    if not schedule.pending(slots, store.ok_counts(out)):
        raise UserError(
            f"{out}: every planned sample is taken: nothing to resume "
            "(`kbisect report` re-renders it)"
        )
    target = registry.get(d.get("target_spec") or d["target"], d["arch"])
    refs = kernels.from_definition(d)
    repos = kernels.trees([r.tree for r in refs if r.rev], {})
    progress.step(f"resuming study {d['name']} in {out}")
    return execute(out, d, target, repos)
