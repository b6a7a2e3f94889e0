"""The boot order of a compare, saved as plan.json before the first boot, and where an
interrupted run stands: replaying the stored samples against the plan says which boot
comes next, so `kbisect compare --resume` loses and duplicates no sample.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbisect.core import atomic, reading
from kbisect.core.exceptions import UserError
from kbisect.measure import results, retake
from kbisect.stats import prior as priors

PLAN = "plan.json"
PLAN_KIND = "compare-plan"
# plan.json is written whole (by rename) before the first boot; the command that made
# it is at the top of the run's report.md (and in the plan, when that survives).
RECOVER = (
    "this compare cannot be resumed: run the same kbisect compare again into a new --out "
    "(built kernels are cached)"
)


class NotResumable(UserError):
    """The run directory holds no compare that can be continued."""


def order(boots: int, scheme: str = "abba", seed: int | None = None) -> list[str]:
    """Boot order for `boots` per side: ABBA blocks, or pairs in random order."""
    if scheme == "random":
        rng = random.Random(seed)
        return [x for _ in range(boots) for x in rng.sample(["A", "B"], 2)]
    pairs = [["A", "B"] if i % 2 == 0 else ["B", "A"] for i in range(boots)]
    return [x for pair in pairs for x in pair]


def pool_order(
    boots: int, machines: list[str], scheme: str = "abba", seed: int | None = None
) -> tuple[list[str], list[str]]:
    """Boot order over a pool: randomized blocks with the machine as the block. The
    `boots` pairs a side are dealt to the machines in turn (each machine measures both
    sides); within a machine, ABBA (its first pair AB or BA by turns over the machines:
    which side goes first is balanced across them too), or with `random` each pair in a
    seeded random order. The slots go machine after machine, pair by pair, so all
    machines work at once. (sides, the machine of each slot)."""
    rng = random.Random(seed)
    count = [boots // len(machines) + (j < boots % len(machines)) for j in range(len(machines))]
    sides: list[str] = []
    where: list[str] = []
    for k in range(max(count)):
        for j, name in enumerate(machines):
            if k >= count[j]:
                continue
            if scheme == "random":
                pair = rng.sample(["A", "B"], 2)
            else:
                pair = ["A", "B"] if (k + j) % 2 == 0 else ["B", "A"]
            sides += pair
            where += [name, name]
    return sides, where


def save(out: Path, plan: dict[str, Any]) -> None:
    atomic.write_json(out / PLAN, {**plan, "kind": PLAN_KIND})


def load(out: Path) -> dict[str, Any]:
    """The saved plan, or one line saying why this directory cannot be resumed."""
    path = out / PLAN
    if not path.exists():
        raise NotResumable(
            f"{out}: no {PLAN}: not a compare run, or one interrupted "
            "before its first boot (run the command again: builds are cached)"
        )
    plan = reading.json_table(path, RECOVER)
    if plan.get("kind") != PLAN_KIND:
        raise NotResumable(f"{path}: not a compare plan (kind {plan.get('kind')!r})")
    _check(plan, path)
    return plan


def _check(plan: dict[str, Any], path: Path) -> None:
    """The fields a resume reads, each of its type; CorruptFile naming the first that is not."""
    keys = {"order", "retries", "sides", "scenario", "target", "arch", "command"}
    if not keys <= set(plan):
        reading.fail(path, f"not a whole compare plan (no {sorted(keys - set(plan))})", RECOVER)
    f = reading.own_fields(plan, path, RECOVER)
    order = f.items("order")
    if not order or any(x not in ("A", "B") for x in order):
        f.fail("order", f"must be a list of sides A and B, got {reading.got(order)}")
    f.integer("retries", high=100)
    f.integer("retakes", 0, high=100)
    f.integer("resumed", 0)
    f.number("min_effect", 0.02, high=1.0)
    f.number("started", 0.0)
    for key in ("scenario", "target", "arch", "command"):
        f.string(key)
    if f.string("boots", None) not in (None, "auto"):
        f.fail("boots", f"must be auto when given, got {reading.got(plan['boots'])}")
    if plan.get("boots") == "auto":
        most = f.integer("max_boots", low=2, high=1000)
        f.integer("least", low=2, high=most)
        if len(order) != 2 * most:
            f.fail("order", f"must hold 2 x max_boots ({most}) slots, got {len(order)}")
        at = f.items("look_at", None)  # a pool's: the boots a side at each round's look
        if at is not None and (
            not at
            or not all(type(n) is int for n in at)
            or at != sorted(set(at))
            or at[0] < plan["least"]
            or at[-1] != most
        ):
            f.fail("look_at", f"must rise from least to max_boots ({most}), got {reading.got(at)}")
        if not _prior_ok(plan.get("noise_prior")):
            got = reading.got(plan["noise_prior"])
            f.fail("noise_prior", f"must be auto, a prior or none, got {got}")
    sides = f.table("sides")
    for side in ("A", "B"):
        sides.table(side, required=True)
    machines = plan.get("machines")
    if machines is not None and (
        not isinstance(machines, list)
        or len(machines) != len(order)
        or not all(isinstance(m, str) and m for m in machines)
    ):
        f.fail("machines", f"must name a machine for each of the {len(order)} slots")


def _prior_ok(recorded: Any) -> bool:
    """A plan's "noise_prior": absent, auto (not chosen yet), {"none": why}, or a prior."""
    if recorded is None or recorded == "auto":
        return True
    if not isinstance(recorded, dict):
        return False
    if "none" in recorded:
        return isinstance(recorded["none"], str)
    try:
        got = priors.Prior.from_dict(recorded)
    except (KeyError, TypeError, ValueError):
        return False
    return got.var > 0 and 0 <= got.df <= got.pooled_df and got.pooled_df > 0


