from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from kbisect.bisect.report import files as bisect_files
from kbisect.commands import cli
from kbisect.compare import markdown
from kbisect.compare import report as compare_report
from kbisect.core.exceptions import EXIT_INFRA
from kbisect.measure import results
from kbisect.report import plots
from kbisect.stats import means, ratio

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
COMMAND = "kbisect compare --kernel /k/bzImage --append-a preempt=none --append-b preempt=full --scenario smoke --boots 4"  # noqa: E501
SCEN = {"name": "smoke", "hash": "5c0ffee" * 9 + "0"}
# Boot order (ABBA) with each boot's tps; None is a failed boot.
PLAN: list[tuple[str, float | None, str]] = [
    ("A", 1000.0, "ok"),
    ("B", 512.0, "ok"),
    ("B", 505.0, "ok"),
    ("A", 1012.0, "ok"),
    ("A", 994.0, "ok"),
    ("B", None, "boot-failed"),
    ("B", 519.0, "ok"),
    ("A", 1006.0, "ok"),
    ("B", None, "benchmark-failed"),
]

ERRORS = {
    "boot-failed": "kernel panic or oops: Kernel panic - not syncing: VFS (log: /r/console.log)",
    "benchmark-failed": "pgbench exited 1: connection to server lost (log: /r/console.log)",
}


def fingerprint(preempt: str, **over: Any) -> dict[str, Any]:
    fp: dict[str, Any] = {
        "uname_r": "6.12.48-kbisect",
        "cmdline": f"console=ttyS0 preempt={preempt}",
        "preempt": preempt,
        "hugepages_total": 0,
        "hugepages_free": 0,
        "hugepage_size_kb": 2048,
        "huge_pages_used": False,
        "thp": "madvise",
        "nproc": 2,
        "mem_total_kb": 2013184,
        "clocksource": "tsc",
        "pg_version": "15.14",
        "pg_settings": {"shared_buffers": "128MB", "huge_pages": "try", "max_connections": "20"},
    }
    fp.update(over)
    return fp


def runs(tps: float, rng: random.Random) -> list[dict[str, Any]]:
    """A 5 s warm-up and a 20 s measured run whose per-second series averages to tps."""
    out = []
    for index, (warm, secs) in enumerate(((True, 5), (False, 20))):
        base = tps * (0.8 if warm else 1.0)
        raw = [base * (1 + rng.uniform(-0.05, 0.05)) for _ in range(secs)]
        shift = base - sum(raw) / secs
        out.append(
            {
                "index": index,
                "warmup": warm,
                "tps": base,
                "latency_avg_ms": 1.9,
                "latency_stddev_ms": 0.4,
                "failed_transactions": 0,
                "series": [x + shift for x in raw],
            }
        )
    return out


def sample(
    label: str, tps: float | None, status: str, accel: str, rng: random.Random, fp: dict[str, Any]
) -> dict[str, Any]:
    preempt = "none" if label == "A" else "full"
    ok = status == "ok"
    return {
        "version": 1,
        "kind": "sample",
        "created": "2026-11-22T04:00:00Z",
        "command": f"kbisect run --kernel /k/bzImage --scenario smoke --append preempt={preempt}",
        "label": label,
        "scenario": {**SCEN, "settings": {}},
        "kernel": {
            "image": "/k/bzImage",
            "release": "6.12.48-kbisect",
            "commit": "ab" * 20,
            "config_hash": "cd" * 32,
            "manifest": None,
        },
        "append": f"preempt={preempt}",
        "accel": accel,
        "status": status,
        "error": None if ok else ERRORS[status],
        "tps": tps,
        "runs": runs(tps, rng) if tps else [],
        "fingerprint": fp if status != "boot-failed" else None,
        "timings": {
            "boot_s": 2.5 + rng.uniform(0, 1),
            "restore_s": 1.0,
            "init_s": 0.5,
            "bench_s": 25.0,
            "total_s": 31.0,
        },
    }


