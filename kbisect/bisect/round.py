"""One round of a posterior bisection's boots: k samples at once on a pool of k machines.

The search (posterior/search.py) plans a round of k boots, the driver's bench
(posterior/bench.py Store) builds the revisions and hands the boots here, each a callable
that takes one sample on the target it is given. A plain target is a pool of one: the
round's boots run one after the other on it, as a bisection always ran; a pool runs them
at once, one on each free machine (targets/pool/dispatch.py run_batch: a machine that
fails is quarantined and its boot given to another). A boot that fails does not stop
the others: its BootError or BenchmarkError is its result, and the search makes that
revision untestable (a reference: a warning), as it does for a single boot.

Every sample is written to the sample store as it is taken, and the search saves its state
(the revisions of the round among the visited ones) before the round starts: a round cut
short is resumed from the samples it wrote; the rest are chosen again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from kbisect.core.exceptions import BenchmarkError, BootError
from kbisect.targets.base import Target
from kbisect.targets.pool import dispatch
from kbisect.targets.pool.target import Pool

T = TypeVar("T")
Boot = Callable[[Target], float]  # one sample on the machine given: its tps


def width(target: Target, batch: int | None = None) -> int:
    """The samples a round takes at once: `--batch` where given, else the target's
    machines (a plain target: one)."""
    return batch if batch is not None else len(dispatch.members(target))


def take_round(
    target: Target,
    boots: Sequence[Callable[[Target], T]],
    on: Sequence[str | None] | None = None,
) -> list[T | BootError | BenchmarkError]:
    """Each boot on a machine of target, in order; its result, or the error that failed it.
    `on`: the machine each boot must run on (None: any free one; a quarantined machine's
    boots go to the others)."""
    if isinstance(target, Pool):
        where = list(on) if on is not None else [None] * len(boots)
        tasks = [dispatch.Task(boot, m) for boot, m in zip(boots, where, strict=True)]
        done = dispatch.run_batch(target, tasks)
        # a kernel failure is that boot's result; any other error is raised, as a single
        # boot's would be
        return [
            d.error if isinstance(d.error, BootError | BenchmarkError) else d.get() for d in done
        ]
    out: list[T | BootError | BenchmarkError] = []
    for boot in boots:
        try:
            out.append(boot(target))
        except (BootError, BenchmarkError) as exc:
            out.append(exc)
    return out
