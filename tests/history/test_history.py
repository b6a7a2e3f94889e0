"""`kbisect history` on generated -rc series written as sample JSONs into run dirs, and
as rc history entries (kbisect/history/, kbisect/commands/history.py)."""

from __future__ import annotations

import copy
import json
import sqlite3
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kbisect.commands import cli
from kbisect.history import source
from kbisect.source import rc

EXAMPLE = Path(__file__).parents[2] / "docs/examples/demo/samples/001-A.json"
TAGS = ["v6.19", *[f"v7.0-rc{i}" for i in range(1, 8)], "v7.0"]


def write_series(
    root: Path, levels: list[float], *, seed: int = 0, cv: float = 0.02, boots: int = 5,
    scenario_hash: str | None = None,
) -> Path:  # fmt: skip
    """One run dir per tag under root, `boots` samples each around its level."""
    base = json.loads(EXAMPLE.read_text())
    rng = np.random.default_rng(seed)
    for i, (tag, level) in enumerate(zip(TAGS, levels, strict=True)):
        run = root / f"2026120{i}T000000Z-run-{tag}" / "samples"
        run.mkdir(parents=True)
        for b in range(boots):
            s = copy.deepcopy(base)
            s["tps"] = float(level * (1 + cv * rng.standard_normal()))
            s["kernel"]["commit"] = f"{i:040x}"
            s["kernel"]["manifest"]["describe"] = tag
            s["created"] = f"2026-12-0{i + 1}T00:0{b}:00Z"
            s["boot_dir"] = f"/boots/{tag}/{b}"
            if scenario_hash:
                s["scenario"]["hash"] = scenario_hash
            (run / f"{b + 1:03d}-A.json").write_text(json.dumps(s))
    return root


def drift_levels() -> list[float]:
    return [1000.0 * 0.985**i for i in range(len(TAGS))]


def history(*argv: str) -> int:
    return cli.main(["history", *argv])


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.images: list[dict[str, str | None]] = []
        self.cells: list[str] = []
        self._in_td = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs))
        self._in_td = tag == "td"

    def handle_data(self, data: str) -> None:
        if self._in_td:
            self.cells.append(data)
            self._in_td = False


