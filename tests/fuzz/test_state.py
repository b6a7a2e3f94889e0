"""Stored state damaged the way a hostile audit found it, fed to every reader: sample
files named like copies or with odd names, samples whose figures are text, NaN, beyond 64
bits or nested too deep, cells of the results index that are not what kbisect writes, a
directory where the index goes, a bisection's state.json naming a phase it cannot be in
(or a finished run resumed), an rc history.json with one bad entry, and the samples
`rc record` reads. Besides the rules every fuzz case keeps (tests/fuzz/sandbox.py), a
refusal rewrites nothing (plan.json, state.json, summary.json, history.json as they
were), and the readable rest is never lost: `rc next` and `kbisect history` still see
every good entry, the index every good row. The audit's concrete cases are the
@example corpus of each property."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

from kbisect.core import reading
from kbisect.db import schema
from tests.fuzz.argv import Places, resolve
from tests.fuzz.conftest import SEED, Fuzz, collected, examples
from tests.fuzz.sandbox import Outcome, Sandbox, check_case

pytestmark = pytest.mark.fuzz

# names a sample file may be given by hand: copies, no number, no label, spaces, unicode
ODD_NAMES = st.one_of(
    st.sampled_from(["001 (copy)-A.json", "abc-A.json", "01-.json", "002-Ä b.json", "٣-A.json"]),
    st.builds(
        "{:03d}{}-{}.json".format,
        st.integers(0, 10**25),
        st.sampled_from(["", " (copy)", " 2", "~"]),
        st.text(st.characters(exclude_categories=["Cs"], exclude_characters="/\0"), max_size=8),
    ),
)
# what replaces a value in a sample: text, NaN, a figure beyond 64 bits or any float
FIGURES: list[Any] = ["fast", math.nan, math.inf, 2**63, 10**30, 10**400, -(10**400), True, None]
FIELDS = ["tps", "fingerprint.cpu_cores", "fingerprint.mem_total_kb", "runs", "kernel.commit"]
RUN_READERS = [
    ["report", "{compare_run}"],
    ["diff", "{compare_run}:A", "{compare_run}:B"],
    ["compare", "--resume", "{compare_run}"],
    ["export", "{compare_run}"],
    ["history", "{compare_run}"],
    ["db", "rebuild", "{compare_run}"],
    ["report", "{study_run}"],
    ["study", "--resume", "{study_run}", "--yes"],
    ["export", "{study_run}"],
]
OWN = ("plan.json", "summary.json", "study.json", "schedule.json")  # a refusal keeps them
INDEX_READERS = [
    ["db", "query"],
    ["db", "info"],
    ["export", "--query"],
    ["history"],
    ["db", "rebuild"],
]
# a cell of the index as damage from outside leaves it: not JSON, a blob, text for a number
CELLS: list[Any] = ["not json", "{", b"\xff\x00", "fast", 2**63 - 1, -1, "", None]
PHASES = ["zzz", "", "DONE", "Done", "recheck ", "finished", "done"]


def _bytes_and_time(path: Path) -> tuple[bytes, int] | None:
    return (path.read_bytes(), path.stat().st_mtime_ns) if path.is_file() else None


def _kept(files: list[Path]) -> dict[Path, tuple[bytes, int] | None]:
    return {f: _bytes_and_time(f) for f in files}


def _refused_untouched(o: Outcome, before: dict[Path, tuple[bytes, int] | None]) -> None:
    """A refusal (exit 2 or 3) leaves each of `before`'s files as it was."""
    if o.code in (2, 3):
        changed = [str(f) for f, was in before.items() if _bytes_and_time(f) != was]
        assert not changed, f"{o.shell()}: exit {o.code} but rewrote {changed}"


