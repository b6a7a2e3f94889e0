"""The fuzz tier's session: one world (tests/fuzz/world.py) and hypothesis's settings.

Seeded: every test runs with the seed KBISECT_FUZZ_SEED (default below), so a session
replays exactly. Failing examples are saved in hypothesis's example database,
results/fuzz-examples/ in the checkout (KBISECT_FUZZ_DB elsewhere), and replayed first
by the next session; a failure also prints its command line, the input it corrupted and
`@reproduce_failure(...)`. KBISECT_FUZZ_EXAMPLES scales the number of cases (2 doubles
them), KBISECT_FUZZ_SHRINK=1 shrinks a failure to a minimal case (slower).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.fuzz import sandbox
from tests.fuzz.sandbox import World
from tests.fuzz.world import Seeds, make_world

SEED = int(os.environ.get("KBISECT_FUZZ_SEED", "20261124"))
DATABASE = Path(os.environ.get("KBISECT_FUZZ_DB") or sandbox.ROOT / "results" / "fuzz-examples")
SCALE = float(os.environ.get("KBISECT_FUZZ_EXAMPLES", "1"))
# shrinking reruns a failing case dozens of times: off unless asked for (KBISECT_FUZZ_SHRINK=1);
# a failure's message names its command line and corrupted field either way
PHASES = [Phase.explicit, Phase.reuse, Phase.generate] + (
    [Phase.shrink] if os.environ.get("KBISECT_FUZZ_SHRINK") else []
)

settings.register_profile(
    "fuzz",
    database=DirectoryBasedExampleDatabase(str(DATABASE)),
    deadline=None,
    print_blob=True,
    derandomize=False,
    phases=PHASES,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)


def examples(n: int) -> int:
    """n cases, scaled by KBISECT_FUZZ_EXAMPLES."""
    return max(1, round(n * SCALE))


class Fuzz:
    """The session's world and seeds (a plain class: hypothesis prints a failing test's
    arguments, and would print a dataclass field by field)."""

    def __init__(self, world: World, seeds: Seeds) -> None:
        self.world, self.seeds = world, seeds

    def __repr__(self) -> str:
        return f"Fuzz({self.world.base})"


@pytest.fixture(scope="session")
def fuzz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzz]:
    yield Fuzz(*make_world(tmp_path_factory.mktemp("fuzz")))
