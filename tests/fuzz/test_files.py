"""Every kind of file kbisect reads, corrupted (tests/fuzz/mutate.py) and fed to the
commands that read it: inputs (scenario, study, fake and machine target TOMLs, a kernel
image and its manifest, an rc history) and a run's own files, taken from real small runs
on the fake target (tests/fuzz/world.py): a compare's plan.json, summary.json and
samples, a bisection's state.json and summary.json, a study's study.json, schedule.json,
summary.json and samples, a build's manifest.json in the cache. The rules are the argv
fuzz's (tests/fuzz/sandbox.py)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from tests.fuzz import mutate
from tests.fuzz.argv import RANGE, Places, resolve
from tests.fuzz.conftest import SEED, Fuzz, collected, examples
from tests.fuzz.sandbox import check_case

pytestmark = pytest.mark.fuzz

RUN = ["--kernel", "{image}", "--scenario", "{scenario}", "--target", "{target}", "--out", "{out}"]


@dataclass(frozen=True)
class FileKind:
    """Where the file is (a token of argv.Places, then a glob inside it), the command lines
    that read it, and whether its structure is corrupted too (JSON, TOML)."""

    place: str
    glob: str
    readers: list[list[str]]
    structured: bool = True
    examples: int = 25


KINDS: dict[str, FileKind] = {
    "scenario": FileKind("scenario", "", [["run", *RUN]]),
    "study": FileKind(
        "study",
        "",
        [
            ["study", "{study}", "--target", "{target}", "--yes", "--dry-run"],
            ["study", "{study}", "--target", "{target}", "--yes", "--out", "{out}"],
        ],
    ),
    "fake-target": FileKind("target", "", [["run", *RUN]]),
    "machine-target": FileKind(
        "machine",
        "",
        [
            [
                "ktest-config",
                "--target",
                "{machine}",
                "--scenario",
                "{scenario}",
                *RANGE,
                "--out",
                "{out}/ktest.conf",
            ],
            ["run", *RUN[:4], "--target", "{machine}", "--out", "{out}"],
        ],
        examples=15,
    ),
    "kernel-manifest": FileKind("image_dir", "manifest.json", [["run", *RUN]]),
    "kernel-image": FileKind("image_dir", "bzImage", [["run", *RUN]], structured=False),
    "rc-history": FileKind(
        "rc_history",
        "history.json",
        [
            ["rc", "next", "--tree", "{repo}", "--history", "{rc_history}"],
            [
                "rc",
                "record",
                "--history",
                "{rc_history}",
                "--tag",
                "v6.13-rc2",
                "--commit",
                "{sha7}",
                "--result",
                "{compare_run}",
                "--scenario-hash",
                "0123abcd",
                "--tps",
                "1000",
            ],
        ],
        examples=15,
    ),
    "compare-run": FileKind(
        "compare_run",
        "*.json|samples/*.json",
        [
            ["report", "{compare_run}"],
            ["report", "{compare_run}", "--format", "text"],
            ["compare", "--resume", "{compare_run}"],
        ],
        examples=40,
    ),
    "bisect-run": FileKind(
        "bisect_run",
        "*.json",
        [["report", "{bisect_run}"], ["bisect", "--resume", "{bisect_run}"]],
        examples=40,
    ),
    "study-run": FileKind(
        "study_run",
        "*.json|samples/*.json",
        [["report", "{study_run}"], ["study", "--resume", "{study_run}", "--yes"]],
        examples=40,
    ),
}


def candidates(top: Path, glob: str) -> list[Path]:
    if not glob:
        return [top]
    found: list[Path] = []
    for g in glob.split("|"):
        found += sorted(top.glob(g))
    return found


def fuzz_kind(name: str) -> Callable[[Fuzz], None]:
    kind = KINDS[name]

    @settings(settings.get_profile("fuzz"), max_examples=examples(kind.examples))
    @seed(SEED)
    @given(data=st.data())
    def prop(fuzz: Fuzz, data: st.DataObject) -> None:
        world, seeds = fuzz.world, fuzz.seeds
        sb = world.sandbox()
        places = Places(world, seeds, sb)
        top = Path(places[kind.place])
        files = candidates(top, kind.glob)
        file = data.draw(st.sampled_from(files), label="file")
        what = mutate.corrupt(data, file, kind.structured)
        argv = data.draw(st.sampled_from(kind.readers), label="reader")
        shown = f"{file.relative_to(sb.root)}: {what}"
        check_case(world, sb, resolve(argv, places), what=shown)

    return collected(prop)


def _cache_manifests(fuzz: Fuzz) -> list[Path]:
    return sorted(fuzz.world.cache.glob("builds/*/*/*/manifest.json"))


@settings(settings.get_profile("fuzz"), max_examples=examples(15))
@seed(SEED)
@given(data=st.data())
def build_manifest_in_the_cache(fuzz: Fuzz, data: st.DataObject) -> None:
    """A build's manifest.json in kbisect's cache, corrupted, then that build asked for
    again (put back afterwards: the cache is the session's)."""
    world, seeds = fuzz.world, fuzz.seeds
    manifests = _cache_manifests(fuzz)
    file = data.draw(st.sampled_from(manifests), label="file")
    backup = world.base / "manifest.backup"
    shutil.copy2(file, backup)
    sha = file.parent.name
    sb = world.sandbox()
    places = Places(world, seeds, sb)
    try:
        what = mutate.corrupt(data, file)
        argv = ["build", "--tree", "{repo}", "--rev", sha, "--target", "{target}"]
        check_case(world, sb, resolve(argv, places), what=f"cache {file.name}: {what}")
    finally:
        mutate.replace_file(file, backup)


test_build_manifest_in_the_cache = collected(build_manifest_in_the_cache)
for _name in KINDS:
    globals()[f"test_{_name.replace('-', '_')}"] = fuzz_kind(_name)
