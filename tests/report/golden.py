"""The golden files of tests/report/test_examples.py, and the one way to write them:

    .venv/bin/python -m tests.report.golden

renders every example (docs/examples/) with today's code and writes
tests/data/examples/<run>.txt (its report.txt) and <run>.stdout (what `kbisect report`
prints, the run's folder written RUN); for a compare or bisection also <run>.mbox (its
mail, `--format mbox`: the Date is the summary's `created`, so it never changes); and
diff-<name>.<format> for each `kbisect diff` of DIFFS (the examples' folder written
EXAMPLES). Run it only when a report is meant to change, and read the diff.
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
    "profile-preempt",
    "pg-debian18-patch",
    "pool-fake-vng",
)

MAILS = tuple(r for r in RUNS if r not in ("demo-study", "pg-clock-sweep-2x2"))  # no study
# `kbisect diff` goldens: name, the two sets, the options
DIFFS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("demo-A-demo-preempt-A", ("demo:A", "demo-preempt:A")),
    ("demo-A-demo-B-json", ("demo:A", "demo:B", "--format", "json")),
    ("demo-preempt-A-B-markdown", ("demo-preempt:A", "demo-preempt:B", "--format", "markdown")),
    (
        "drift-bisect-a1dfdbe6aceb-497e2bae621e",
        ("drift-bisect:a1dfdbe6aceb", "drift-bisect:497e2b"),
    ),
    ("demo-A-disturbed-compare-A-force", ("demo:A", "disturbed-compare:A", "--force")),
)
FORMATS = {"json": "json", "markdown": "md"}
# `kbisect export` goldens: an example exported in each format
EXPORTS: tuple[tuple[str, str], ...] = (("demo", "csv"), ("machine-bisect", "json"))


def export_golden(name: str, fmt: str) -> Path:
    return GOLDEN / f"export-{name}.{fmt}"


def render_export(name: str, fmt: str) -> tuple[int, str]:
    """`kbisect export EXAMPLE --format FMT` in-process: its exit code and what it printed,
    the examples' folder written EXAMPLES."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["export", str(EXAMPLES / name), "--format", fmt])
    return code, out.getvalue().replace(str(EXAMPLES), "EXAMPLES")


def diff_golden(name: str, argv: tuple[str, ...]) -> Path:
    fmt = argv[argv.index("--format") + 1] if "--format" in argv else "text"
    return GOLDEN / f"diff-{name}.{FORMATS.get(fmt, 'txt')}"


def render_diff(argv: tuple[str, ...]) -> tuple[int, str]:
    """`kbisect diff` of two examples in-process: its exit code and what it printed. The
    sets are named relative to the checkout, as a user in it would: the text wraps the
    names at 72 columns, so an absolute path would make the output the checkout's."""
    words = [f"docs/examples/{w}" if ":" in w else w for w in argv]
    out = io.StringIO()
    with contextlib.chdir(EXAMPLES.parent.parent), contextlib.redirect_stdout(out):
        code = cli.main(["diff", *words])
    return code, out.getvalue()


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
            if name in MAILS:
                code, out = render(run, "mbox")
                assert code == 0, name
                (GOLDEN / f"{name}.mbox").write_text(out)
    for name, argv in DIFFS:
        code, out = render_diff(argv)
        assert code in (0, 1), name
        diff_golden(name, argv).write_text(out)
        print(diff_golden(name, argv))
    for name, fmt in EXPORTS:
        code, out = render_export(name, fmt)
        assert code == 0, name
        export_golden(name, fmt).write_text(out)
        print(export_golden(name, fmt))


if __name__ == "__main__":
    main()
