"""What `kbisect bisect` was asked (`Options`), saved in its state (state.py) so that
--resume needs none; the methods and their re-check sizes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbisect.core.arch import host_arch
from kbisect.measure import retake
from kbisect.targets import monitor

METHODS = ("posterior", "git")
STORIES = ("one", "full")  # --story: the one-step search (default), or the whole range's
# --recheck-samples by method: git's fixed re-check takes exactly this many pairs; the
# posterior's adaptive one at most this many (it stops from 3 pairs on, as soon as the
# ratio is clear; the looks' error split over 3..12, docs/statistics.md)
RECHECK_SAMPLES = {"git": 8, "posterior": 12}


@dataclass(frozen=True)
class Options:
    """What `kbisect bisect` was asked; saved in the state, so --resume needs none."""

    tree: str | None
    good: str
    bad: str
    scenario: str
    threshold: float | None = None
    higher_is_better: bool = True
    append: str = ""
    runs_min: int = 3
    runs_max: int = 10
    recheck_samples: int = 8
    configs: tuple[str, ...] = ()
    arch: str = field(default_factory=host_arch)  # resolved: targets.get(target, --arch)
    target: str = "vng"
    sets: tuple[str, ...] = ()  # scenario overrides (--set)
    base_config: str = "tinyconfig"
    method: str = "posterior"  # or "git": git bisect run with bisect/run
    confidence: float = 0.95  # posterior: stop when one commit (or group) holds this
    max_boots: int = 100  # posterior: boots after the endpoints, re-checks included
    references: int = 3  # a reference boot after every N test boots; 0: none
    retakes: int = retake.RETAKES  # of a disturbed sample (retake.py)
    disturbed_share: float = monitor.THRESHOLD
    count_disturbed: bool = False  # saved only when set: older states read as they were
    patches: tuple[str, ...] = ()  # --patch files (absolute), on every revision; saved if any
    # --pg-build and its --pg-patch files (absolute): the PostgreSQL server every revision
    # runs; pg_sets: the overrides naming its build, made once before the bisection
    # starts (driver.py); each saved if any
    pg_build: str | None = None
    pg_patches: tuple[str, ...] = ()
    pg_sets: tuple[str, ...] = ()
    batch: int | None = None  # --batch: samples per round (None: the target's machines)
    story: str = "one"  # posterior: --story full tells the whole range's story (probes)

    def overrides(self) -> list[str]:
        """Every scenario override: --set, then the PostgreSQL build's."""
        return [*self.sets, *self.pg_sets]

    def measured_argv(self, built: bool = True) -> list[str]:
        """What is measured and where: the options the driver and every step share. Once
        made (`built`), the PostgreSQL build is passed by its key, so that every step runs
        the same server; else as asked (--pg-build, --pg-patch)."""
        out = ["--scenario", self.scenario, "--target", self.target, "--arch", self.arch]
        if not self.higher_is_better:
            out.append("--lower-is-better")
        if self.append:
            out += ["--append", self.append]
        for c in self.configs:
            out += ["--config", c]
        for s in self.sets:
            out += ["--set", s]
        if built and self.pg_sets:
            for s in self.pg_sets:
                out += ["--set", s]
        elif self.pg_build is not None:
            out += ["--pg-build", self.pg_build]
            for p in self.pg_patches:
                out += ["--pg-patch", p]
        if self.base_config != "tinyconfig":
            out += ["--base-config", self.base_config]
        if self.policy() != retake.Policy():
            out += ["--retakes", str(self.retakes), "--disturbed-share", repr(self.disturbed_share)]
        if self.count_disturbed:
            out.append("--count-disturbed")
        for p in self.patches:
            out += ["--patch", p]
        return out

    def policy(self) -> retake.Policy:
        return retake.Policy(self.retakes, self.disturbed_share, self.count_disturbed)

    def argv(self) -> list[str]:
        """The `kbisect bisect` arguments that reproduce this bisection."""
        out = ["bisect", "--tree", self.tree or "default", "--good", self.good, "--bad", self.bad]
        if self.threshold is not None:
            out += ["--threshold", f"{self.threshold:g}"]
        out += ["--method", self.method, "--references", str(self.references)]
        if self.method == "posterior":
            out += ["--confidence", f"{self.confidence:g}", "--max-boots", str(self.max_boots)]
            out += ["--story", self.story] if self.story != "one" else []
        out += ["--runs-min", str(self.runs_min), "--runs-max", str(self.runs_max)]
        out += ["--recheck-samples", str(self.recheck_samples)]
        return out + self.measured_argv(built=False)

    def step_argv(
        self, threshold: float, store: Path, runs_max: int, refs: tuple[str, str] | None = None
    ) -> list[str]:
        """bisect/run's arguments, the same for every step of one pass; refs: the good and
        bad references each step samples alongside (drift-aware references)."""
        out = ["--threshold", repr(threshold), "--runs-min", str(self.runs_min)]
        out += ["--runs-max", str(runs_max), "--store", str(store)]
        if refs is not None:
            out += ["--reference-good", refs[0], "--reference-bad", refs[1]]
            out += ["--references", str(self.references)]
        return out + self.measured_argv()

    def as_dict(self) -> dict[str, Any]:
        out = {**asdict(self), "configs": list(self.configs), "sets": list(self.sets)}
        if not self.count_disturbed:
            del out["count_disturbed"]
        for key in ("patches", "pg_patches", "pg_sets"):
            if getattr(self, key):
                out[key] = list(getattr(self, key))
            else:
                del out[key]
        if self.pg_build is None:
            del out["pg_build"]
        if self.batch is None:
            del out["batch"]
        if self.story == "one":  # saved only when full: older states read as they were
            del out["story"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Options:
        """Options saved by this or an earlier kbisect (which had no --target: vng, and
        only git's method, without references)."""
        old = {"method": "git", "references": 0}
        lists = {
            "configs": tuple(data["configs"]),
            "sets": tuple(data.get("sets", ())),
            "patches": tuple(data.get("patches", ())),
            "pg_patches": tuple(data.get("pg_patches", ())),
            "pg_sets": tuple(data.get("pg_sets", ())),
        }
        return cls(**{**old, **data, **lists})
