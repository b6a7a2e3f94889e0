"""The committed examples (docs/examples/) re-render unchanged, in both formats.

Each run is copied and its reports and plots are deleted; `kbisect report` in-process must
then write report.md and every PNG byte for byte as committed (and, for a posterior
bisection, git-bisect.log; for a study, report.txt and summary.json but its `created`),
and report.txt as the golden file tests/data/examples/<run>.txt. What `kbisect report`
prints is golden too (tests/data/examples/<run>.stdout, the run's folder written RUN).
The goldens are written by `python -m tests.report.golden`, never by this test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbisect.bisect import state
from kbisect.measure import results
from tests.report.golden import EXAMPLES, GOLDEN, RUNS, TEXT, copy, render

GENERATED = ("report.md", TEXT, "git-bisect.log", "*.png")


def files(run: Path) -> dict[str, Path]:
    return {str(p.relative_to(run)): p for p in sorted(run.rglob("*")) if p.is_file()}


def same(name: str, path: Path, committed: Path) -> bool:
    """The file as committed; a study's summary.json but for its `created` (the render
    stamps it)."""
    if name == results.SUMMARY:
        new, old = (json.loads(p.read_text()) for p in (path, committed))
        return bool({**new, "created": None} == {**old, "created": None})
    return path.read_bytes() == committed.read_bytes()


def unchanged(run: Path, committed: Path, *, but: tuple[str, ...] = ()) -> None:
    """Every file of the run as committed, and no other file, but those named."""
    got, want = files(run), files(committed)
    assert sorted(set(got) - set(but)) == sorted(set(want) - set(but))
    changed = [n for n in want if n not in but and not same(n, got[n], want[n])]
    assert changed == []


@pytest.mark.parametrize("name", RUNS)
def test_the_markdown_report_renders_as_committed(name: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = copy(name, tmp_path, drop=GENERATED)
    code, out = render(run, "markdown")
    assert code == 0
    assert out == (GOLDEN / f"{name}.stdout").read_text()
    assert (run / "report.md").read_bytes() == (EXAMPLES / name / "report.md").read_bytes()
    assert list(run.glob("*.png"))  # every example has plots: they were drawn again
    # the PNGs, git-bisect.log, a study's summary.json and report.txt: all as committed
    unchanged(run, EXAMPLES / name)


@pytest.mark.parametrize("name", RUNS)
def test_the_text_report_renders_as_the_golden_file(name: str, tmp_path: Path) -> None:
    run = copy(name, tmp_path, drop=(TEXT,))
    code, out = render(run, "text")
    assert code == 0
    golden = (GOLDEN / f"{name}.txt").read_text()
    assert out == golden
    assert (run / TEXT).read_text() == golden
    if (EXAMPLES / name / TEXT).is_file():  # a study commits its own
        assert (EXAMPLES / name / TEXT).read_text() == golden
    unchanged(run, EXAMPLES / name, but=(TEXT,))


@pytest.mark.parametrize("name", RUNS)
def test_the_stored_files_still_load(name: str) -> None:
    run = EXAMPLES / name
    assert results.load_summary(run)["kind"] in ("compare", "bisect", "bisect-summary", "study")
    if (run / state.STATE_FILE).is_file():
        saved = json.loads((run / state.STATE_FILE).read_text())
        assert {**state.load(run).as_dict(), "kind": state.STATE_KIND} == saved
