"""The results store and the JSON schemas (checked by jsonschema)."""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

import jsonschema
import pytest

from kbisect.core import clock
from kbisect.core.exceptions import EXIT_INFRA, EXIT_USER
from kbisect.measure import results
from kbisect.measure.record import Sample
from kbisect.measure.results import InvalidResult, NoResults
from tests.core.test_atomic import fsync_spy, ident

SHA = "a" * 64


def sample(label: str | None = "A", tps: float = 512.3) -> dict[str, Any]:
    return {
        "version": 1,
        "kind": "sample",
        "created": "2026-11-22T04:00:00Z",
        "command": "kbisect compare v6.12 v6.12 --scenario smoke",
        "label": label,
        "scenario": {"name": "smoke", "hash": SHA, "settings": {"pgbench": {"clients": 4}}},
        "kernel": {
            "image": "/cache/builds/x/bzImage",
            "release": "6.12.0",
            "commit": "7dadeaa6e851",
            "config_hash": SHA,
            "manifest": None,
        },
        "append": "preempt=full",
        "accel": "tcg",
        "status": "ok",
        "error": None,
        "tps": tps,
        "runs": [
            {
                "index": 0,
                "warmup": False,
                "tps": tps,
                "latency_avg_ms": 0.8,
                "latency_stddev_ms": 1.0,
                "failed_transactions": 0,
                "series": [500.0, 520.5],
            }
        ],
        "fingerprint": {
            "uname_r": "6.12.0",
            "cmdline": "console=ttyS0 preempt=full",
            "preempt": "full",
            "hugepages_total": 0,
            "hugepages_free": 0,
            "hugepage_size_kb": 2048,
            "thp": "madvise",
            "nproc": 2,
            "mem_total_kb": 1000000,
            "clocksource": "tsc",
            "pg_version": "15.18",
            "pg_settings": {"huge_pages": "off"},
            "huge_pages_used": None,
        },
        "timings": {
            "boot_s": 9.5,
            "restore_s": 1.2,
            "init_s": None,
            "bench_s": 10.0,
            "total_s": 25,
        },
    }


def failed(status: str = "benchmark-failed") -> dict[str, Any]:
    s = sample()
    s.update(status=status, error="pgbench run 0 exited 2: ERROR: boom", tps=None, runs=[])
    return s


def summary() -> dict[str, Any]:
    return {
        "version": 1,
        "kind": "compare",
        "created": "2026-11-22T04:00:00Z",
        "command": "kbisect compare a b",
        "scenario": {"name": "smoke", "hash": SHA},
        "sides": {"A": {"samples": ["samples/001-A.json"]}, "B": {"samples": []}},
        "stats": {"ratio": 0.51},
        "verdict": {"kind": "regression", "ratio": {"ratio": 0.51}, "warnings": []},
    }


