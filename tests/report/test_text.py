"""`kbisect report --format text`: mailing-list texts of compare and bisect runs (width,
order, content), and the committed examples (docs/examples/) in every format."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.report import text as textreport
from kbisect.stats import ratio
from tests.compare.test_report import make_run, ok_tps

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def text_of(run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["report", str(run), "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert out == (run / textreport.TEXT).read_text()
    assert max(len(line) for line in out.splitlines()) <= textreport.WIDTH
    return out


def test_compare_text_puts_the_finding_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = text_of(make_run(tmp_path), capsys)
    v = ratio.verdict(ok_tps("A"), ok_tps("B"))
    change = f"{(v.ratio.ratio - 1) * 100:+.1f}%"
    assert " ".join(out.split()).startswith(
        "kbisect compared B (preempt=full) with A (preempt=none) in pgbench tps (smoke): a "
        f"regression (B/A = {v.ratio.ratio:.3f}x"
    )
    assert f"B/A {v.ratio.ratio:.3f}x ({change}), 95% CI [{v.ratio.low:.3f}, " in out
    assert f"{v.a.n} boots (0 failed)" in out and f"{v.b.n} boots (2 failed)" in out
    order = [
        "kernels:",
        "reproduce:",
        "fingerprint differences",
        "machine:",
        "scenario:",
        "tps per boot",
    ]
    assert [out.index(x) for x in order] == sorted(out.index(x) for x in order)
    assert "kbisect compare --kernel /k/bzImage --append-a preempt=none \\" in out
    assert "  preempt:\n    A: none\n    B: full" in out
    assert "accelerator kvm" in out and "memory: 1966 MB, NUMA nodes unknown" in out
    assert "15.14" in out and "build:\n  (no build manifest" in out


def test_text_wraps_long_tokens_at_the_width() -> None:
    long = "x" * 100
    text = textreport.fit(["short", f"  {long}", *textreport.command(f"kbisect run --out {long}")])
    assert max(map(len, text.splitlines())) <= textreport.WIDTH
    assert text.replace("\n", "").count("x") == 200


def copy(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLES / name, tmp_path / name))


def test_the_bisect_example_renders_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy("demo-bisect", tmp_path)
    assert cli.main(["report", str(run)]) == 0
    assert (run / "report.md").read_text() == (EXAMPLES / "demo-bisect" / "report.md").read_text()
    capsys.readouterr()
    out = text_of(run, capsys)
    assert out.splitlines()[0].startswith("kbisect bisected a change in pgbench tps")
    flat = " ".join(out.split())
    assert 'commit d59fc21905a7 ("net/unix: [kbisect demo] SYNTHETIC REGRESSION' in flat
    assert "0.567x (-43.3%), 95% CI [0.412, 0.782], 8 + 8 boots: regression, confirmed" in flat
    assert "the bisect store with the samples is not with this report" in flat


@pytest.mark.parametrize(
    ("name", "figure"),
    [
        ("demo", ("1.991x", "[1.688, 2.347]")),
        ("demo-study", ("0.500x (-50.0%), 95% CI [0.459, 0.545]",)),
        ("disturbed-compare", ("2.117x", "[1.624, 2.760]")),
        ("drift-bisect", ("d59fc21905a7", "0.527", "98.3% CI [0.366, 0.759]")),
        ("demo-preempt", ("1.028x", "[0.920, 1.148]")),
        ("machine-bisect", ("d59fc21905a7", "0.487", "98.3% CI [0.260, 0.912]")),
        ("demo-bisect-posterior", ("d59fc21905a7", "0.578", "98.3% CI [0.445, 0.750]")),
    ],
)
def test_the_examples_with_samples_render_again_in_both_formats(
    name: str, figure: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy(name, tmp_path)
    for leftover in ("report.md", "report.txt"):
        (run / leftover).unlink(missing_ok=True)
    assert cli.main(["report", str(run)]) == 0
    markdown = (run / "report.md").read_text()
    capsys.readouterr()
    text = text_of(run, capsys)
    for out in (markdown, text):
        assert all(f in " ".join(out.split()) for f in figure), (name, out[:2000])
    assert max(map(len, text.splitlines())) <= textreport.WIDTH
    if name.endswith("bisect") or name == "demo-bisect-posterior":  # the store came along
        assert "is not with this report" not in text and "no samples with" not in text
    if name == "disturbed-compare":
        assert "## Disturbed samples" in markdown
        assert markdown.count("retaken (kept on disk, not counted)") == 2


@pytest.mark.parametrize("fmt", ["markdown", "text"])
def test_an_example_without_its_samples_fails_with_one_clear_line(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy("demo", tmp_path)
    shutil.rmtree(run / "samples")  # as a report committed without them once was
    assert cli.main(["report", str(run), "--format", fmt]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "lists 10 sample files and none is here" in err and "re-run the command" in err
