"""The fault-injection suite's machinery (tests/faults/test_faults.py): chains of real kbisect
runs on the fake tree and fake target, each interrupted 1-4 times and resumed, with the
checks made after every interruption.

A chain's processes all carry MARK=<chain id> in their environment (kbisect passes its
own on to every child), so "no process left" is checked over the whole machine, reapers
included. Where an interruption lands:

- boot:   the fake target's kill_at=N: the fake guest signals the driver at boot N;
- sample: the Nth new sample file appears (polled);
- phase:  plan.json or summary.json appears (compare), the bisect's state.json changes
          phase or its bisect log gains a verdict (polled);
- time:   a random moment within the reference run's duration.

Besides, a run may lose a fake guest (SIGKILL, a crashed VM) or, in a bisection, a
bisect step (the chain's signal). Every choice comes from the chain's seed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes import fake_calls, fake_target, start_driver
from tests.faults.procs import MARK, marked

SIGNALS = {
    "KILL": signal.SIGKILL,
    "INT": signal.SIGINT,
    "TERM": signal.SIGTERM,
    "HUP": signal.SIGHUP,
}
TRIGGERS = ("boot", "sample", "phase", "time")
WEIGHTS = (0.35, 0.3, 0.2, 0.15)
RUN_LIMIT_S = 120.0


@dataclass
class Scenario:
    """What a chain runs: `start(chain)` is the argv of a fresh run, `resume(chain)` the
        argv that continues it; `run_dir(chain)` finds the run, `finished(run)` says whether
        its report is written; `samples(chain)` lists every stored sample file; `phase(run)`
    is ("done",) once the report is written, else what polling watches change; `outcome(run)`
    is what must equal the reference's."""

    name: str
    start: Callable[[Chain], list[str]]
    resume: Callable[[Chain, Path], list[str]]
    run_dir: Callable[[Chain], Path | None]
    samples: Callable[[Chain], list[Path]]
    phase: Callable[[Path], tuple[Any, ...]]
    outcome: Callable[[Path], dict[str, Any]]
    target: dict[str, Any]


@dataclass
class Reference:
    """The uninterrupted run a chain must end like."""

    code: int
    seconds: float
    calls: int
    samples: int
    outcome: dict[str, Any]


@dataclass
class Worker:
    """One of the (at most two) places chains run at once: its own cache (so builds are
    made once per worker) and a base environment."""

    root: Path
    env: dict[str, str]
    chains: int = 0


@dataclass
class Chain:
    scenario: Scenario
    worker: Worker
    sig: str
    seed: int
    tag: str
    dir: Path
    rng: random.Random = field(init=False)
    events: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.dir.mkdir(parents=True)

    @property
    def results(self) -> Path:
        return self.dir / "results"

    @property
    def target_file(self) -> Path:
        return self.dir / "fake.toml"

    def env(self) -> dict[str, str]:
        return {**self.worker.env, MARK: self.tag, "KBISECT_RESULTS": str(self.results)}

    def calls(self) -> int:
        return len(fake_calls(self.target_file))

    def problem(self, text: str) -> None:
        self.problems.append(f"{self.tag} (seed {self.seed}): {text}")
        with (self.dir / "problems.txt").open("a") as f:
            f.write(self.problems[-1] + "\n")


@dataclass
class Run:
    """One driver process of a chain and how it ended."""

    argv: list[str]
    code: int = 0
    trigger: str = ""
    fired: bool = False
    guest_killed: bool = False
    step_killed: bool = False
    seconds: float = 0.0
    log: Path = Path()


def plan_run(chain: Chain, ref: Reference, interrupt: bool) -> dict[str, Any]:
    """Where this run will be interrupted (if it is), from the chain's seed."""
    rng = chain.rng
    stored = len(chain.scenario.samples(chain))
    left = max(1, ref.samples - stored)
    how: dict[str, Any] = {
        "trigger": rng.choices(TRIGGERS, WEIGHTS)[0] if interrupt else "",
        # one lost guest per chain: two on one boot would use up its retry (--retries 1)
        "guest": rng.random() < 0.15 and not any(e["guest_killed"] for e in chain.events),
        "guest_at": chain.calls() + rng.randint(1, left),
        "step": interrupt and chain.scenario.name == "bisect" and rng.random() < 0.1,
        "kill_at": chain.calls() + rng.randint(1, max(1, ref.calls - stored)),
        "nth_sample": stored + rng.randint(1, left),
        "nth_change": rng.randint(1, 2),
        "at_s": rng.uniform(0.0, ref.seconds * left / ref.samples + 0.2),
    }
    return how