def _set(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for k in parents:
        doc = doc.setdefault(k, {})
    doc[last] = value


def _dumps(doc: Any) -> str:
    """JSON as a damaged file holds it: NaN and Infinity as Python writes them."""
    return json.dumps(doc)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _unfinished(run: Path) -> None:
    """The compare as if interrupted before its summary: --resume takes it up."""
    for name in ("summary.json", "report.md"):
        (run / name).unlink(missing_ok=True)


def _run_of(reader: list[str], places: Places) -> Path:
    """The copy of the seed run the reader reads (the study's, else the compare's)."""
    return Path(places["study_run" if any("{study_run}" in a for a in reader) else "compare_run"])


def _case(fuzz: Fuzz) -> tuple[Sandbox, Places]:
    sb = fuzz.world.sandbox()
    return sb, Places(fuzz.world, fuzz.seeds, sb)


def _done(sb: Sandbox) -> None:
    shutil.rmtree(sb.root, ignore_errors=True)


# --- sample files: odd names, damaged figures -------------------------------------------


@settings(settings.get_profile("fuzz"), max_examples=examples(25))
@seed(SEED)
@given(
    name=ODD_NAMES,
    reader=st.sampled_from(RUN_READERS),
    unfinished=st.booleans(),
    pick=st.integers(0, 5),
)
@example(name="001 (copy)-A.json", reader=RUN_READERS[0], unfinished=False, pick=0)
@example(name="001 (copy)-A.json", reader=RUN_READERS[1], unfinished=False, pick=0)
@example(name="001 (copy)-A.json", reader=RUN_READERS[2], unfinished=True, pick=0)
@example(name="abc-A.json", reader=RUN_READERS[2], unfinished=True, pick=1)
@example(name="01-.json", reader=RUN_READERS[5], unfinished=False, pick=2)
@example(name="002-Ä b.json", reader=RUN_READERS[3], unfinished=False, pick=3)
def odd_sample_names(fuzz: Fuzz, name: str, reader: list[str], unfinished: bool, pick: int) -> None:
    """A copy of a real sample under a name kbisect never writes: every reader of the run
    leaves it out with a line (results.sample_paths), never a traceback; compare --resume
    of the unfinished run rewrites no plan before a refusal."""
    sb, places = _case(fuzz)
    run = _run_of(reader, places)
    if unfinished:
        _unfinished(run)
    samples = sorted((run / "samples").glob("*.json"))
    try:
        shutil.copy(samples[pick % len(samples)], run / "samples" / name)
    except OSError:  # a name the file system refuses (too long): not a case
        _done(sb)
        return
    before = _kept([run / name for name in OWN])
    o = check_case(fuzz.world, sb, resolve(reader, places), what=f"samples/{name!r}", keep=True)
    _refused_untouched(o, before)
    _done(sb)


@settings(settings.get_profile("fuzz"), max_examples=examples(30))
@seed(SEED)
@given(
    field=st.sampled_from(FIELDS),
    value=st.one_of(st.sampled_from(FIGURES), st.floats()),
    depth=st.one_of(st.none(), st.sampled_from([900, 5_000, 100_000])),
    reader=st.sampled_from(RUN_READERS),
    unfinished=st.booleans(),
    pick=st.integers(0, 5),
)
@example(field="tps", value="fast", depth=None, reader=RUN_READERS[2], unfinished=True, pick=3)
@example(field="tps", value=10**400, depth=None, reader=RUN_READERS[0], unfinished=False, pick=0)
@example(field="fingerprint.cpu_cores", value=2**63, depth=None, reader=RUN_READERS[5],
         unfinished=False, pick=0)  # fmt: skip
@example(field="tps", value=0, depth=100_000, reader=RUN_READERS[3], unfinished=False, pick=1)
def damaged_samples(
    fuzz: Fuzz,
    field: str,
    value: Any,
    depth: int | None,
    reader: list[str],
    unfinished: bool,
    pick: int,
) -> None:
    """A sample whose figure is text, NaN, infinite or beyond 64 bits (or any float), or
    nested too deep for json: each reader refuses it in one line (exit 3) or leaves it
    out with one (the index), before anything of the run is rewritten."""
    sb, places = _case(fuzz)
    run = _run_of(reader, places)
    if unfinished:
        _unfinished(run)
    samples = sorted((run / "samples").glob("*.json"))
    file = samples[pick % len(samples)]
    if depth is not None:
        file.write_text(_nested(depth))
        what = f"{file.name}: nested {depth} deep"
    else:
        doc = json.loads(file.read_text())
        _set(doc, field, value)
        file.write_text(_dumps(doc))
        what = f"{file.name}: {field} := {value!r:.40}"
    before = _kept([run / name for name in OWN])
    o = check_case(fuzz.world, sb, resolve(reader, places), what=what, keep=True)
    _refused_untouched(o, before)
    _done(sb)


# --- the results index ---------------------------------------------------------------


def _index(fuzz: Fuzz, sb: Sandbox, places: Places) -> Path:
    """The sandbox's results database, indexing a copy of the compare run (kbisect's own
    rebuild, run as the user would)."""
    run = places["compare_run"]
    o = check_case(fuzz.world, sb, ["db", "rebuild", run], keep=True)
    assert o.code == 0, o.stderr
    return sb.results / schema.FILE


@settings(settings.get_profile("fuzz"), max_examples=examples(25))
@seed(SEED)
@given(
    column=st.sampled_from(schema.SAMPLE_COLUMNS),
    value=st.sampled_from(CELLS),
    directory=st.integers(0, 6).map(lambda n: n == 0),
    reader=st.sampled_from(INDEX_READERS),
)
@example(column="tps_runs", value="not json", directory=False, reader=["history"])
@example(column="patches", value="{", directory=False, reader=["export", "--query"])
@example(column="boot", value="fast", directory=False, reader=["db", "query"])
@example(column="tps", value="", directory=True, reader=["db", "rebuild"])
@example(column="tps", value="", directory=True, reader=["history"])
def damaged_index(fuzz: Fuzz, column: str, value: Any, directory: bool, reader: list[str]) -> None:
    """One row of the results index with a cell that is not what kbisect writes there
    (or a directory where the index goes): db, export and history read the other rows
    (one warning line) or refuse in one line naming the file and `kbisect db rebuild`."""
    sb, places = _case(fuzz)
    db = _index(fuzz, sb, places)
    if directory:
        for side in ("", "-wal", "-shm"):
            db.with_name(db.name + side).unlink(missing_ok=True)
        (db / "x").mkdir(parents=True)
        what = "kbisect.sqlite: a directory"
    else:
        conn = sqlite3.connect(db)
        try:
            with conn:
                conn.execute(f'UPDATE samples SET "{column}" = ? WHERE rowid = 1', (value,))
        except sqlite3.IntegrityError:  # a NOT NULL column: SQLite keeps it whole
            return _done(sb)
        finally:
            conn.close()
        what = f"samples row 1: {column} := {value!r}"
    o = check_case(fuzz.world, sb, reader, what=what, keep=True)
    if o.code == 3:
        assert "kbisect db rebuild" in o.error_lines()[-1], o.stderr
    if reader == ["db", "query"] and o.code == 0:
        assert int(o.stdout.split()[-2]) >= 5, f"{what}: more than the bad row lost"
    _done(sb)


# --- a bisection's state --------------------------------------------------------------


@settings(settings.get_profile("fuzz"), max_examples=examples(12))
@seed(SEED)
@given(phase=st.one_of(st.sampled_from(PHASES), st.text(max_size=12)), report=st.booleans())
@example(phase="zzz", report=True)  # the audit's case: rewritten, exit 0
@example(phase="done", report=True)
def resumed_bisect_states(fuzz: Fuzz, phase: str, report: bool) -> None:
    """`bisect --resume` of a finished run whose state names a phase it cannot be in is
    exit 3 (damaged), one line; of a finished one, one line, exit 2; neither rewrites the
    state or the summary. Without report.md, a finished run writes its summary and report
    again (the documented recovery) and never its state."""
    if phase in ("endpoints", "bisecting", "recheck"):
        return  # a phase that is resumed: boots, not damage
    sb, places = _case(fuzz)
    run = Path(places["bisect_run"])
    doc = json.loads((run / "state.json").read_text())
    doc["phase"] = phase
    (run / "state.json").write_text(json.dumps(doc))
    if not report:
        (run / "report.md").unlink()
    before = _kept([run / "state.json", run / "summary.json"])
    argv = ["bisect", "--resume", str(run)]
    o = check_case(fuzz.world, sb, argv, what=f"phase {phase!r}", keep=True)
    expected = ({2} if report else {0, 1}) if phase == "done" else {3}
    assert o.code in expected, f"{phase!r}, report.md {report}: exit {o.code}"
    assert _bytes_and_time(run / "state.json") == before[run / "state.json"]
    _refused_untouched(o, before)
    _done(sb)


# --- the rc history -------------------------------------------------------------------

GOOD_TAGS = ["v6.12", "v6.13-rc1", "v6.13-rc2"]


def _rc_tree(fuzz: Fuzz) -> Path:
    """A tree with the version tags of GOOD_TAGS, for `rc next` (read only), made once."""
    tree = fuzz.world.base / "rc-tree"
    if not tree.is_dir():
        tree.mkdir()
        who = ["-c", "user.name=f", "-c", "user.email=f@kbisect.invalid"]
        subprocess.run(["git", "-C", str(tree), "init", "-q"], check=True)
        for tag in GOOD_TAGS:
            subprocess.run(
                ["git", "-C", str(tree), *who, "commit", "-q", "--allow-empty", "-m", tag],
                check=True,
            )
            subprocess.run(["git", "-C", str(tree), "tag", tag], check=True)
    return tree


def _entry(tag: str) -> dict[str, Any]:
    return {"tag": tag, "commit": "0" * 40, "scenario_hash": "ab" * 32, "tps_mean": 1000.0,
            "tps": [990.0, 1000.0, 1010.0], "n": 3}  # fmt: skip


ENTRY_FIELDS = ["tag", "commit", "tps_mean", "tps", "n", "scenario_hash", "recorded"]
ENTRY_VALUES: list[Any] = [math.nan, math.inf, "fast", "", "a\nb", [math.nan], ["x"], 10**400,
                           -1, None, {}, [], True]  # fmt: skip
RC_READERS = [
    ["rc", "next", "--tree", "{tree}", "--history", "{history}"],
    ["rc", "next", "--tree", "{tree}", "--history", "{history}/history.json", "--json"],
    ["history", "--rc-history", "{history}", "--format", "json"],
    ["rc", "repair", "--history", "{history}"],
]


@settings(settings.get_profile("fuzz"), max_examples=examples(25))
@seed(SEED)
@given(
    field=st.one_of(st.none(), st.sampled_from(ENTRY_FIELDS)),
    value=st.sampled_from(ENTRY_VALUES),
    at=st.integers(0, 2),
    reader=st.sampled_from(RC_READERS),
)
@example(field="tps", value=[math.nan], at=1, reader=RC_READERS[0])  # the audit's NaN
@example(field="tps_mean", value=math.nan, at=2, reader=RC_READERS[2])
@example(field="tag", value="a\nb", at=0, reader=RC_READERS[3])
@example(field=None, value="junk", at=1, reader=RC_READERS[1])
def rc_history_entries(
    fuzz: Fuzz, field: str | None, value: Any, at: int, reader: list[str]
) -> None:
    """history.json with one bad entry among good ones (a NaN, text for a number, a tag
    on two lines, not a table): every reader keeps the good entries (rc next sees
    v6.13-rc2 measured; history draws the good tags; repair keeps them and drops only the
    bad one, and the file it writes holds no NaN)."""
    sb, places = _case(fuzz)
    history = places.runs / "rc"
    history.mkdir(parents=True)
    bad: Any = value if field is None else {**_entry("v6.13-rc1"), field: value}
    entries: list[Any] = [_entry("v6.12"), _entry("v6.13-rc2")]
    entries.insert(at, bad)
    (history / "history.json").write_text(_dumps({"version": 1, "entries": entries}))
    argv = [a.format(tree=_rc_tree(fuzz), history=history) for a in reader]
    o = check_case(fuzz.world, sb, argv, what=f"entry {at}: {bad!r:.60}", keep=True)
    assert o.code in (0, 1), f"{o.shell()}: the history was refused: {o.stderr[-300:]}"
    if argv[:2] == ["rc", "next"]:
        assert "v6.13-rc2" not in o.stdout, "a good entry (v6.13-rc2) was lost"
    if argv[0] == "history":
        keys = [p["key"] for p in json.loads(o.stdout)["points"]]
        assert {"v6.12", "v6.13-rc2"} <= set(keys), keys
    if argv[1] == "repair":
        text = (history / "history.json").read_text()
        kept = [e["tag"] for e in json.loads(text, parse_constant=_no_constant)["entries"]]
        assert [t for t in kept if t != "v6.13-rc1"] == ["v6.12", "v6.13-rc2"], kept
    _done(sb)


def _no_constant(name: str) -> Any:
    raise AssertionError(f"{name} written into history.json")


@settings(settings.get_profile("fuzz"), max_examples=examples(12))
@seed(SEED)
@given(value=st.sampled_from(FIGURES), pick=st.integers(0, 5))
@example(value="fast", pick=0)  # the audit's traceback
@example(value=math.nan, pick=1)  # the audit's NaN written into history.json
def rc_record_samples(fuzz: Fuzz, value: Any, pick: int) -> None:
    """`rc record` reads the samples of --result through their schema: a tps that is
    text, NaN, infinite or beyond a float is one line, exit 3, and history.json stays as
    it was (never a NaN in it)."""
    sb, places = _case(fuzz)
    run = Path(places["compare_run"])
    history = Path(places["rc_history"])
    samples = sorted((run / "samples").glob("*.json"))
    file = samples[pick % len(samples)]
    doc = json.loads(file.read_text())
    doc["tps"] = value
    file.write_text(_dumps(doc))
    commit = doc["kernel"]["commit"]
    argv = ["rc", "record", "--history", str(history), "--tag", "v6.13-rc2",
            "--commit", commit, "--result", str(run)]  # fmt: skip
    before = _kept([history / "history.json"])
    o = check_case(fuzz.world, sb, argv, what=f"{file.name}: tps := {value!r:.40}", keep=True)
    json.loads((history / "history.json").read_text(), parse_constant=_no_constant)
    if value is not None and not reading.number(value):
        assert o.code == 3, f"{value!r}: exit {o.code}"
    _refused_untouched(o, before)
    _done(sb)


test_odd_sample_names = collected(odd_sample_names)
test_damaged_samples = collected(damaged_samples)
test_damaged_index = collected(damaged_index)
test_resumed_bisect_states = collected(resumed_bisect_states)
test_rc_history_entries = collected(rc_history_entries)
test_rc_record_samples = collected(rc_record_samples)
