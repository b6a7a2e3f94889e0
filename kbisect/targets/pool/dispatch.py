"""Tasks run on a pool's machines at once: at most one measurement per machine, results in
the tasks' order, a machine that fails taken out and its task given to another.

    results = run_batch(pool, [Task(lambda t: sample.take(t, boot), member="box1"), ...])

A task is a callable that gets the machine (a Target) it runs on, bound to one machine
(`member`, its name) or to any free one (`member=None`). The threads are
concurrent.futures'; each runs one task, which drives its machine as the single-target
code does (over ssh, or a local QEMU). Nothing else: no queue outside this call, no
daemon, no protocol of its own.

The quarantine rule (`Pool.quarantined`, for the rest of the command):
- a machine fault (an InfraError that is not the kernel's: not a BootError,
  BenchmarkError or BuildError; e.g. ssh unreachable, a command of the machine's own
  that failed) takes the machine out at once;
- a strike is a task that raised a kernel failure (BootError, BenchmarkError) or whose
  result the caller's `strike` predicate calls bad (a compare: a slot whose tries all
  failed, or left disturbed); STRIKES strikes in a row (no good result between) take the
  machine out when another machine has had a good result in this command (a kernel that
  fails everywhere is the kernel's fault, not the machines');
- the task that took a machine out runs again on another machine; tasks bound to it are
  bound to any free machine; when no machine is left: NoMachineLeft (an InfraError).
Otherwise a kernel failure is the task's result (`Done.error`), not raised.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kbisect.core import proc
from kbisect.core.exceptions import BenchmarkError, BootError, BuildError, InfraError
from kbisect.targets.base import Target
from kbisect.targets.pool.target import NoMachineLeft, Pool, Record

T = TypeVar("T")
STRIKES = 3
KERNEL_FAILURES = (BootError, BenchmarkError, BuildError)


@dataclass(frozen=True)
class Task(Generic[T]):
    run: Callable[[Target], T]
    member: str | None = None  # a machine's name; None: any free machine


@dataclass(frozen=True)
class Done(Generic[T]):
    """A task's outcome: its value, or the kernel failure it raised, and the machine."""

    value: T | None
    error: Exception | None
    member: str

    def get(self) -> T:
        """The value, or the error raised."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def members(target: Target) -> list[Target]:
    """The machines a batch can use: a pool's not quarantined, or the target itself (a
    plain target is a pool of one)."""
    return list(target.live()) if isinstance(target, Pool) else [target]


def run_each(
    target: Target, tasks: Sequence[Task[T]], *, strike: Callable[[Any], bool] | None = None
) -> list[T | None]:
    """Every task's value, in the tasks' order: over a pool its machines at once
    (run_batch; None where a kernel failure ended the task); a plain target, a pool of
    one, runs them one after the other on itself (an error raised as it comes)."""
    if not isinstance(target, Pool):
        return [task.run(target) for task in tasks]
    return [d.value for d in run_batch(target, tasks, strike=strike)] if tasks else []


def machine_fault(exc: BaseException) -> bool:
    """An error of the machine, not of the kernel it ran."""
    return (
        isinstance(exc, InfraError)
        and not isinstance(exc, KERNEL_FAILURES)
        and not isinstance(exc, NoMachineLeft)
    )


@dataclass
class _Book:
    """The quarantine rule's counts: a pool keeps its own across batches (`Pool.record`),
    a plain target this batch's only."""

    target: Target
    record: Record

    def live(self) -> list[Target]:
        return members(self.target)

    def quarantine(self, name: str, why: str) -> None:
        if isinstance(self.target, Pool):
            self.target.quarantine(name, why)
        else:
            raise NoMachineLeft(f"target {name}: {why}")

    def struck(self, name: str) -> bool:
        """Count a strike; True when the machine is to be taken out."""
        strikes = self.record.strikes
        strikes[name] = strikes.get(name, 0) + 1
        return strikes[name] >= STRIKES and bool(self.record.good - {name})

    def fine(self, name: str) -> None:
        self.record.strikes[name] = 0
        self.record.good.add(name)


def _book(target: Target) -> _Book:
    return _Book(target, target.record if isinstance(target, Pool) else Record())


