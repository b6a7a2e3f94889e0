"""The two sides of a compare, from the options: kernel, revision, command line, scenario."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbisect.build import build
from kbisect.core import progress
from kbisect.core.exceptions import UserError
from kbisect.scenario import scenario
from kbisect.source import git, tree, worktree
from kbisect.targets.base import Kernel, Target

NAMES = ("A", "B")


class ConflictingOptions(UserError):
    """Two options name the same thing twice."""


@dataclass
class Side:
    name: str  # "A" or "B"
    label: str
    append: str
    overrides: list[str]  # the side's own --set-a/-b (the shared --set are in `sets`)
    scen: scenario.Scenario
    sets: list[str] = field(default_factory=list)  # every override applied to the scenario
    kernel: Kernel | None = None
    rev: str | None = None  # a revision to build
    tps: list[float] = field(default_factory=list)
    failed: int = 0

    def describe(self) -> dict[str, Any]:
        m = (self.kernel.manifest if self.kernel else None) or {}
        kernel = {k: m.get(k) for k in ("commit", "describe", "subject", "config_hash")}
        kernel["image"] = str(self.kernel.image) if self.kernel else None
        return {
            "label": self.label,
            "kernel": kernel,
            "append": self.append,
            "overrides": self.overrides,
            "scenario_hash": self.scen.hash,
        }

    def to_plan(self) -> dict[str, Any]:
        """What a resumed run needs to rebuild this side exactly (schedule.py)."""
        assert self.kernel is not None
        manifest = dict(self.kernel.manifest) if self.kernel.manifest else None
        return {
            **self.describe(),
            "sets": self.sets,
            "image": str(self.kernel.image),
            "manifest": manifest,
        }

    @classmethod
    def from_plan(cls, name: str, data: dict[str, Any], spec: str) -> Side:
        """The side a plan saved; UserError if its scenario has changed since."""
        scen = scenario.load(spec).with_overrides(list(data["sets"]))
        if scen.hash != data["scenario_hash"]:
            raise UserError(f"side {name}: the scenario {spec} changed since this run started")
        kernel = Kernel(Path(data["image"]), data.get("manifest"))
        if not kernel.image.is_file():
            raise UserError(f"side {name}: its kernel {kernel.image} is gone")
        return cls(
            name,
            data["label"],
            data["append"],
            list(data["overrides"]),
            scen,
            list(data["sets"]),
            kernel,
        )


def check_conflicts(args: argparse.Namespace) -> None:
    """Options that name one side's kernel twice, or two ways to make side B."""
    pairs = [
        ("--kernel", args.kernel, "--kernel-a", args.kernel_a),
        ("--kernel", args.kernel, "--kernel-b", args.kernel_b),
        ("--kernel", args.kernel, "--base", args.base),
        ("--kernel-a", args.kernel_a, "--base", args.base),
        ("--kernel-b", args.kernel_b, "--rev-b", args.rev_b),
        ("--kernel-b", args.kernel_b, "--revert", args.revert),
        ("--rev-b", args.rev_b, "--revert", args.revert),
    ]
    for first, a, second, b in pairs:
        if a and b:
            raise ConflictingOptions(f"{first} and {second} both say which kernel to run: give one")
    if (args.rev_b or args.revert) and not args.base:
        raise ConflictingOptions("--rev-b and --revert need --base (side A's revision)")


def from_args(args: argparse.Namespace, base: scenario.Scenario) -> tuple[Side, Side]:
    """Side A and B from the shared options plus each side's own (`--append-a`, ...)."""
    return _side("A", args, base), _side("B", args, base)


def _side(name: str, args: argparse.Namespace, base: scenario.Scenario) -> Side:
    x = name.lower()
    own: list[str] = getattr(args, f"set_{x}")
    sets = [*args.set, *own]
    append = " ".join(filter(None, [args.append, getattr(args, f"append_{x}")]))
    side = Side(
        name, getattr(args, f"label_{x}") or name, append, own, base.with_overrides(sets), sets
    )
    image = getattr(args, f"kernel_{x}") or args.kernel
    if image:
        side.kernel = Kernel.find(image)
    return side


def resolve_revisions(args: argparse.Namespace, a: Side, b: Side) -> Path | None:
    """The repository, when a side is a revision to build; side B = A's revision unless
    --revert or --rev-b says otherwise."""
    if not (args.base or args.rev_b or args.revert):
        return None
    repo = tree.resolve(args.tree)
    if args.base:
        a.rev = git.rev_parse(repo, args.base)
        a.label = args.label_a or f"base {git.describe(repo, a.rev)}"
    if args.revert:
        assert a.rev is not None
        commit = git.rev_parse(repo, args.revert)
        if not git.is_ancestor(repo, commit, a.rev):
            raise UserError(f"{args.revert} is not an ancestor of {args.base}: nothing to revert")
        progress.step(f"creating base + revert of {commit[:12]} in a scratch worktree")
        b.rev = worktree.revert_onto(repo, a.rev, commit)
        b.label = args.label_b or f"revert {commit[:12]} ({git.subject(repo, commit)[:50]})"
    elif args.rev_b:
        b.rev = git.rev_parse(repo, args.rev_b)
        b.label = args.label_b or git.describe(repo, b.rev)
    elif a.rev and b.kernel is None:
        b.rev = a.rev
    return repo


def validate(a: Side, b: Side) -> None:
    same_kernel = (a.rev is not None and a.rev == b.rev) or (
        a.rev is None and b.rev is None and a.kernel == b.kernel
    )
    if same_kernel and a.append == b.append and a.scen.hash == b.scen.hash:
        raise UserError(
            "both sides are the same kernel, command line and scenario: nothing to compare"
        )
    if (a.kernel is None and a.rev is None) or (b.kernel is None and b.rev is None):
        raise UserError("each side needs a kernel: --kernel/--kernel-a/--kernel-b or --base")


def build_side(repo: Path, side: Side, target: Target, configs: tuple[str, ...], base: str) -> None:
    """Build the side's revision for the target's arch (cached per commit)."""
    if side.kernel is not None or side.rev is None:
        return
    progress.step(f"side {side.name}: building {side.rev[:12]} ({side.label})")
    req = build.Request(tree=repo, rev=side.rev, arch=target.arch, configs=configs, base=base)
    result = build.build(req)
    side.kernel = Kernel(result.image, result.manifest)
