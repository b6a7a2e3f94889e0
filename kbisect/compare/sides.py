"""The two sides of a compare, from what was asked (`Spec`): kernel, revision, command line,
scenario."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbisect.compare import sequential
from kbisect.core import progress
from kbisect.core.exceptions import UserError
from kbisect.kernel import build
from kbisect.scenario import profile, scenario
from kbisect.source import git, patches, tree, worktree
from kbisect.source.patches import Patch
from kbisect.targets.base import Kernel, Target

NAMES = ("A", "B")


class ConflictingOptions(UserError):
    """Two options name the same thing twice."""


@dataclass(frozen=True)
class Spec:
    """What `kbisect compare` was asked for, typed once by the command line."""

    scenario: str
    tree: str | None = None
    base: str | None = None  # side A's revision (and B's, unless revert or rev_b)
    revert: str | None = None  # side B = base with this commit reverted
    rev_b: str | None = None
    kernel: str | None = None  # one prebuilt image (or build dir) for both sides
    kernel_a: str | None = None
    kernel_b: str | None = None
    configs: tuple[str, ...] = ()
    base_config: str = "tinyconfig"
    target: str = "vng"
    arch: str | None = None
    append: str = ""
    append_a: str = ""
    append_b: str = ""
    patch: tuple[Path, ...] = ()  # applied on both sides, in order (before each side's own)
    patch_a: tuple[Path, ...] = ()
    patch_b: tuple[Path, ...] = ()
    sets: tuple[str, ...] = ()
    sets_a: tuple[str, ...] = ()
    sets_b: tuple[str, ...] = ()
    pg_build: str | None = None  # the PostgreSQL a side runs, built (pgbuild/)
    pg_build_a: str | None = None
    pg_build_b: str | None = None
    pg_patch: tuple[Path, ...] = ()
    pg_patch_a: tuple[Path, ...] = ()
    pg_patch_b: tuple[Path, ...] = ()
    label_a: str | None = None
    label_b: str | None = None
    boots: int | str | None = None  # per side, or "auto"; None: the scenario's, else auto
    max_boots: int | None = None  # with auto: the most per side (stopping.MOST)
    noise_prior: str = "auto"  # with auto: earlier runs' noise as a prior, or "off"
    order: str = "abba"
    retries: int = 1
    seed: int | None = None
    min_effect: float = 0.02
    out: Path | None = None

    def side(self, name: str) -> tuple[str | None, str, tuple[str, ...], str | None]:
        """A side's own (kernel, append, sets, label), "A" or "B"."""
        if name == "A":
            return self.kernel_a, self.append_a, self.sets_a, self.label_a
        return self.kernel_b, self.append_b, self.sets_b, self.label_b


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
    patches: tuple[Patch, ...] = ()  # applied on rev, in order, when it is built
    tps: list[float] = field(default_factory=list)
    failed: int = 0

    def describe(self) -> dict[str, Any]:
        m = (self.kernel.manifest if self.kernel else None) or {}
        kernel = {k: m.get(k) for k in ("commit", "describe", "subject", "config_hash")}
        if m.get("patches"):  # only then: a run without patches summarizes as it always did
            kernel["patches"] = m["patches"]
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


def check_conflicts(spec: Spec) -> None:
    """Options that name one side's kernel twice, or two ways to make side B."""
    pairs = [
        ("--kernel", spec.kernel, "--kernel-a", spec.kernel_a),
        ("--kernel", spec.kernel, "--kernel-b", spec.kernel_b),
        ("--kernel", spec.kernel, "--base", spec.base),
        ("--kernel-a", spec.kernel_a, "--base", spec.base),
        ("--kernel-b", spec.kernel_b, "--rev-b", spec.rev_b),
        ("--kernel-b", spec.kernel_b, "--revert", spec.revert),
        ("--rev-b", spec.rev_b, "--revert", spec.revert),
    ]
    for first, a, second, b in pairs:
        if a and b:
            raise ConflictingOptions(f"{first} and {second} both say which kernel to run: give one")
    if spec.label_a and spec.label_a == spec.label_b:
        raise ConflictingOptions(
            f"--label-a and --label-b are both {spec.label_a!r}: the report could not tell "
            "the sides apart; give two labels"
        )
    if spec.max_boots is not None and spec.boots not in (None, sequential.AUTO):
        raise ConflictingOptions(f"--max-boots goes with --boots auto, not --boots {spec.boots}")
    prebuilt = [
        ("--patch", spec.patch, "--kernel", spec.kernel_a or spec.kernel_b or spec.kernel),
        ("--patch-a", spec.patch_a, "--kernel", spec.kernel_a or spec.kernel),
        ("--patch-b", spec.patch_b, "--kernel", spec.kernel_b or spec.kernel),
    ]
    for option, given, kernel, image in prebuilt:
        if given and image:
            raise ConflictingOptions(f"{option} needs a revision to build, not a prebuilt {kernel}")
    if (spec.patch or spec.patch_a or spec.patch_b) and not spec.base:
        raise ConflictingOptions("--patch, --patch-a and --patch-b need --base (a revision)")
    if spec.pg_build and (spec.pg_build_a or spec.pg_build_b):
        raise ConflictingOptions(
            "--pg-build and --pg-build-a/-b both say which PostgreSQL to build"
        )
    if (spec.rev_b or spec.revert) and not spec.base:
        raise ConflictingOptions("--rev-b and --revert need --base (side A's revision)")


