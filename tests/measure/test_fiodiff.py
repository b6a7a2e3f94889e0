"""Storage in reports: fio figures compared between sides (fiodiff.py), the storage rows of
the fingerprint diff, and the compare report's Storage section and warning."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import fio
from kbisect.commands import cli
from kbisect.compare import markdown
from kbisect.measure import fingerprint, fiodiff
from tests.compare.test_report import make_run

DATA = Path(__file__).parents[1] / "data" / "fio"


def storage(scale_sync: float = 1.0, scale_iops: float = 1.0, **extra: Any) -> dict[str, Any]:
    """A fingerprint's storage from real fio output, its latencies and IOPS scaled."""
    figures = fio.figures(json.loads((DATA / "ext4-host.json").read_text()))
    figures["wal"]["sync_p50_us"] *= scale_sync
    for job in ("randread", "randwrite"):
        figures[job]["iops"] *= scale_iops
    return {
        "kind": "disk",
        "fs": "ext4",
        "device": "/dev/vda",
        "mount_options": "rw,relatime",
        "backing": "file",
        "size_gb": 4,
        "cache": "none",
        "fio": figures,
        **extra,
    }


def fps(*scales: float, **extra: Any) -> list[Mapping[str, Any]]:
    return [{"storage": storage(s, s, **extra)} for s in scales]


def test_same_disk_within_noise_is_not_flagged():
    table = fiodiff.rows({"A": fps(1.0, 1.1, 0.95), "B": fps(1.05, 0.9, 1.2)})
    assert len(table) == len(fiodiff.FIGURES)
    assert not any(r.beyond_noise for r in table)
    assert fiodiff.warnings(table, {"A": "A", "B": "B"}) == []


def test_a_throttled_side_is_flagged_with_its_medians():
    table = fiodiff.rows({"A": fps(1.0, 1.0, 1.0), "B": fps(0.2, 0.25, 0.3)})
    sync = next(r for r in table if r.label == "fdatasync p50")
    base = storage()["fio"]["wal"]["sync_p50_us"]
    assert sync.medians["A"] == pytest.approx(base) and sync.medians["B"] == pytest.approx(
        0.25 * base
    )
    assert sync.ratio == pytest.approx(0.25) and sync.beyond_noise
    [line] = fiodiff.warnings(table, {"A": "A", "B": "B"})
    assert line.startswith("storage differs between the sides beyond 25%: fdatasync p50 A ")
    assert "8 KiB random read IOPS" in line and "(B/A 0.25x)" in line
    p99 = next(r for r in table if r.label == "fdatasync p99")
    assert p99.ratio == pytest.approx(1.0) and not p99.beyond_noise  # not scaled


def test_boots_without_fio_are_skipped_and_none_at_all_gives_no_table():
    assert (
        fiodiff.rows({"A": [{}, None, {"storage": {"kind": "tmpfs", "fio": None}}], "B": [{}]})
        == []
    )
    table = fiodiff.rows({"A": [*fps(1.0), {}], "B": []})
    assert table[0].counts == {"A": 1, "B": 0} and table[0].ratio is None
    assert "No fio preflight" in fiodiff.markdown([], {"A": "a", "B": "b"})[0]


def test_markdown_table_has_a_row_per_figure_and_flags():
    table = fiodiff.rows({"A": fps(1.0), "B": fps(3.0)})
    lines = fiodiff.markdown(table, {"A": "base", "B": "slow"})
    assert lines[0] == "| fio (median of boots) | A: base | B: slow | B/A |"
    assert sum(ln.startswith("| ") for ln in lines[2:]) == len(fiodiff.FIGURES)
    assert any(ln.startswith("| ⚠ fdatasync p50 |") and "3.00x" in ln for ln in lines)


def test_fingerprint_diff_has_storage_rows_only_when_fingerprints_carry_storage():
    plain = {r.field for r in fingerprint.diff({"A": [{"uname_r": "x"}], "B": [{"uname_r": "x"}]})}
    assert not any(f.startswith("storage.") for f in plain)
    sides: dict[str, list[Mapping[str, Any]]] = {
        "A": list(fps(1.0)),
        "B": list(fps(1.0, throttle_iops=100)),
    }
    rows = fingerprint.diff(sides)
    by = {r.field: r for r in rows}
    assert by["storage.fs"].values == {"A": ("ext4",), "B": ("ext4",)}
    assert not by["storage.fs"].differs and by["storage.throttle_iops"].differs
    assert "storage.fio" not in by  # the figures vary per boot: fiodiff compares them


def _with_storage(run: Path, scale_b: float) -> None:
    for path in sorted((run / "samples").glob("*.json")):
        sample = json.loads(path.read_text())
        if sample["fingerprint"]:
            scale = scale_b if sample["label"] == "B" else 1.0
            sample["fingerprint"]["storage"] = copy.deepcopy(storage(scale, scale))
            path.write_text(json.dumps(sample))


@pytest.fixture(autouse=True)
def only_report(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", [c for c in cli.COMMANDS if c[0] == "report"])


def test_report_shows_storage_and_warns_for_a_slow_side(tmp_path: Path):
    run = make_run(tmp_path)
    _with_storage(run, 0.2)
    text = markdown.render(run)[0].read_text()
    warnings = text.split("## Warnings")[1].split("## Fingerprints")[0]
    assert "storage differs between the sides beyond 25%" in warnings
    section = text.split("## Storage")[1].split("## Boots")[0]
    assert "| ⚠ fdatasync p50 |" in section and "0.20x" in section


def test_report_of_a_run_without_fio_says_so(tmp_path: Path):
    text = markdown.render(make_run(tmp_path))[0].read_text()
    assert "No fio preflight in these boots" in text.split("## Storage")[1]
    assert "storage differs" not in text
