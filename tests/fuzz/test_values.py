"""Values of the kinds with a rule (core/reading.py: one line of text, a label, a tag, a
name used as a path, a minimum effect), bad ones, in every option of those kinds and in
the file fields held to the same rules (a scenario's guest.append and PostgreSQL
settings; a study's name, min_effect, labels and images): text that is not UTF-8 (an
argument's bytes arrive as lone surrogates), each control character, empty strings, two
sides with one label, numbers on the boundary. Each must be refused with exit 2 and one
line (tests/fuzz/sandbox.py), and no run dir made. The corpus below keeps the issue's
concrete cases."""

from __future__ import annotations

import argparse
import os
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from kbisect.commands import cli
from tests.fuzz import argv as gen
from tests.fuzz import mutate
from tests.fuzz.conftest import SEED, Fuzz, collected, examples
from tests.fuzz.sandbox import Sandbox, check_case

pytestmark = pytest.mark.fuzz

CONTROLS = [chr(c) for c in range(32)] + ["\x7f"]
# a byte that is not UTF-8, as Python gives it in argv (surrogateescape): os.fsencode-able
SURROGATES = [os.fsdecode(bytes([b])) for b in (0x80, 0xC3, 0xE9, 0xFE, 0xFF)]
# each option of a kind with a rule: a value it takes, and the kind
GOOD = {
    "--append": ("quiet", "line"),
    "--append-a": ("x=1", "line"),
    "--append-b": ("x=2", "line"),
    "--set": ("postgres.settings.work_mem=4MB", "line"),
    "--set-a": ("postgres.settings.work_mem=4MB", "line"),
    "--set-b": ("pgbench.clients=2", "line"),
    "--axis": ("pgbench.clients=1,2", "line"),
    "--label-a": ("old", "label"),
    "--label-b": ("new", "label"),
    "--target": ("fake", "label"),
    "--tag": ("v6.13-rc3", "tag"),
    "--name": ("sweep", "name"),
    "--min-effect": ("0.05", "effect"),
}
OTHERS = {("emu", "--name"), ("db", "--tag")}  # a path (paths.py's) and a query filter
EMPTY = ["", " ", "  "]
BAD: dict[str, list[str]] = {
    "line": [],
    "label": EMPTY,
    "tag": [*EMPTY, "a b", "v6.13 -rc3"],
    "name": [*EMPTY, "../x", "a/b", ".x", "-x", "x" * 65, "é"],
    "effect": ["1", "1.0", "1.5", "-0.01", "-1e-300", "1e308", "nan", "inf"],
}


