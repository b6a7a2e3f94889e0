"""Every subcommand with generated command lines (tests/fuzz/argv.py) on the fake target:
whatever the options hold, kbisect ends with an exit code of docs/exit-codes.md, no
traceback, a one-line error, nothing written outside its run dir and its cache, the user's
repository untouched (tests/fuzz/sandbox.py says how each is checked)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from tests.fuzz import argv as gen
from tests.fuzz.conftest import SEED, Fuzz, collected, examples
from tests.fuzz.sandbox import check_case

pytestmark = pytest.mark.fuzz


def fuzz(name: str) -> Callable[[Fuzz], None]:
    """The property for one subcommand, with its number of examples."""

    @settings(settings.get_profile("fuzz"), max_examples=examples(gen.SPECS[name].examples))
    @seed(SEED)
    @given(data=st.data())
    def prop(fuzz: Fuzz, data: st.DataObject) -> None:
        case(fuzz, name, data)

    return collected(prop)


def case(fuzz: Fuzz, name: str, data: st.DataObject) -> None:
    world, seeds = fuzz.world, fuzz.seeds
    line = data.draw(gen.command_line(name), label="argv")
    sb = world.sandbox()
    places = gen.Places(world, seeds, sb)
    argv = gen.resolve(line.argv, places)
    sb.writable += gen.run_dirs(argv)
    check_case(world, sb, argv, what=" ".join(line.argv), refuse=line.refuse)


@pytest.mark.parametrize(("name", "option", "value"), gen.numeric_cases())
def test_numeric_option_refuses(fuzz: Fuzz, name: str, option: str, value: str) -> None:
    """Every numeric option, nan/inf/-inf (and -1 for a count): exit 2, one line, before
    any work (the working command line otherwise)."""
    sb = fuzz.world.sandbox()
    places = gen.Places(fuzz.world, fuzz.seeds, sb)
    argv = gen.resolve(gen.numeric_line(name, option, value), places)
    sb.writable += gen.run_dirs(argv)
    check_case(fuzz.world, sb, argv, refuse=f"{option} {value}")


for _name in gen.SPECS:
    globals()[f"test_{_name.replace('-', '_')}"] = fuzz(_name)
