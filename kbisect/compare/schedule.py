"""The boot order of a compare, saved as plan.json before the first boot, and where an
interrupted run stands: replaying the stored samples against the plan says which boot
comes next, so `kbisect compare --resume` loses and duplicates no sample.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from kbisect.compare import sequential
from kbisect.core import atomic, reading
from kbisect.core.exceptions import UserError
from kbisect.measure import results, retake
from kbisect.measure.record import Sample
from kbisect.stats import prior as priors
from kbisect.stats import stopping

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


def order(
    boots: int, scheme: str = "abba", seed: int | None = None, machines: Sequence[str] = ("",)
) -> tuple[list[str], list[str]]:
    """Boot order for `boots` per side over the machines (one target: one machine):
    randomized blocks with the machine as the block. The pairs are dealt to the machines
    in turn (each machine measures both sides); within a machine, ABBA (its first pair
    AB or BA by turns over the machines: which side goes first is balanced across them
    too), or with `random` each pair in a seeded random order. The slots go machine after
    machine, pair by pair, so all machines work at once. (sides, the machine of each
    slot)."""
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


@dataclass
class Plan:
    """A compare's plan, as plan.json holds it (save and load are its only way to and
    from the file; the keys are the file's): the sides (Side.to_plan), the boot order
    and each slot's machine (a pool's), the sequential rule (sequential.plan_fields;
    `choose_prior`: its noise prior is still to be chosen, "noise_prior": "auto"), the
    retake policy and the options a resumed run keeps. The fields an older plan may lack
    are None (and stay out of the file)."""

    command: str
    scenario: str  # the scenario spec as given (a file: its absolute path)
    sides: dict[str, dict[str, Any]]
    order: list[str]
    retries: int
    target: str
    arch: str
    policy: retake.Policy
    min_effect: float = 0.02
    started: float = 0.0
    resumed: int = 0
    version: int | None = None
    created: str | None = None
    scenario_id: dict[str, Any] | None = None  # {"name", "hash"} of the scenario
    target_described: Any = None
    scheme: str | None = None
    seed: int | None = None
    machines: list[str] | None = None  # each slot's machine, over a pool
    rule: stopping.Rule | None = None
    choose_prior: bool = False

    def as_dict(self) -> dict[str, Any]:
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _DERIVED}
        return {
            **{k: v for k, v in own.items() if v is not None or k == "seed"},
            **self.policy.as_dict(),
            **sequential.plan_fields(self.rule),
            **({"noise_prior": sequential.AUTO} if self.choose_prior else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        own = {f.name: d[f.name] for f in fields(cls) if f.name in d and f.name not in _DERIVED}
        return cls(
            **own,
            policy=retake.Policy.from_dict(d),
            rule=sequential.rule_of(d),
            choose_prior=d.get("noise_prior") == sequential.AUTO,
        )


_DERIVED = ("policy", "rule", "choose_prior")  # Plan's fields read from the file's others


def save(out: Path, plan: Plan) -> None:
    atomic.write_json(out / PLAN, {**plan.as_dict(), "kind": PLAN_KIND})


def load(out: Path) -> Plan:
    """The saved plan, or one line saying why this directory cannot be resumed."""
    path = out / PLAN
    if not path.exists():
        raise NotResumable(
            f"{out}: no {PLAN}: not a compare run, or one interrupted "
            "before its first boot (run the command again: builds are cached)"
        )
    raw = reading.json_table(path, RECOVER)
    if raw.get("kind") != PLAN_KIND:
        raise NotResumable(f"{path}: not a compare plan (kind {raw.get('kind')!r})")
    _check(raw, path)
    return Plan.from_dict(raw)


def _check(raw: dict[str, Any], path: Path) -> None:
    """The fields a resume reads, each of its type; CorruptFile naming the first that is not."""
    keys = {"order", "retries", "sides", "scenario", "target", "arch", "command"}
    if not keys <= set(raw):
        reading.fail(path, f"not a whole compare plan (no {sorted(keys - set(raw))})", RECOVER)
    f = reading.own_fields(raw, path, RECOVER)
    order = f.items("order")
    if not order or any(x not in ("A", "B") for x in order):
        f.fail("order", f"must be a list of sides A and B, got {reading.got(order)}")
    f.integer("retries", high=100)
    f.integer("retakes", 0, high=100)
    f.integer("resumed", 0)
    f.fraction("min_effect", 0.02)
    f.number("started", 0.0)
    for key in ("scenario", "target", "arch", "command"):
        f.string(key)
    if f.string("boots", None) not in (None, "auto"):
        f.fail("boots", f"must be auto when given, got {reading.got(raw['boots'])}")
    if raw.get("boots") == "auto":
        most = f.integer("max_boots", low=2, high=1000)
        f.integer("least", low=2, high=most)
        if len(order) != 2 * most:
            f.fail("order", f"must hold 2 x max_boots ({most}) slots, got {len(order)}")
        at = f.items("look_at", None)  # a pool's: the boots a side at each round's look
        if at is not None and (
            not at
            or not all(type(n) is int for n in at)
            or at != sorted(set(at))
            or at[0] < raw["least"]
            or at[-1] != most
        ):
            f.fail("look_at", f"must rise from least to max_boots ({most}), got {reading.got(at)}")
        if not _prior_ok(raw.get("noise_prior")):
            got = reading.got(raw["noise_prior"])
            f.fail("noise_prior", f"must be auto, a prior or none, got {got}")
    sides = f.table("sides")
    for side in ("A", "B"):
        sides.table(side, required=True)
    machines = raw.get("machines")
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
    """How far a run got: every stored sample counted per side, the slots left without an
    undisturbed sample (`open`: slot -> retakes used since), which a resumed run takes
    again first, each slot still to take (`todo`: slot -> its failed tries and retakes
    so far; the open ones among them), and the next slot in the plan's order not left
    disturbed (`slot`)."""

    slot: int = 0
    tps: dict[str, list[float]] = field(default_factory=lambda: {"A": [], "B": []})
    failed: dict[str, int] = field(default_factory=lambda: {"A": 0, "B": 0})
    open: dict[int, int] = field(default_factory=dict)
    todo: dict[int, tuple[int, int]] = field(default_factory=dict)


def standing(plan: list[str], retries: int, stored: Sequence[Sample]) -> Standing:
    """Replay the stored samples (in the order taken) against the plan, slot by slot. A
    sample names its slot (over a pool the machines take slots at once, out of the
    plan's order); one without (an earlier kbisect's) follows the plan in order. Each
    slot's samples are replayed in turn: done when one counts; left disturbed (`open`)
    by its last try (retake.py), or by a disturbed sample an earlier kbisect kept and
    counted; given up after `retries` failed tries, unless a later try (its machine
    quarantined, another took it) follows."""
    mine: dict[int, list[Sample]] = {}
    nxt, tries = 0, 0  # the plan's next slot in order, and its failed tries
    for s in stored:
        slot = s.slot if s.slot is not None else nxt
        if not 0 <= slot < len(plan) or s.label != plan[slot]:
            where = f"boot {slot + 1} of the plan is side {plan[slot]}" if slot < len(plan) else ""
            raise NotResumable(
                f"a stored sample of side {s.label} does not follow the plan "
                f"({where or 'the plan is done'})"
            )
        mine.setdefault(slot, []).append(s)
        if slot == nxt:
            failed = s.status not in ("ok", retake.DISTURBED) and not retake.counts(s)
            tries = tries + 1 if failed else tries
            if retake.counts(s) or retake.left_out(s) or tries > retries:
                nxt, tries = nxt + 1, 0
    st = Standing()
    for i in range(len(plan)):
        done, attempts, retakes = False, 0, 0
        for s in mine.get(i, []):
            if done:
                continue
            if retake.counts(s):
                st.tps[plan[i]].append(s.tps or 0.0)
                done = True
            elif s.status in ("ok", retake.DISTURBED):
                retakes = 0 if retake.left_out(s) else retakes + 1
                if retake.left_out(s) or i in st.open:
                    st.open[i] = retakes
            else:
                st.failed[plan[i]] += 1
                attempts += 1
        if done:
            st.open.pop(i, None)
        elif i in st.open:
            st.todo[i] = (0, st.open[i])
        elif attempts <= retries:
            st.todo[i] = (attempts, retakes)
    st.slot = min((i for i in st.todo if i not in st.open), default=len(plan))
    return st
