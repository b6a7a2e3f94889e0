"""The fuzz tier's session: one world (tests/fuzz/world.py) and hypothesis's settings.

Seeded: every test runs with the seed KBISECT_FUZZ_SEED (default below), so a session
replays exactly. A property runs all its examples and fails with every kind of failure
it met, once each (`collected`): the command line, the input it corrupted, the rules
broken; the list is also written to results/fuzz-examples/failures/. With
KBISECT_FUZZ_RAISE=1 the first failure raises: hypothesis saves it in its example
database, results/fuzz-examples/ in the checkout (KBISECT_FUZZ_DB elsewhere), replays it
first next session, and prints `@reproduce_failure(...)`. KBISECT_FUZZ_EXAMPLES scales
the number of cases (2 doubles them), KBISECT_FUZZ_SHRINK=1 shrinks a failure to a
minimal case (slower).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
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


def collected(prop: Callable[..., None]) -> Callable[[Fuzz], None]:
    """A pytest test running the property prop(fuzz=...) to its last example, then failing
    with every kind of failure it met, each once (sandbox.COLLECT); the list also goes to
    DATABASE/failures/<test>.txt."""

    def test(fuzz: Fuzz) -> None:
        found: dict[str, str] = {}
        sandbox.COLLECT.append(found)
        try:
            prop(fuzz=fuzz)
        finally:
            sandbox.COLLECT.pop()
        name = os.environ.get("PYTEST_CURRENT_TEST", "fuzz").split(" ")[0].split("::")[-1]
        out = DATABASE / "failures" / f"{name}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        text = "\n\n".join(found.values())
        out.write_text(text + "\n" if text else "")
        assert not found, f"{len(found)} kind(s) of failure, each once:\n\n{text}"

    test.__doc__ = prop.__doc__
    return test


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
