"""Pinned cases: the bad inputs a new user's audit met, each with the outcome it must
have, run in-process and as `python -m kbisect` (the real thing: interpreter start,
signal handling, exit status). Besides the fuzz rules (tests/fuzz/sandbox.py), each case
names the exit codes it may end with.

To pin a case the fuzz found: add a row here, or `@example(...)` on its property.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fakes import make_fake_kernel_repo
from tests.fuzz.argv import RANGE, Places, resolve
from tests.fuzz.conftest import Fuzz
from tests.fuzz.sandbox import Runner, Sandbox, as_subprocess, check_case, in_process
from tests.fuzz.world import QUICK_BISECT, flat

pytestmark = pytest.mark.fuzz

RUN = ["--kernel", "{image}", "--target", "{target}"]
BISECT = [*RANGE, "--target", "{target}", *flat(QUICK_BISECT)]
STUDY = [
    "--kernels",
    "{image_dir},{image1_dir}",
    "--axis",
    "pgbench.clients=2,4",
    "--target",
    "{target}",
    "--boots",
    "2",
    "--seed",
    "7",
    "--yes",
]
COMPARE = [*RUN, "--append-a", "x=1", "--append-b", "x=2", "--boots", "3", "--out", "{out}"]


@dataclass(frozen=True)
class Pin:
    argv: list[str]
    codes: frozenset[int]
    setup: str = ""  # a named preparation of the sandbox, see `prepare`
    env: dict[str, str] = field(default_factory=dict)


USER = frozenset({2})
INFRA = frozenset({3})  # a results or cache dir kbisect cannot write: before any build
PINS: dict[str, Pin] = {
    # a scenario file that is not UTF-8: one line, exit 2 (was a traceback, exit 1)
    "scenario-not-utf8-run": Pin(
        ["run", *RUN, "--scenario", "{bad_scenario}", "--out", "{out}"], USER
    ),
    "scenario-not-utf8-compare": Pin(["compare", *COMPARE, "--scenario", "{bad_scenario}"], USER),
    "scenario-not-utf8-bisect": Pin(["bisect", *BISECT, "--scenario", "{bad_scenario}"], USER),
    "scenario-not-utf8-study": Pin(["study", *STUDY, "--scenario", "{bad_scenario}"], USER),
    # a dotted key through a plain value: one line, exit 2 (was a TypeError traceback)
    "set-dotted-run": Pin(
        ["run", *RUN, "--scenario", "smoke", "--set", "pgbench.clients.x=1", "--out", "{out}"], USER
    ),
    "set-dotted-compare": Pin(
        ["compare", *COMPARE, "--scenario", "smoke", "--set", "pgbench.clients.x=1"], USER
    ),
    "set-dotted-bisect": Pin(
        ["bisect", *BISECT, "--scenario", "smoke", "--set", "pgbench.clients.x=1"], USER
    ),
    "set-dotted-study": Pin(
        ["study", *STUDY, "--scenario", "smoke", "--set", "pgbench.clients.x=1"], USER
    ),
    # a results dir that is a file: one line, exit 3 before any build (was an OSError traceback)
    "results-dir-is-a-file-bisect": Pin(
        ["bisect", *BISECT, "--scenario", "smoke"], INFRA, "results-file"
    ),
    "results-dir-is-a-file-study": Pin(
        ["study", *STUDY, "--scenario", "smoke"], INFRA, "results-file"
    ),
    "out-is-a-file-compare": Pin(
        ["compare", *COMPARE[:-1], "{file}", "--scenario", "smoke"], INFRA
    ),
    # NaN is no number: refused, exit 2 (was accepted: a 0.735x regression became "no
    # significant step", and --budget nan switched the budget guard off)
    "study-min-effect-nan": Pin(
        ["study", *STUDY, "--scenario", "smoke", "--min-effect", "nan"], USER
    ),
    "study-budget-nan": Pin(["study", *STUDY, "--scenario", "smoke", "--budget", "nan"], USER),
    "study-boots-negative": Pin(["study", *STUDY, "--scenario", "smoke", "--boots", "-1"], USER),
    "report-min-effect-inf": Pin(["report", "{compare_run}", "--min-effect", "inf"], USER),
    # a user repository whose path has a space builds and compares (was: no build at all)
    "tree-path-with-space": Pin(
        [
            "compare",
            "--tree",
            "{space_repo}",
            "--base",
            "{space_sha7}",
            "--revert",
            "{space_sha5}",
            "--scenario",
            "smoke",
            "--target",
            "{target}",
            "--boots",
            "2",
            "--out",
            "{out}",
        ],
        frozenset({0, 1}),
        "space-repo",
    ),
    # a second compare into the same --out is refused before it writes there
    "compare-same-out-twice": Pin(
        ["compare", *COMPARE[:-1], "{compare_run}", "--scenario", "smoke"], USER, "keep-plan"
    ),
}


def prepare(pin: Pin, fuzz: Fuzz, sb: Sandbox, places: Places) -> None:
    if pin.setup == "results-file":
        results = sb.inputs / "results-is-a-file"
        results.write_text("a file, not a dir\n")
        sb.extra_env["KBISECT_RESULTS"] = str(results)
    elif pin.setup == "space-repo":
        repo = sb.root / "runs" / "my kernels" / "linux tree"
        shas = make_fake_kernel_repo(
            repo, [{"subject": f"c{i}", "tps": 1000 if i < 5 else 700} for i in range(1, 8)]
        )
        places["space_repo"] = str(repo)
        places.update({f"space_sha{i}": sha for i, sha in enumerate(shas)})
        sb.writable.append(repo)  # kbisect may not touch it; checked below


@pytest.mark.parametrize("runner", [in_process, as_subprocess], ids=["in-process", "subprocess"])
@pytest.mark.parametrize("name", list(PINS))
def test_pinned(fuzz: Fuzz, name: str, runner: Runner) -> None:
    pin = PINS[name]
    sb = fuzz.world.sandbox()
    places = Places(fuzz.world, fuzz.seeds, sb)
    prepare(pin, fuzz, sb, places)
    argv = resolve(pin.argv, places)
    plan = Path(places["compare_run"]) / "plan.json"
    plan_before = plan.read_bytes()
    repo = Path(places.get("space_repo", sb.root))
    head = (repo / ".git" / "HEAD").read_bytes() if pin.setup == "space-repo" else b""
    outcome = check_case(fuzz.world, sb, argv, runner, keep=True)
    assert outcome.code in pin.codes, (
        f"{outcome.shell()}\n  exit {outcome.code}, wanted {sorted(pin.codes)}; "
        f"stderr ends: {outcome.error_lines()[-1:]}"
    )
    assert plan.read_bytes() == plan_before, f"{outcome.shell()}: rewrote the first run's plan.json"
    if pin.setup == "space-repo":
        assert (repo / ".git" / "HEAD").read_bytes() == head
    json.dumps(outcome.argv)  # the argv is printable: a reproducer