def _find(chain: Chain, needle: str) -> int | None:
    for pid, argv in marked(chain.tag):
        if needle in argv:
            return pid
    return None


class _Watch:
    """Polls a running driver and fires the planned interruption once."""

    def __init__(self, chain: Chain, how: dict[str, Any], run: Run, pid: int) -> None:
        self.chain, self.how, self.run, self.pid = chain, how, run, pid
        self.start = time.monotonic()
        self.changes = 0
        self.last: tuple[Any, ...] | None = None

    def due(self) -> bool:
        kind, how, chain = self.how["trigger"], self.how, self.chain
        if kind == "sample":
            return len(chain.scenario.samples(chain)) >= int(how["nth_sample"])
        if kind == "time":
            return time.monotonic() - self.start >= float(how["at_s"])
        if kind == "phase":
            run = chain.scenario.run_dir(chain)
            now = chain.scenario.phase(run) if run else ()
            if self.last is not None and now != self.last:
                self.changes += 1
            self.last = now
            return self.changes >= int(how["nth_change"])
        return False

    def poll(self) -> None:
        how, run = self.how, self.run
        if how["guest"] and not run.guest_killed and self.chain.calls() >= how["guest_at"]:
            pid = _find(self.chain, "fake/guest.py")
            if pid is not None:
                _signal(pid, signal.SIGKILL)
                run.guest_killed = True
        if how["step"] and not run.fired:
            pid = _find(self.chain, "kbisect.commands.bisect_step")
            if pid is not None:
                run.fired = run.step_killed = _signal(pid, SIGNALS[self.chain.sig])
        elif how["trigger"] in ("sample", "time", "phase") and not run.fired and self.due():
            run.fired = _signal(self.pid, SIGNALS[self.chain.sig])


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def execute(chain: Chain, argv: list[str], how: dict[str, Any]) -> Run:
    """Start the driver, interrupt it as planned, wait for its end."""
    settings = dict(chain.scenario.target)
    if how["trigger"] == "boot" and not how["step"]:
        settings.update(kill_at=how["kill_at"], kill_signal=chain.sig)
        settings["kill_pid_file"] = str(chain.dir / "driver.pid")
    fake_target(chain.dir, "fake", state=str(chain.dir / "fake-state"), **settings)
    n = len(chain.events)
    run = Run(argv, trigger=how["trigger"], log=chain.dir / f"run-{n}.log")
    calls_before = chain.calls()
    driver = start_driver(argv, chain.dir / "driver.pid", env=chain.env(), log=run.log)
    watch = _Watch(chain, how, run, driver.pid)
    try:
        while driver.poll() is None:
            if time.monotonic() - watch.start > RUN_LIMIT_S:
                driver.kill()
                chain.problem(f"run {n} ran longer than {RUN_LIMIT_S:.0f}s: {argv}")
            watch.poll()
            time.sleep(0.01)
    finally:
        if driver.poll() is None:  # a bug of the suite: leave no driver behind
            driver.kill()
            driver.wait()
    run.code, run.seconds = int(driver.returncode), time.monotonic() - watch.start
    if how["trigger"] == "boot" and not how["step"]:
        run.fired = calls_before < how["kill_at"] <= chain.calls()
    return run


def expected_code(chain: Chain, run: Run) -> set[int]:
    """The exit codes an interrupted driver may end with."""
    if run.step_killed:
        return {3}  # the step aborted the bisection (git bisect run stopped)
    if chain.sig == "KILL":
        return {-signal.SIGKILL}
    text = run.log.read_text(errors="replace")
    # Before cli.main has installed its handlers (Python still importing), or after the
    # command's end (Python exiting), a signal ends the process the default way.
    # (A KeyboardInterrupt from the SIGTERM/SIGHUP handler after cli.main has returned
    # ends Python by SIGINT.)
    if "[kbisect" not in text:  # Python dies with 1 when interrupted in its site import
        return {130, -SIGNALS[chain.sig]} | ({1} if "Fatal Python error" in text else set())
    return {130, -SIGNALS[chain.sig], -signal.SIGINT} if "\nreport: " in text else {130}


def describe(chain: Chain, run: Run) -> dict[str, Any]:
    event = {
        "trigger": run.trigger,
        "fired": run.fired,
        "code": run.code,
        "guest_killed": run.guest_killed,
        "step_killed": run.step_killed,
        "seconds": round(run.seconds, 2),
        "default_exit": run.fired  # the signal came before kbisect's start or after its end
        and not run.step_killed
        and run.code in (-SIGNALS[chain.sig], -signal.SIGINT)
        and chain.sig != "KILL",
    }
    chain.events.append(event)
    (chain.dir / "events.json").write_text(json.dumps(chain.events, indent=1))
    return event