def test_a_slow_drift_is_flagged_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_series(tmp_path / "runs", drift_levels())
    out = tmp_path / "out"
    assert history(str(root), "--out", str(out)) == 1
    text = capsys.readouterr().out
    assert "REGRESSION: drift since v6.19" in text
    data = json.loads((out / "history.json").read_text())
    assert [p["key"] for p in data["points"]] == TAGS
    assert data["baseline"] == "v6.19" and data["drift"]["flagged"]
    page = Page()
    page.feed((out / "history.html").read_text())
    assert "table" in page.tags and "script" not in page.tags and "link" not in page.tags
    [img] = page.images
    assert str(img["src"]).startswith("data:image/png;base64,")
    assert "v7.0-rc4" in page.cells
    assert (out / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_flat_series_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_series(tmp_path / "runs", [1000.0] * len(TAGS), seed=1)
    assert history(str(root), "--format", "markdown") == 0
    out = capsys.readouterr().out
    assert out.startswith("## kbisect history") and "| v7.0-rc7 | 5 |" in out
    assert "REGRESSION" not in out


def test_left_out_samples_are_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_series(tmp_path / "runs", [1000.0] * len(TAGS), seed=2)
    f = next(root.glob("*v7.0-rc3/samples/001-A.json"))
    s = json.loads(f.read_text())
    f.write_text(json.dumps({**s, "status": "boot-failed", "tps": None, "error": "no boot"}))
    g = next(root.glob("*v7.0-rc4/samples/002-A.json"))
    g.write_text(json.dumps({**json.loads(g.read_text()), "status": "disturbed"}))
    assert history(str(root), "--format", "json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["left_out"] == {"failed": 1, "disturbed": 1}
    n = {p["key"]: p["n"] for p in data["points"]}
    assert (n["v7.0-rc3"], n["v7.0-rc4"], n["v7.0"]) == (4, 4, 5)


def test_rc_history_alone_gives_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The result dirs are gone: the tps values of the entries are enough."""
    rng = np.random.default_rng(3)
    entries: list[dict[str, Any]] = []
    for i, (tag, level) in enumerate(zip(TAGS, drift_levels(), strict=True)):
        tps = [round(float(level * (1 + 0.02 * rng.standard_normal())), 3) for _ in range(5)]
        entries.append(
            {"tag": tag, "commit": f"{i:040x}", "result_dir": str(tmp_path / "gone"),
             "scenario_hash": "ab" * 32, "tps_mean": sum(tps) / 5, "tps": tps, "n": 5}
        )  # fmt: skip
    entries.insert(0, {"tag": "v6.18", "scenario_hash": "ab" * 32, "tps_mean": 1000.0})
    rc.save_history(tmp_path / "h", entries)
    code = history(
        "--rc-history", str(tmp_path / "h"), "--format", "json", "--out", str(tmp_path / "o")
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert data["points"][0]["key"] == "v6.18" and data["points"][0]["n"] == 1  # an old entry
    assert data["points"][-1]["low"] is not None and data["baseline"] == "v6.19"


def test_refusals_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_series(tmp_path / "a", [1000.0] * len(TAGS))
    write_series(tmp_path / "b", [1000.0] * len(TAGS), scenario_hash="cd" * 32)
    assert history(str(tmp_path / "a"), str(tmp_path / "b")) == 2
    err = capsys.readouterr().err
    assert "2 values of scenario hash" in err and "cdcdcdcdcdcd (45)" in err
    assert len(err.splitlines()) == 1
    for argv in (
        [str(root), "--baseline", "v5.0"],
        [str(root), "--by", "colour"],
        [str(root), "--by", "axis:pgbench.nothing"],
        [str(root), "--scenario", "no-such"],
        [str(tmp_path / "missing")],
        ["--rc-history", str(tmp_path / "empty")],
        ["--rc-history", str(tmp_path), str(root)],
    ):
        assert history(*argv) == 2, argv
        assert len(capsys.readouterr().err.strip().splitlines()) == 1, argv


def test_source_reads_the_stored_examples() -> None:
    demo = list(source.collect([EXAMPLE.parents[2] / "demo"]))
    assert len(demo) == 10 and {o.label for o in demo} == {"A", "B"}
    assert all(o.scenario_name == "simple-update-2vcpu" and o.machine == "vng" for o in demo)


def test_without_dirs_the_results_database_finds_the_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs written anywhere (`--out`) are found through the index, not by a scan of the
    results dir; a sample file deleted since is left out and counted."""
    root = write_series(tmp_path / "elsewhere", drift_levels(), seed=2)
    assert cli.main(["db", "rebuild", str(root)]) == 0
    capsys.readouterr()
    assert history("--scenario", "simple-update-2vcpu", "--format", "json") == 1
    data = json.loads(capsys.readouterr().out)
    assert [p["key"] for p in data["points"]] == TAGS
    assert [p["n"] for p in data["points"]] == [5] * len(TAGS)
    next(root.glob("*v7.0-rc3/samples/001-A.json")).unlink()
    assert history("--scenario", "simple-update-2vcpu", "--format", "json") == 1
    captured = capsys.readouterr()
    assert "1 indexed samples are gone" in captured.err
    assert [p["n"] for p in json.loads(captured.out)["points"]][3] == 4


def test_two_hosts_under_vng_are_two_machines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_series(tmp_path / "runs", [1000.0] * len(TAGS), seed=3)
    for i, f in enumerate(sorted(root.rglob("*.json"))):
        s = json.loads(f.read_text())
        s["target"]["vm_host"] = {"cpu_model": "AMD EPYC" if i % 2 else "Intel Xeon", "cpus": 2}
        f.write_text(json.dumps(s))
    assert history(str(root)) == 2
    err = capsys.readouterr().err
    assert "vng@AMD EPYC/2" in err and "vng@Intel Xeon/2" in err
    assert history(str(root), "--machine", "vng@AMD EPYC/2", "--format", "json") == 0


@pytest.mark.parametrize(
    ("column", "value"),
    [("tps_runs", "not json"), ("patches", "{"), ("tps", "fast"), ("path", b"\xff"), ("boot", "x")],
)
def test_one_bad_index_row_costs_only_itself(
    tmp_path: Path, column: str, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cell of the results database that is not what kbisect writes (damage from
    outside): `kbisect history` and `db query` read the other rows, one warning line."""
    root = write_series(tmp_path / "elsewhere", drift_levels(), seed=2)
    assert cli.main(["db", "rebuild", str(root)]) == 0
    conn = sqlite3.connect(tmp_path / "results" / "kbisect.sqlite")
    with conn:
        bad = f"{next(root.glob('*v7.0-rc3/samples/001-A.json')).resolve()}"
        conn.execute(f'UPDATE samples SET "{column}" = ? WHERE path = ?', (value, bad))
    conn.close()
    capsys.readouterr()
    assert history("--scenario", "simple-update-2vcpu", "--format", "json") == 1
    captured = capsys.readouterr()
    assert [p["n"] for p in json.loads(captured.out)["points"]] == [5, 5, 5, 4, 5, 5, 5, 5, 5]
    assert len(captured.err.splitlines()) == 1 and "kbisect db rebuild" in captured.err
    assert cli.main(["db", "query"]) == 0
    assert capsys.readouterr().out.strip().endswith(f"{len(TAGS) * 5 - 1} samples")


def test_one_bad_rc_entry_costs_only_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries: list[Any] = [
        {"tag": tag, "scenario_hash": "ab" * 32, "tps_mean": level, "tps": [level] * 3}
        for tag, level in zip(TAGS, drift_levels(), strict=True)
    ]
    entries[4] = {**entries[4], "tps": [float("nan")]}
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "history.json").write_text(json.dumps({"entries": entries}))
    assert history("--rc-history", str(tmp_path / "h"), "--format", "json") == 1
    captured = capsys.readouterr()
    assert [p["key"] for p in json.loads(captured.out)["points"]] == TAGS[:4] + TAGS[5:]
    assert "entries[4].tps must be a list of positive numbers: left out" in captured.err


def test_the_machine_most_samples_have_is_chosen_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two thirds of the samples on one machine: that one, said in one line; the others
    are refused with their counts when no machine has two thirds (the test above)."""
    root = write_series(tmp_path / "runs", [1000.0] * len(TAGS), seed=4)
    for f in sorted(root.rglob("*.json"))[:15]:  # 15 of 45 samples on another host
        s = json.loads(f.read_text())
        s["target"]["vm_host"] = {"cpu_model": "AMD EPYC", "cpus": 2}
        f.write_text(json.dumps(s))
    assert history(str(root), "--format", "json") == 0
    captured = capsys.readouterr()
    said = "chose machine vng (30 of 45 samples); --machine NAME to pick another"
    assert captured.err == f"kbisect: {said}\n"
    data = json.loads(captured.out)
    assert data["machine"] == "vng" and sum(p["n"] for p in data["points"]) == 30
    assert data["chosen"] == [said]
    assert history(str(root), "--machine", "vng@AMD EPYC/2", "--format", "json") == 0
    assert capsys.readouterr().err == ""  # no choice made: nothing said


def test_the_demo_studys_halving_is_a_step_on_the_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stored demo study (hash 8260: 977, 975, 487 tps): a regression step at the
    newest point against the one before, a level per side and none through all three."""
    out = tmp_path / "page"
    argv = [str(EXAMPLE.parents[2]), "--scenario", "simple-update-2vcpu", "--by", "time"]
    assert history(*argv, "--scenario-hash", "8260", "--out", str(out)) == 1
    text = capsys.readouterr().out
    assert "regression step at the newest point demo-study k2-c0: 0.500x [0.459, 0.545] " in text
    assert "to demo-study k1-c0" in text and "no change point" not in text
    data = json.loads((out / "history.json").read_text())
    levels = [(lv["start"], lv["end"], round(lv["tps"])) for lv in data["levels"] if lv["fits"]]
    assert levels == [(0, 2, 975), (2, 3, 487)]
    page = Page()
    page.feed((out / "history.html").read_text())
    assert "demo-study k2-c0" in page.cells and page.images[0]["id"] == "plot"
    assert "://" not in (out / "history.html").read_text()  # no address: nothing to fetch