def newest_unfinished(root: Path) -> Path:
    """The most recently started compare under root without a summary."""
    runs = sorted(
        p.parent for p in root.glob(f"*/{PLAN}") if not (p.parent / results.SUMMARY).exists()
    )
    if not runs:
        raise NotResumable(f"no unfinished compare under {root}")
    return runs[-1]


@dataclass
class Standing:
    """How far a run got: the next boot of the plan, the retries and retakes (of disturbed
    samples, retake.py) it has used, every stored sample counted per side, and the slots
    left without an undisturbed sample (`open`: slot -> retakes used since), which a
    resumed run takes again first."""

    slot: int = 0
    attempts: int = 0
    retakes: int = 0
    tps: dict[str, list[float]] = field(default_factory=lambda: {"A": [], "B": []})
    failed: dict[str, int] = field(default_factory=lambda: {"A": 0, "B": 0})
    open: dict[int, int] = field(default_factory=dict)
    # a pool's run (by_slot): slot -> (failed tries, retakes) of each slot still to take
    todo: dict[int, tuple[int, int]] = field(default_factory=dict)


def standing(plan: list[str], retries: int, stored: list[dict[str, Any]]) -> Standing:
    """Replay the stored samples (in the order taken) against the plan. A sample that
    names its slot (a later kbisect's) and is not the next one retakes a slot left
    disturbed; one without follows the plan in order. A slot is left disturbed by its
    last try (retake.py), or by a disturbed sample an earlier kbisect kept and counted."""
    st = Standing()
    for s in stored:
        label, slot = s.get("label"), s.get("slot")
        if isinstance(slot, int) and slot != st.slot:
            _retaken(st, plan, slot, s)
            continue
        if st.slot >= len(plan) or label != plan[st.slot]:
            where = (
                f"boot {st.slot + 1} of the plan is side {plan[st.slot]}"
                if st.slot < len(plan)
                else "the plan is done"
            )
            raise NotResumable(
                f"a stored sample of side {label} does not follow the plan ({where})"
            )
        if retake.counts(s):
            st.tps[str(label)].append(float(s["tps"]))
            st.slot, st.attempts, st.retakes = st.slot + 1, 0, 0
        elif s.get("status") in ("ok", retake.DISTURBED):
            st.retakes += 1
            if retake.left_out(s):
                st.open[st.slot] = 0
                st.slot, st.attempts, st.retakes = st.slot + 1, 0, 0
        else:
            st.failed[str(label)] += 1
            st.attempts += 1
            if st.attempts > retries:
                st.slot, st.attempts, st.retakes = st.slot + 1, 0, 0
    return st


def _retaken(st: Standing, plan: list[str], slot: int, s: dict[str, Any]) -> None:
    """A sample of a slot left disturbed, taken again by a resumed run."""
    label = s.get("label")
    if slot not in st.open or slot >= len(plan) or plan[slot] != label:
        raise NotResumable(
            f"a stored sample of side {label} names boot {slot + 1} of the plan, "
            "which is neither the next one nor one left disturbed"
        )
    if retake.counts(s):
        st.tps[str(label)].append(float(s["tps"]))
        del st.open[slot]
    elif s.get("status") in ("ok", retake.DISTURBED):
        st.open[slot] = 0 if retake.left_out(s) else st.open[slot] + 1
    else:
        st.failed[str(label)] += 1


def by_slot(plan: list[str], retries: int, stored: list[dict[str, Any]]) -> Standing:
    """Where a run over a pool stands: its machines take slots at once, so samples are
    stored out of the plan's order, each naming its slot. Each slot's samples are
    replayed as `standing` replays the plan's: done when one counts; left disturbed
    (`open`, taken again first) by its last try; given up after `retries` failed tries,
    unless a later try (its machine quarantined, another took it) follows. `slot` is the
    number of slots settled; `todo` the others, with the tries and retakes they used."""
    st = Standing()
    mine: dict[int, list[dict[str, Any]]] = {}
    for s in stored:
        slot = s.get("slot")
        if not isinstance(slot, int) or not 0 <= slot < len(plan) or s.get("label") != plan[slot]:
            raise NotResumable(
                f"a stored sample of side {s.get('label')} names no slot of this pool's plan "
                f"(slot {slot!r})"
            )
        mine.setdefault(slot, []).append(s)
    for i in range(len(plan)):
        done, attempts, retakes = False, 0, 0
        for s in mine.get(i, []):
            if done:
                continue
            if retake.counts(s):
                st.tps[plan[i]].append(float(s["tps"]))
                done = True
            elif s.get("status") in ("ok", retake.DISTURBED):
                retakes = 0 if retake.left_out(s) else retakes + 1
                if retake.left_out(s):
                    st.open[i] = 0
            else:
                st.failed[plan[i]] += 1
                attempts += 1
        if done:
            st.open.pop(i, None)
        elif i in st.open:
            st.todo[i] = (0, 0)
        elif attempts <= retries:
            st.todo[i] = (attempts, retakes)
    st.slot = len(plan) - len(st.todo)
    return st