def mutate(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node: Any = out
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return out


BAD_SAMPLES = [
    ("tps", "512", "$.tps: must be number or null"),
    ("tps", None, "$.tps: must be number"),  # status ok without a figure
    ("runs.0.tps", 0, "$.runs[0].tps: must be > 0"),
    ("runs.0.warmup", 1, "$.runs[0].warmup: must be boolean"),
    ("runs.0.index", True, "$.runs[0].index: must be integer"),
    ("fingerprint.preempt", KeyError, "$.fingerprint.preempt: is missing"),
    ("scenario.hash", "abc", "$.scenario.hash: must match"),
    ("accel", "hvf", '$.accel: must be one of "kvm", "tcg"'),
    ("version", 3, "$.version: must be one of 1, 2, got 3"),
    ("label", "A/B", "$.label: must match"),
    ("timings.boot_s", -1, "$.timings.boot_s: must be >= 0"),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD_SAMPLES)
def test_bad_sample_names_the_field(path, value, message):
    with pytest.raises(InvalidResult) as info:
        results.validate(mutate(sample(), path, value), "sample")
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == EXIT_INFRA


def test_failed_sample_never_carries_a_figure():
    results.validate(failed(), "sample")
    results.validate(failed("boot-failed") | {"fingerprint": None}, "sample")
    with pytest.raises(InvalidResult, match=r"\$\.tps: must be null"):
        results.validate(failed() | {"tps": 100.0}, "sample")
    with pytest.raises(InvalidResult, match=r"\$\.error: must be string"):
        results.validate(failed() | {"error": None}, "sample")


def test_shipped_schemas_are_valid_draft_2020_12():
    for name in ("sample", "summary", "bisect-summary"):
        sch = results.schema(name)
        assert sch["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        jsonschema.Draft202012Validator.check_schema(sch)


def test_a_number_is_finite():
    """NaN and Infinity, which Python's json reads, are no JSON numbers."""
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(InvalidResult, match="must be a finite number"):
            results.validate(mutate(sample(), "runs.0.tps", value), "sample")


def test_new_run_dir_is_unique_and_named(isolated_env, tmp_path):
    first = results.new_run_dir("compare", "smoke run/1")
    second = results.new_run_dir("compare", "smoke run/1")
    assert first != second
    assert first.parent == tmp_path / "results"  # conftest points KBISECT_RESULTS here
    assert re.fullmatch(r"\d{8}T\d{6}Z-compare-smoke-run-1", first.name)
    assert (first / "samples").is_dir()


def test_write_and_load_samples_in_order(tmp_path):
    run = tmp_path / "run"
    a = results.write_sample(run, Sample(sample("A", 100.0)))
    b = results.write_sample(run, Sample(sample("B", 200.0)))
    c = results.write_sample(run, Sample(sample(None, 300.0)))
    assert [p.name for p in (a, b, c)] == ["001-A.json", "002-B.json", "003-sample.json"]
    assert [s.tps for s in results.load_samples(run)] == [100.0, 200.0, 300.0]
    assert not [p for p in (run / "samples").iterdir() if p.name.startswith(".")]


def test_write_sample_never_overwrites(tmp_path):
    run = tmp_path / "run"
    (run / "samples").mkdir(parents=True)
    other = run / "samples" / "009-A.json"
    other.write_text("not mine")
    path = results.write_sample(run, Sample(sample()))
    assert path.name == "010-A.json"
    assert other.read_text() == "not mine"


def test_invalid_sample_is_not_written(tmp_path):
    with pytest.raises(InvalidResult):
        results.write_sample(tmp_path / "run", Sample(sample() | {"tps": None}))
    assert list((tmp_path / "run").glob("samples/*")) == []


def test_load_samples_reports_the_bad_file(tmp_path):
    run = tmp_path / "run"
    path = results.write_sample(run, Sample(sample()))
    path.write_text(json.dumps(sample() | {"status": "great"}))
    with pytest.raises(InvalidResult, match=r"001-A\.json: not a valid sample: \$\.status"):
        results.load_samples(run)
    path.write_text("{")
    with pytest.raises(InvalidResult, match=r"truncated or not JSON .*; move it out"):
        results.load_samples(run)


def test_missing_run_dir_is_a_user_error(tmp_path):
    with pytest.raises(NoResults) as info:
        results.load_samples(tmp_path / "nope")
    assert info.value.exit_code == EXIT_USER
    with pytest.raises(NoResults, match="no summary"):
        results.load_summary(tmp_path)


def test_summary_roundtrip_and_validation(tmp_path):
    path = results.write_summary(tmp_path, summary())
    assert path == tmp_path / "summary.json"
    assert results.load_summary(tmp_path) == summary()
    with pytest.raises(InvalidResult, match=r"\$\.sides\.A\.samples\[0\]: must match"):
        results.write_summary(tmp_path, mutate(summary(), "sides.A.samples", ["/abs.json"]))


def test_utc_now_fits_the_created_field():
    results.validate(sample() | {"created": clock.utc_now()}, "sample")


def test_version_2_samples_name_their_target_instead_of_accel() -> None:
    """sample.take (kbisect/measure/sample.py) writes version 2: `target` replaces `accel`."""
    s = {**sample(), "version": 2}
    del s["accel"]
    with pytest.raises(InvalidResult, match=r"\$.target: is missing"):
        results.validate(s, "sample")
    results.validate({**s, "target": {"kind": "fake", "name": "fake", "arch": "x86_64"}}, "sample")


def test_write_sample_fsyncs_the_samples_directory_after_the_link(tmp_path, monkeypatch):
    seen = fsync_spy(monkeypatch)
    run = tmp_path / "run"
    path = results.write_sample(run, Sample(sample("A", 100.0)))
    assert seen[-1] == ident(run / "samples")
    assert ident(path) in [(d, i, False) for d, i, _ in seen]  # the file's data first
    assert results.load_samples(run)[0].tps == 100.0


ODD_NAMES = ["001 (copy)-A.json", "abc-A.json", "01-.json", "002-Ä b.json", "٣-A.json", "7-A.JSON"]


def test_only_files_named_as_samples_are_read(tmp_path, capsys):
    """sample_paths decides which files of samples/ are samples: one written as NNN-LABEL
    (the label a slug), in boot order; another .json (a copy, spaces, unicode, no number)
    is left out with one warning line, once; a file that is clearly no sample (not
    .json, hidden, a folder) silently."""
    run = tmp_path / "run"
    written = [results.write_sample(run, Sample(sample(x, 100.0 + i))) for i, x in enumerate("AB")]
    folder = run / "samples"
    for name in ODD_NAMES:
        (folder / name).write_bytes(written[0].read_bytes())
    (folder / "010-A.json").write_bytes(written[1].read_bytes())
    (folder / "notes.txt").write_text("mine")
    (folder / "004-A.json.d").mkdir()
    (folder / "x.json").mkdir()
    for _ in range(2):
        assert results.sample_paths(run) == [*written, folder / "010-A.json"]
    (folder / "012-A.json").mkdir()  # a sample damaged into a folder is one, refused
    with pytest.raises(InvalidResult, match=r"012-A\.json: is a directory"):
        results.load_samples(run)
    (folder / "012-A.json").rmdir()
    warned = capsys.readouterr().err.splitlines()
    odd = sorted(n for n in ODD_NAMES if n.endswith(".json"))
    assert [line.split(": ")[2].rsplit("/", 1)[1] for line in warned] == odd
    assert all("not named as kbisect names a sample" in line for line in warned)
    assert results.write_sample(run, Sample(sample())).name == "011-A.json"
