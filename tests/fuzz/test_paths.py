"""Every path kbisect takes (each path option, argument and environment variable of each
subcommand), drawn from the classes the OS refuses or kbisect must not write through: a
name over 255 bytes, a path over 4095, a symbolic link to nothing, a loop of links, a file
where a directory is wanted or a directory where a file is, a file on the way, a directory
nobody may write, a symbolic link where kbisect writes, a name used as a path that would
leave its directory (`emu --name ../../x`). Each must be refused (exit 2, or 3 for a
results or cache dir: docs/exit-codes.md) in one line, with no traceback, and nothing
made: not the path, not a link's target, nothing outside the run dir and the cache
(tests/fuzz/sandbox.py checks the rest). kbisect/core/paths.py is the boundary."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

from tests.fuzz.argv import Places, resolve
from tests.fuzz.conftest import SEED, Fuzz, collected, examples
from tests.fuzz.sandbox import Sandbox, check_case

pytestmark = pytest.mark.fuzz

IN = ("long-name", "long-path", "dangling", "loop", "on-a-file")
DIR_IN = (*IN, "file-for-dir")
FILE_IN = (*IN, "dir-for-file")
DIR_WRITE = (*DIR_IN, "unwritable")  # a dir kbisect writes into; a link to one is fine
DIR_OUT = (*DIR_WRITE, "link-to-dir")  # an --out: never through a link
FILE_OUT = (*FILE_IN, "unwritable", "link-to-file")
RUN = ["run", "--kernel", "{image}", "--scenario", "{scenario}", "--target", "{target}"]


@dataclass(frozen=True)
class Slot:
    """A command line with {P} where the path goes (or `env`, the variable that holds
    it), the classes it is drawn from, and the exit codes a refusal may have."""

    argv: list[str]
    classes: tuple[str, ...]
    env: str = ""
    codes: frozenset[int] = field(default_factory=lambda: frozenset({2}))


ROOM = frozenset({2, 3})  # a run's --out or a results/cache dir: exit 3 (UnusableDir)
HISTORY = ROOM  # rc's --history: a dir, or the history file itself (one that is none: 3)
SLOTS: dict[str, Slot] = {
    "run --out": Slot([*RUN, "--out", "{P}"], DIR_OUT, codes=ROOM),
    "compare --out": Slot(
        [*RUN[2:], "--append-b", "x=1", "--boots", "2", "--out", "{P}"], DIR_OUT, codes=ROOM
    ),
    "study --out": Slot(
        ["study", "{study}", "--target", "{target}", "--yes", "--out", "{P}"], DIR_OUT, codes=ROOM
    ),
    "history --out": Slot(["history", "{compare_run}", "--out", "{P}"], DIR_OUT),
    "history DIR": Slot(["history", "{P}"], DIR_IN),
    "history --rc-history": Slot(["history", "--rc-history", "{P}"], DIR_IN),
    "export -o": Slot(["export", "{compare_run}", "-o", "{P}"], FILE_OUT),
    "export RUN_DIR": Slot(["export", "{P}"], DIR_IN),
    "ktest-config --out": Slot(
        [
            "ktest-config",
            "--target",
            "{machine}",
            "--scenario",
            "{scenario}",
            "--tree",
            "{repo}",
            "--good",
            "{sha1}",
            "--bad",
            "{sha7}",
            "--out",
            "{P}",
        ],
        FILE_OUT,
    ),
    "rc record --history": Slot(
        shlex.split(
            "rc record --history {P} --tag v6.14-rc1 --commit {sha7} --result {compare_run} "
            "--scenario-hash 0123abcd --tps 1000"
        ),
        DIR_WRITE,
        codes=HISTORY,
    ),
    "rc next --history": Slot(
        ["rc", "next", "--tree", "{repo}", "--history", "{P}"], DIR_IN, codes=HISTORY
    ),
    "db rebuild DIR": Slot(["db", "rebuild", "{P}"], DIR_IN),
    "report RUN": Slot(["report", "{P}"], DIR_IN),
    "diff RUN_A": Slot(["diff", "{P}:A", "{compare_run}:B"], DIR_IN),
    "run --scenario": Slot([*RUN[:4], "{P}", *RUN[5:], "--out", "{out}"], FILE_IN),
    "run --target": Slot([*RUN[:6], "{P}", "--out", "{out}"], FILE_IN),
    "study FILE": Slot(["study", "{P}", "--target", "{target}", "--yes", "--dry-run"], FILE_IN),
    "run --kernel": Slot([*RUN[:2], "{P}", *RUN[3:], "--out", "{out}"], IN),
    "build --tree": Slot(["build", "--tree", "{P}"], DIR_IN),
    "build --patch": Slot(["build", "--tree", "{repo}", "--patch", "{P}"], FILE_IN),
    "compare --resume": Slot(["compare", "--resume", "{P}"], DIR_IN),
    "KBISECT_RESULTS": Slot(RUN, DIR_WRITE, env="KBISECT_RESULTS", codes=ROOM),
    "KBISECT_CACHE": Slot(RUN, DIR_IN, env="KBISECT_CACHE", codes=ROOM),
}
NAMES = ["../../x", "..", ".", "a/b", "/tmp/x", "x" * 256, "", " ", "-", "a\nb", "é"]
SAFE = re.compile(r"[A-Za-z0-9._-]+")


def bad_name() -> st.SearchStrategy[str]:
    """A name that must not become a path: a `..`, a slash, too long, or any other
    character than [A-Za-z0-9._-]."""
    text = st.text(st.characters(codec="utf-8", exclude_characters="\0"))
    return st.one_of(
        st.sampled_from(NAMES),
        text.filter(lambda t: not SAFE.fullmatch(t) and not t.startswith("-")),
        st.builds("../{}".format, st.from_regex(SAFE, fullmatch=True)),
    )


def make(kind: str, sb: Sandbox, size: int) -> Path:
    """A path of the class `kind` in the case's inputs (watched: nothing may change
    there), made as far as it can exist."""
    top = sb.inputs / "p"
    top.mkdir(exist_ok=True)
    (top / "afile").write_text("a file\n")
    (top / "adir").mkdir(exist_ok=True)
    path = top / "target"
    if kind == "long-name":
        return top / ("n" * (256 + size))
    if kind == "long-path":
        return top.joinpath(*["d" * 200] * (21 + size % 5))
    if kind == "dangling":
        path.symlink_to(top / "nowhere")
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "on-a-file":
        return top / "afile" / "sub"
    elif kind == "file-for-dir":
        return top / "afile"
    elif kind == "dir-for-file":
        return top / "adir"
    elif kind == "unwritable":  # as root too: nothing can be made in /proc
        return Path("/proc") / f"kbisect-fuzz-{size}" / "out"
    elif kind == "link-to-dir":
        path.symlink_to(top / "adir")
    elif kind == "link-to-file":
        path.symlink_to(top / "afile")
    return path


def case(fuzz: Fuzz, slot_name: str, kind: str, size: int) -> None:
    world, slot = fuzz.world, SLOTS[slot_name]
    sb = world.sandbox()
    path = make(kind, sb, size)
    places = Places(world, fuzz.seeds, sb)
    places["P"] = str(path)
    argv = resolve(slot.argv, places)
    if slot.env:
        sb.extra_env[slot.env] = str(path)
    before = _beside(world.base)
    out = check_case(world, sb, argv, what=f"{slot_name}: {kind}")
    assert out.code in slot.codes, f"{slot_name} {kind} ({path}): exit {out.code}\n{out.stderr}"
    assert _beside(world.base) == before


def _beside(base: Path) -> list[str]:
    """What is beside the session's cache and cases: where `../` from there would go."""
    return sorted(os.listdir(base))