def _parser(words: list[str]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = cli.build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def ruled_options() -> list[tuple[str, str]]:
    """(subcommand of argv.SPECS, option) for every option of a kind with a rule that the
    subcommand's parser has."""
    out = []
    for name, spec in gen.SPECS.items():
        have = {o for a in _parser(spec.words)._actions for o in a.option_strings}
        out += [(name, o) for o in sorted(have & set(GOOD)) if (spec.words[0], o) not in OTHERS]
    return out


CASES = ruled_options()


@st.composite
def bad_value(draw: st.DrawFn, option: str) -> str:
    """The option's good value broken: a control character or a byte that is not UTF-8
    put in it, or a bad value of its kind."""
    good, kind = GOOD[option]
    spliced = st.builds(
        lambda at, ch: good[:at] + ch + good[at:],
        st.integers(0, len(good)),
        st.sampled_from(CONTROLS + SURROGATES),
    )
    if kind == "effect":  # a number: no text to splice into
        return draw(st.sampled_from(BAD[kind] + SURROGATES))
    return draw(st.one_of(spliced, st.sampled_from(BAD[kind] or [good + "\n"])))


def no_run_dir(sb: Sandbox, places: gen.Places) -> list[str]:
    made = sorted(sb.results.glob("*")) if sb.results.exists() else []
    return [str(p) for p in made] + ([str(places.out)] if places.out.exists() else [])


def refused(fuzz: Fuzz, argv: list[str], what: str, says: str = "") -> None:
    """argv (with tokens) run in a fresh sandbox: exit 2, one line (holding `says`),
    nothing written, no run dir."""
    sb = fuzz.world.sandbox()
    places = gen.Places(fuzz.world, fuzz.seeds, sb)
    _refused_in(fuzz, sb, places, gen.resolve(argv, places), what, says)


def _refused_in(
    fuzz: Fuzz, sb: Sandbox, places: gen.Places, line: list[str], what: str, says: str
) -> None:
    sb.writable += gen.run_dirs(line)
    outcome = check_case(fuzz.world, sb, line, what=what, refuse=what, keep=True)
    made = no_run_dir(sb, places)
    shutil.rmtree(sb.root, ignore_errors=True)
    assert not made, f"{what}: a run dir was made before the refusal: {made}"
    assert says in " ".join(outcome.error_lines()), f"{what}: {outcome.stderr!r}"


@settings(settings.get_profile("fuzz"), max_examples=examples(120))
@seed(SEED)
@given(data=st.data())
def an_option_value(fuzz: Fuzz, data: st.DataObject) -> None:
    """Every option of a kind with a rule, in each subcommand that has it (the working
    command line otherwise), with a bad value of its kind."""
    name, option = data.draw(st.sampled_from(CASES), label="option")
    value = data.draw(bad_value(option), label="value")
    refused(fuzz, gen.numeric_line(name, option, value), f"{name} {option} {value!r}")


test_an_option_value = collected(an_option_value)


# --- file fields held to the same rules -------------------------------------------------


def _set(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        doc = doc[int(key)] if isinstance(doc, list) else doc.setdefault(key, {})
    if isinstance(doc, list):
        doc[int(last)] = value
    else:
        doc[last] = value


SCENARIO_FIELDS = {
    "guest.append": "quiet",
    "postgres.settings.work_mem": "4MB",
    "postgres.settings.search_path": "public",
}
STUDY_FIELDS = {
    "name": "fz",
    "append": "quiet",
    "axes.1.levels.0.label": "s1",
    "axes.1.levels.0.append": "quiet",
}
STUDY_BAD: dict[str, list[Any]] = {
    "name": BAD["name"],
    "axes.1.levels.0.label": EMPTY,
    "min_effect": [1, 1.0, 1.5, -0.01, 100],
    "kernels.images.0": ["/no/such/image", "v6.12-typo", "HEAD"],
}
MACHINE_FIELDS = {"host": "192.0.2.1", "arch": "x86_64", "user": "root", "workdir": "/var/lib/k"}
RUN = ["run", "--kernel", "{image}", "--out", "{out}"]
READERS = {  # the command line that reads a file of each kind, given its path
    "scenario": lambda path: [*RUN, "--target", "{target}", "--scenario", path],
    "machine": lambda path: [*RUN, "--scenario", "{scenario}", "--target", path],
    "study": lambda path: ["study", path, "--target", "{target}", "--yes", "--out", "{out}"],
}


def _text_field(data: st.DataObject, good: str) -> str:
    at = data.draw(st.integers(0, len(good)), label="at")
    return good[:at] + data.draw(st.sampled_from(CONTROLS), label="control") + good[at:]


def _file_case(
    fuzz: Fuzz, kind: str, dotted: str, value: Any, dry: bool = False, says: str = ""
) -> None:
    sb = fuzz.world.sandbox()
    places = gen.Places(fuzz.world, fuzz.seeds, sb)
    path = Path(places[kind])
    doc = tomllib.loads(path.read_text())
    _set(doc, dotted, value)
    path.write_text(mutate.toml(doc))
    argv = READERS[kind](str(path)) + (["--dry-run"] if dry else [])
    what = f"{kind} {dotted} = {value!r}"
    _refused_in(fuzz, sb, places, gen.resolve(argv, places), what, says)


@settings(settings.get_profile("fuzz"), max_examples=examples(40))
@seed(SEED)
@given(data=st.data())
def a_file_field(fuzz: Fuzz, data: st.DataObject) -> None:
    """A scenario's, a machine target's or a study's field of a kind with a rule, with a
    bad value."""
    kind = data.draw(st.sampled_from(["scenario", "machine", "study"]), label="kind")
    if kind != "study":
        fields = SCENARIO_FIELDS if kind == "scenario" else MACHINE_FIELDS
        dotted = data.draw(st.sampled_from(sorted(fields)), label="field")
        _file_case(fuzz, kind, dotted, _text_field(data, fields[dotted]))
        return
    if data.draw(st.booleans(), label="text"):
        dotted = data.draw(st.sampled_from(sorted(STUDY_FIELDS)), label="field")
        value: Any = _text_field(data, STUDY_FIELDS[dotted])
    else:
        dotted = data.draw(st.sampled_from(sorted(STUDY_BAD)), label="field")
        value = data.draw(st.sampled_from(STUDY_BAD[dotted]), label="value")
    _file_case(fuzz, "study", dotted, value, dry=data.draw(st.booleans(), label="dry"))


test_a_file_field = collected(a_file_field)


# --- the corpus: the concrete cases ---------------------------------------------

RUN_LINE = ["run", "--kernel", "{image}", "--target", "{target}", "--out", "{out}"]
COMPARE = ["compare", "--kernel", "{image}", "--scenario", "{scenario}", "--boots", "3"]
COMPARE_LINE = [*COMPARE, "--target", "{target}", "--out", "{out}"]
RECORD = ["rc", "record", "--history", "{out}", "--commit", "{sha7}"]
RECORD_LINE = [*RECORD, "--result", "{compare_run}", "--tps", "1000"]
# (what the one line must say, argv)
CORPUS_ARGV = [
    ("--append", [*RUN_LINE, "--scenario", "{scenario}", "--append", "quiet\ninit=/bin/sh"]),
    ("not valid UTF-8", [*RUN_LINE, "--scenario", "{scenario}", "--append", "x=\udcff"]),
    ("not valid UTF-8", [*COMPARE_LINE, "--label-a", "A\udce9"]),
    ("--set-b", [*COMPARE_LINE, "--set-b", "postgres.settings.work_mem=4MB\nfsync=off"]),
    ("--label-a and --label-b", [*COMPARE_LINE, "--label-a", "same", "--label-b", "same"]),
    ("--target", [*COMPARE, "--target", "", "--out", "{out}"]),
    ("--min-effect", [*COMPARE_LINE, "--min-effect", "1.0"]),
    ("--tag", [*RECORD_LINE, "--tag", ""]),
    ("--tag", [*RECORD_LINE, "--tag", "v6.13-rc2\nv6.13-rc3"]),
    ("not valid UTF-8", [*RUN_LINE, "--scenario", "{dir}/s\udcffmoke.toml"]),
]


@pytest.mark.parametrize(("says", "argv"), CORPUS_ARGV, ids=[a[0] for a in CORPUS_ARGV])
def test_corpus_option(fuzz: Fuzz, says: str, argv: list[str]) -> None:
    refused(fuzz, argv, " ".join(argv), says)


CORPUS_FILES = [
    ("scenario", "guest.append", "quiet\ninit=/bin/sh", False),
    ("scenario", "postgres.settings.work_mem", "4MB\nfsync = off", False),
    ("machine", "workdir", "/var/lib/kbisect\n/", False),
    ("study", "min_effect", 1.0, False),  # a 0.69x step was "no significant step", exit 0
    ("study", "kernels.images.0", "v6.12-typo", True),  # --dry-run imported the tree
    ("study", "name", "../../escape", True),
    ("study", "axes.1.levels.0.label", "", True),
]


@pytest.mark.parametrize(("kind", "dotted", "value", "dry"), CORPUS_FILES)
def test_corpus_file(fuzz: Fuzz, kind: str, dotted: str, value: Any, dry: bool) -> None:
    says = dotted.split(".")[0 if kind == "study" else -1]  # the field the line names
    _file_case(fuzz, kind, dotted, value, dry, says)


def test_every_ruled_option_is_drawn() -> None:
    """The generator reaches each option of a kind with a rule in some subcommand."""
    drawn = {o for _, o in CASES}
    assert drawn == set(GOOD), sorted(set(GOOD) - drawn)