def make_run(root: Path, *, accel: str = "kvm", accel_b: str = "", vary: bool = False) -> Path:
    """A compare run dir as compare.py writes it: samples/NNN-X.json and summary.json."""
    run = root / "compare-smoke"
    rng = random.Random(7)
    for i, (label, tps, status) in enumerate(PLAN, 1):
        fp = fingerprint("none" if label == "A" else "full")
        if vary and label == "A":
            fp["hugepages_free"] = i
        s = sample(label, tps, status, accel_b if label == "B" and accel_b else accel, rng, fp)
        results.validate(s, "sample")
        (run / "samples").mkdir(parents=True, exist_ok=True)
        (run / "samples" / f"{i:03d}-{label}.json").write_text(json.dumps(s))
    a, b = ok_tps("A"), ok_tps("B")
    v = ratio.verdict(a, b, min_effect=0.02)
    side: dict[str, Any] = {
        "kernel": {
            "commit": "ab" * 20,
            "describe": "v6.12.48",
            "subject": "Linux 6.12.48",
            "image": "/k/bzImage",
        },
        "overrides": [],
        "scenario_hash": SCEN["hash"],
    }
    summary = {
        "version": 1,
        "kind": "compare",
        "created": "2026-11-22T04:10:00Z",
        "command": COMMAND,
        "scenario": SCEN,
        "sides": {
            s: {
                **side,
                "label": f"preempt={p}",
                "append": f"preempt={p}",
                "samples": [
                    f"samples/{i:03d}-{s}.json" for i, (x, _, _) in enumerate(PLAN, 1) if x == s
                ],
            }
            for s, p in (("A", "none"), ("B", "full"))
        },
        "order": [p[0] for p in PLAN],
        "failed": {"A": 0, "B": 2},
        "stats": {"A": v.a.as_dict(), "B": v.b.as_dict()},
        "verdict": {**v.as_dict(), "result": v.kind},
        "min_effect": 0.02,
        "confidence": 0.95,
        "duration_s": 600.0,
    }
    results.validate(summary, "summary")
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def ok_tps(label: str) -> list[float]:
    return [t for s, t, st in PLAN if s == label and st == "ok" and t is not None]


