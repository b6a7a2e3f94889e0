"""Every committed bisect example (docs/examples/) re-renders to exactly what is committed:
report.md and its plots byte for byte, and the mailing-list text to the file generated from
the code before the report pipeline was rebuilt (tests/data/examples/NAME.txt)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbisect.commands import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
EXPECTED = ROOT / "tests" / "data" / "examples"
BISECTS = ("demo-bisect", "demo-bisect-posterior", "drift-bisect", "machine-bisect")
RENDERED = ("report.md", "bisect.png", "posterior.png", "tps-time.png", "git-bisect.log")


@pytest.mark.parametrize("name", BISECTS)
def test_a_bisect_example_renders_to_its_committed_report(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(shutil.copytree(EXAMPLES / name, tmp_path / name))
    for f in RENDERED:
        (run / f).unlink(missing_ok=True)
    assert cli.main(["report", str(run)]) == 0
    for f in RENDERED:
        committed = EXAMPLES / name / f
        assert (run / f).exists() == committed.exists(), f
        if committed.exists():
            assert (run / f).read_bytes() == committed.read_bytes(), f
    capsys.readouterr()
    assert cli.main(["report", str(run), "--format", "text"]) == 0
    expected = (EXPECTED / f"{name}.txt").read_text()
    assert capsys.readouterr().out == expected
    assert (run / "report.txt").read_text() == expected