@settings(settings.get_profile("fuzz"), max_examples=examples(60))
@seed(SEED)
@given(data=st.data())
def _paths(fuzz: Fuzz, data: st.DataObject) -> None:
    """A path option, argument or variable of a subcommand with a path of a class it
    must refuse (the issue's cases: test_issue_corpus)."""
    name = data.draw(st.sampled_from(sorted(SLOTS)), label="slot")
    kind = data.draw(st.sampled_from(SLOTS[name].classes), label="class")
    case(fuzz, name, kind, data.draw(st.integers(0, 200), label="size"))


test_paths = collected(_paths)


@settings(settings.get_profile("fuzz"), max_examples=examples(20))
@seed(SEED)
@given(name=bad_name(), action=st.sampled_from(["status", "down", "reset", "up"]))
@example(name="../../x", action="up")
@example(name="..", action="status")
def _names(fuzz: Fuzz, name: str, action: str) -> None:
    """`emu ACTION --name NAME` with a name that is no plain name: refused, exit 2, and
    nothing made in the cache or beside it."""
    world = fuzz.world
    sb = world.sandbox()
    before = (_beside(world.base), _beside(world.cache))
    check_case(world, sb, ["emu", action, f"--name={name}"], refuse=f"--name {name!r}")
    assert (_beside(world.base), _beside(world.cache)) == before


test_names = collected(_names)


# The corpus: each slot with each of its classes once (the audit's cases among them:
# a 300-byte name, a dangling $KBISECT_CACHE, a file as $KBISECT_RESULTS, export -o LINK,
# history --out over a file, rc record --history on a dangling link, db rebuild DIR).
CORPUS = [(name, kind) for name, slot in SLOTS.items() for kind in slot.classes]


@pytest.mark.parametrize(("slot_name", "kind"), CORPUS)
def test_issue_corpus(fuzz: Fuzz, slot_name: str, kind: str) -> None:
    case(fuzz, slot_name, kind, 44)