@pytest.fixture(autouse=True)
def only_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """cli.main with only the report subcommand: other modules' parsers are not under test."""
    monkeypatch.setattr(cli, "COMMANDS", [c for c in cli.COMMANDS if c[0] == "report"])


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One rendered run for the tests that only read it (rendering takes ~0.4 s)."""
    run = make_run(tmp_path_factory.mktemp("shared"))
    path = markdown.render(run)[0]
    assert path == run / "report.md"
    return run, path.read_text()


@pytest.fixture
def rendered(shared: tuple[Path, str]) -> str:
    return shared[1]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return make_run(tmp_path)


def test_reproduce_command_and_verdict_line(rendered: str) -> None:
    v = ratio.verdict(ok_tps("A"), ok_tps("B"), min_effect=0.02)
    assert v.kind == "regression"
    assert f"Reproduce:\n\n```sh\n{COMMAND}\n```" in rendered
    r = v.ratio
    assert compare_report.verdict_line({"command": COMMAND}, v) in rendered
    head = f"# smoke: a regression (B/A = {r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}])\n"
    assert rendered.startswith(head)


def test_sections_in_order(rendered: str) -> None:
    marks = [
        "# smoke: a regression",
        "Reproduce:",
        "smoke, B (preempt=full) vs A",
        "## Sides",
        "## Warnings",
        "## Fingerprints",
        "## Boots",
        "## Plots",
        "## Scenario",
    ]
    where = [rendered.index(m) for m in marks]
    assert where == sorted(where)


def test_failed_boots_listed_and_excluded(rendered: str) -> None:
    b = means.summarize(ok_tps("B"))
    row = next(line for line in rendered.splitlines() if line.startswith("| B | preempt=full"))
    assert f"| 3 / 2 | {b.mean:,.1f} |" in row
    boots = rendered.split("## Boots")[1]
    assert "| 6 | B | — | **boot-failed** |" in boots
    assert "| 9 | B | — | **benchmark-failed** |" in boots
    assert ERRORS["boot-failed"] in boots and ERRORS["benchmark-failed"] in boots
    assert "side B: 2 failed boot(s)" in rendered


def test_preempt_difference_highlighted(rendered: str) -> None:
    section = rendered.split("## Fingerprints")[1].split("## Boots")[0]
    assert "Differences between the sides: **cmdline**, **preempt**." in section
    assert "| ⚠ **preempt** | **none** | **full** |" in section
    assert "| thp | madvise | madvise |" in section
    assert "| pg_settings.shared_buffers | 128MB | 128MB |" in section
    assert "Varies across boots within a side: none." in section


def test_variation_within_a_side_is_noted(tmp_path: Path) -> None:
    text = markdown.render(make_run(tmp_path, vary=True))[0].read_text()
    assert "hugepages_free (A)" in text
    assert "| ⚠ **hugepages_free** | **1 / 4 / 5 / 8** ⚠ varies across boots | **0** |" in text


def test_plots_are_png_and_linked(shared: tuple[Path, str]) -> None:
    run, rendered = shared
    for name in (plots.PER_BOOT, plots.SERIES):
        data = (run / name).read_bytes()
        assert data.startswith(PNG_MAGIC)
        assert len(data) > 10_000
        assert f"]({name})" in rendered


def test_plots_are_deterministic(shared: tuple[Path, str], tmp_path: Path) -> None:
    run = make_run(tmp_path)
    markdown.render(run)
    for name in (plots.PER_BOOT, plots.SERIES, markdown.REPORT):
        assert (run / name).read_bytes() == (shared[0] / name).read_bytes()


def test_tcg_note_only_under_tcg(tmp_path: Path, rendered: str) -> None:
    assert "TCG" not in rendered
    text = markdown.render(make_run(tmp_path / "t", accel="tcg"))[0].read_text()
    assert markdown.TCG_NOTE in text
    assert "ran on: vng/tcg." in text


def test_mixed_accelerators_warned(tmp_path: Path) -> None:
    text = markdown.render(make_run(tmp_path, accel_b="tcg"))[0].read_text()
    warnings = text.split("## Warnings")[1].split("##")[0]
    assert "different targets or accelerators (A: vng/kvm; B: vng/tcg)" in warnings
    assert "ran on: vng/kvm, vng/tcg." in text and markdown.TCG_NOTE in text


def test_summary_without_side_b(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = json.loads((run / "summary.json").read_text())
    del summary["sides"]["B"]
    (run / "summary.json").write_text(json.dumps(summary))
    assert cli.main(["report", str(run)]) == 2
    assert capsys.readouterr().err.endswith("a compare without side B\n")


def test_min_effect_override(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(run), "--min-effect", "0.6"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == str(run / "report.md")
    assert out[1].startswith("no significant change (B/A = ")
    text = (run / "report.md").read_text()
    assert "--min-effect 0.6 given to `kbisect report`" in text
    assert "summary.json says 'regression'" in text


def test_tps_along_path(tmp_path: Path) -> None:
    points = [
        ("0 good", [1000.0, 990.0], "good"),
        ("1 mid", [510.0, 505.0, 500.0], "bad"),
        ("2 skip", [], "skip"),
        ("3 bad", [500.0, 498.0], "bad"),
    ]
    path = plots.tps_along_path(points, tmp_path / "path.png", threshold=750.0)
    assert path.read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("content", [None, '{"version": 1}', '{"kind": "odd"}'])
def test_bad_dirs_exit_2_with_one_line(
    tmp_path: Path, content: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "run"
    d.mkdir()
    if content is not None:
        (d / "summary.json").write_text(content)
    assert cli.main(["report", str(d)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"kbisect: {d}")


@pytest.mark.parametrize("content", [b"{not json", b'{"kind": "compare", "ver', b"\xff{}", None])
def test_a_summary_that_cannot_be_read_back_exits_3_saying_how_to_recover(
    tmp_path: Path, content: bytes | None, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "run"
    (d / "summary.json").mkdir(parents=True)
    if content is not None:
        (d / "summary.json").rmdir()
        (d / "summary.json").write_bytes(content)
    assert cli.main(["report", str(d)]) == EXIT_INFRA
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"kbisect: {d}/summary.json: ")
    assert err.endswith(
        "; remove it and report.md, and run the command with --resume: it is "
        "written again from the run's samples\n"
    )


def test_missing_dir_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"kbisect: {tmp_path / 'nope'}: no such directory\n"


def test_bisect_dispatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    example = Path(__file__).resolve().parents[2] / "docs/examples/demo-bisect/summary.json"
    (tmp_path / "summary.json").write_bytes(example.read_bytes())
    monkeypatch.setattr(bisect_files, "rerender", lambda d: d / "report.md")
    assert cli.main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == str(tmp_path / "report.md")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-5", "1", "x"])
def test_absurd_min_effect_exits_2_in_one_line(
    run: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """nan used to turn a 0.5x regression into "no significant difference"."""
    assert cli.main(["report", str(run), f"--min-effect={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--min-effect" in err
    assert not (run / "report.md").exists()


def test_a_copied_sample_is_left_out_with_a_warning(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = sorted((run / "samples").glob("*-A.json"))[0]
    copy = run / "samples" / "099-A.json"
    copy.write_bytes(first.read_bytes())
    assert cli.main(["report", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"099-A.json repeats the boot of {first.name}: left out" in err
    assert f"099-A.json repeats the boot of {first.name}" in (run / "report.md").read_text()
    counted = compare_report.load(run, compare_report.load_summary(run), None)
    assert counted.verdict.a.n == len(ok_tps("A"))  # the copy is not counted