def _choose(book: _Book, want: str | None, busy: set[str], load: dict[str, int]) -> Target | None:
    free = [m for m in book.live() if m.name not in busy]
    if want is not None:
        return next((m for m in free if m.name == want), None)
    return min(free, key=lambda m: load.get(m.name, 0), default=None)


def run_batch(
    target: Target,
    tasks: Sequence[Task[T]],
    *,
    strike: Callable[[Any], bool] | None = None,
) -> list[Done[T]]:
    """Run every task, at most one per machine at a time; their outcomes in the tasks'
    order."""
    book = _book(target)
    if isinstance(target, Pool):
        target.stopping.clear()
    known = {m.name for m in (target.members if isinstance(target, Pool) else [target])}
    bound = {i: t.member for i, t in enumerate(tasks)}
    if unknown := sorted({str(b) for b in bound.values() if b is not None} - known):
        raise ValueError(f"tasks bound to no machine of {target.name}: {', '.join(unknown)}")
    pending = list(range(len(tasks)))
    out: dict[int, Done[T]] = {}
    running: dict[cf.Future[T], tuple[int, Target]] = {}
    executor = cf.ThreadPoolExecutor(max_workers=max(1, len(known)))
    try:
        while pending or running:
            _start(book, tasks, bound, pending, running, executor)
            done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: running[f][0]):
                i, m = running.pop(future)
                result = _settle(book, i, m, future, strike, bound, pending)
                if result is not None:
                    out[i] = result
    except BaseException:
        _stop(target, running)
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    executor.shutdown(wait=True)
    return [out[i] for i in range(len(tasks))]


def _stop(target: Target, running: dict[cf.Future[T], tuple[int, Target]]) -> None:
    """On an interruption (or the last machine lost): no boot starts any more, and the
    commands of the boots under way are ended until their threads return."""
    if isinstance(target, Pool):
        target.stopping.set()
    waiting = set(running)
    while waiting:
        proc.end_all()
        waiting = cf.wait(waiting, timeout=1.0).not_done


def _start(
    book: _Book,
    tasks: Sequence[Task[T]],
    bound: dict[int, str | None],
    pending: list[int],
    running: dict[cf.Future[T], tuple[int, Target]],
    executor: cf.ThreadPoolExecutor,
) -> None:
    """Start every pending task whose machine (or any machine) is free, in order."""
    busy = {m.name for _, m in running.values()}
    quarantined = book.target.quarantined if isinstance(book.target, Pool) else {}
    for i in list(pending):
        if bound[i] in quarantined:
            bound[i] = None
        load: dict[str, int] = {}
        for j in pending:
            if (b := bound[j]) is not None:
                load[b] = load.get(b, 0) + 1
        m = _choose(book, bound[i], busy, load)
        if m is None:
            continue
        running[executor.submit(tasks[i].run, m)] = (i, m)
        busy.add(m.name)
        pending.remove(i)


def _settle(
    book: _Book,
    i: int,
    m: Target,
    future: cf.Future[T],
    strike: Callable[[Any], bool] | None,
    bound: dict[int, str | None],
    pending: list[int],
) -> Done[T] | None:
    """A finished task's outcome, or None when its machine was taken out and the task
    goes back to the pending ones (for any machine)."""
    exc = future.exception()
    if exc is not None and not isinstance(exc, Exception):
        raise exc  # KeyboardInterrupt, SystemExit in a task: the command stops
    if exc is not None and not isinstance(exc, KERNEL_FAILURES) and not machine_fault(exc):
        raise exc  # a UserError or a bug: as the single-target code would
    value = None if exc is not None else future.result()
    out = False
    if exc is not None and machine_fault(exc):
        book.quarantine(m.name, f"{type(exc).__name__}: {exc}")
        out = True
    elif exc is not None or (strike is not None and strike(value)):
        if book.struck(m.name):
            book.quarantine(m.name, f"{STRIKES} failed or disturbed tasks in a row")
            out = True
    else:
        book.fine(m.name)
    if not out:
        return Done(value, exc, m.name)
    for j, b in bound.items():
        if b == m.name:
            bound[j] = None
    bound[i] = None
    pending.append(i)
    pending.sort()
    return None
