"""The golden files of tests/report/test_examples.py, and the one way to write them:

    .venv/bin/python -m tests.report.golden

renders every example (docs/examples/) with today's code and writes
tests/data/examples/<run>.txt (its report.txt) and <run>.stdout (what `kbisect report`
prints, the run's folder written RUN). Run it only when a report is meant to change,
and read the diff.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from kbisect.commands import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
GOLDEN = ROOT / "tests" / "data" / "examples"
TEXT = "report.txt"
RUNS = (
    "demo",
    "demo-preempt",
    "demo-study",
    "disturbed-compare",
    "demo-bisect",
    "demo-bisect-posterior",
    "drift-bisect",
    "machine-bisect",
    "contention-6.12",
    "founding",
    "pg-clock-sweep-2x2",
)


def copy(name: str, into: Path, *, drop: Iterable[str] = ()) -> Path:
    """The example copied into `into`, without the files matching `drop` (globs)."""
    run = Path(shutil.copytree(EXAMPLES / name, into / name))
    for pattern in drop:
        for path in run.glob(pattern):
            path.unlink()
    return run


def render(run: Path, fmt: str) -> tuple[int, str]:
    """`kbisect report RUN --format FMT` in-process: its exit code and what it printed,
    the run's folder written RUN."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["report", str(run), "--format", fmt])
    return code, out.getvalue().replace(str(run), "RUN")


def main() -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in RUNS:
            run = copy(name, Path(tmp))
            code, out = render(run, "markdown")
            assert code == 0, name
            (GOLDEN / f"{name}.stdout").write_text(out)
            code, out = render(run, "text")
            assert code == 0, name
            (GOLDEN / f"{name}.txt").write_text(out)
            print(GOLDEN / f"{name}.txt")


if __name__ == "__main__":
    main()