def side(name: str, spec: Spec, base: scenario.Scenario) -> Side:
    """Side A or B from the shared options plus the side's own (`--append-a`, ...)."""
    image, own_append, own, label = spec.side(name)
    sets = [*spec.sets, *own]
    append = " ".join(filter(None, [spec.append, own_append]))
    made = Side(name, label or name, append, list(own), base.with_overrides(sets), sets)
    if image or spec.kernel:
        made.kernel = Kernel.find(image or str(spec.kernel))
    return made


def resolve_revisions(spec: Spec, a: Side, b: Side) -> Path | None:
    """The repository, when a side is a revision to build; side B = A's revision unless
    --revert or --rev-b says otherwise."""
    if not (spec.base or spec.rev_b or spec.revert):
        return None
    repo = tree.resolve(spec.tree)
    if spec.base:
        a.rev = git.rev_parse(repo, spec.base)
        a.label = spec.label_a or f"base {git.describe(repo, a.rev)}"
    if spec.revert:
        assert a.rev is not None
        commit = git.rev_parse(repo, spec.revert)
        if not git.is_ancestor(repo, commit, a.rev):
            raise UserError(f"{spec.revert} is not an ancestor of {spec.base}: nothing to revert")
        progress.step(f"creating base + revert of {commit[:12]} in a scratch worktree")
        b.rev = worktree.revert_onto(repo, a.rev, commit)
        short = textwrap.shorten(git.subject(repo, commit), 50, placeholder="...")  # at a space
        b.label = spec.label_b or f"revert {commit[:12]} ({short})"
    elif spec.rev_b:
        b.rev = git.rev_parse(repo, spec.rev_b)
        b.label = spec.label_b or git.describe(repo, b.rev)
    elif a.rev and b.kernel is None:
        b.rev = a.rev
    apply_patches(repo, spec, a, b)
    return repo


def apply_patches(repo: Path, spec: Spec, a: Side, b: Side) -> None:
    """--patch on both sides, then --patch-a/-b on their own: every file read and applied
    (as commits in kbisect's repository) for both sides before anything is built; a side's
    `rev` stays the revision the patches go on (build_side applies them again: a lookup)."""
    base_label = a.label
    for side, own, label in ((a, spec.patch_a, spec.label_a), (b, spec.patch_b, spec.label_b)):
        files = patches.read_all([*spec.patch, *own])
        if side.rev is None or not files:
            continue
        progress.step(f"side {side.name}: applying {len(files)} patch file(s) on {side.rev[:12]}")
        patches.apply(repo, side.rev, files)
        side.patches = files
        if not label:
            start = side.label if side.label not in (side.name, base_label) else base_label
            side.label = " + ".join([start, *(p.name for p in files)])


def validate(a: Side, b: Side) -> None:
    same_kernel = (a.rev is not None and (a.rev, a.patches) == (b.rev, b.patches)) or (
        a.rev is None and b.rev is None and a.kernel == b.kernel
    )
    if same_kernel and a.append == b.append and a.scen.hash == b.scen.hash:
        raise UserError(
            "both sides are the same kernel, command line and scenario: nothing to compare"
        )
    if (a.kernel is None and a.rev is None) or (b.kernel is None and b.rev is None):
        raise UserError("each side needs a kernel: --kernel/--kernel-a/--kernel-b or --base")


def build_side(repo: Path, side: Side, target: Target, configs: tuple[str, ...], base: str) -> None:
    """Build the side's revision for the target's arch (cached per commit), with the perf
    fragment when the side's scenario is profiled."""
    if side.kernel is not None or side.rev is None:
        return
    progress.step(f"side {side.name}: building {side.rev[:12]} ({side.label})")
    configs = profile.with_fragments(configs, side.scen.data)
    req = build.Request(
        tree=repo, rev=side.rev, arch=target.arch, configs=configs, base=base, patches=side.patches
    )
    result = build.build(req)
    side.kernel = Kernel(result.image, result.manifest)
