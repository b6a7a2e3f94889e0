"""`kbisect rc`: tag parsing and ordering, and selection on generated git trees."""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from kbisect.commands import cli
from kbisect.commands import rc as rc_command
from kbisect.core import proc, reading
from kbisect.core.exceptions import KbisectError
from kbisect.source import rc

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@kbisect.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@kbisect.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}
MAINLINE = ["v6.11", *[f"v6.12-rc{i}" for i in range(1, 8)], "v6.12", "v6.12.1"]
MAINLINE += ["v6.13-rc1", "v6.13-rc2"]
NEXT = ["next-20260330", "next-20260331"]


def _git(repo: Path, *args: str) -> str:
    return proc.run(["git", "-C", str(repo), *args], env=IDENTITY, capture=True).output.strip()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A linear mainline history with annotated and lightweight tags; linux-next on a branch."""
    repo = tmp_path_factory.mktemp("linux")
    _git(repo, "init", "-q", "-b", "master")
    for i, tag in enumerate(MAINLINE):
        _git(repo, "commit", "-q", "--allow-empty", "-m", tag)
        annotated = ["-a", "-m", tag] if i % 2 else []
        _git(repo, "tag", *annotated, tag)
    _git(repo, "tag", "some-other-tag")
    _git(repo, "checkout", "-q", "-b", "next")
    for tag in NEXT:
        _git(repo, "commit", "-q", "--allow-empty", "-m", tag)
        _git(repo, "tag", "-a", "-m", tag, tag)
    return repo


def history(tmp_path: Path, *tags: str) -> Path:
    d = tmp_path / "history"
    rc.save_history(
        d,
        [
            {
                "tag": t,
                "commit": "0" * 40,
                "result_dir": "/r",
                "scenario_hash": "h",
                "tps_mean": 1.0,
            }
            for t in tags
        ],
    )
    return d


def kbisect_rc(argv: list[str]) -> int:
    """`kbisect rc ARGV` with cli.main's error mapping, without importing every subcommand."""
    parser = argparse.ArgumentParser()
    rc_command.configure(parser)
    try:
        return rc_command.main(parser.parse_args(argv))
    except SystemExit as exc:  # a bad option: argparse's one line, exit 2
        return int(exc.code or 0)
    except KbisectError as exc:
        print(f"kbisect: {exc}", file=sys.stderr)
        return exc.exit_code


def next_args(tree: Path, hist: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    rc_command.configure(parser)
    return parser.parse_args(["next", "--tree", str(tree), "--history", str(hist), *extra])


def run_next(
    tree: Path, hist: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> dict[str, str]:
    assert rc_command.main(next_args(tree, hist, *extra)) == 0
    out = capsys.readouterr().out
    return dict(line.split("=", 1) for line in out.splitlines())


# Pure functions.


@pytest.mark.parametrize(
    ("tag", "kind", "numbers", "rc_"),
    [
        ("v6.12-rc1", "mainline", (6, 12), 1),
        ("v6.12", "mainline", (6, 12), None),
        ("v6.12.3", "mainline", (6, 12, 3), None),
        ("v2.6.39-rc4", "mainline", (2, 6, 39), 4),
        ("next-20260331", "next", (2026, 3, 31), None),
    ],
)
def test_parse_tag(tag: str, kind: str, numbers: tuple[int, ...], rc_: int | None) -> None:
    v = rc.parse_tag(tag)
    assert v is not None
    assert (v.kind, v.numbers, v.rc) == (kind, numbers, rc_)


@pytest.mark.parametrize(
    "tag",
    [
        "foo",
        "v6",
        "v6.12-rc",
        "v6.12-rc1-dirty",
        "next-2026",
        "6.12",
        "v6.12-debian",
        "next-20260331-x",
    ],
)
def test_parse_tag_rejects(tag: str) -> None:
    assert rc.parse_tag(tag) is None
    with pytest.raises(ValueError):
        rc.sort_key(tag)


def version(tag: str) -> rc.TagVersion:
    v = rc.parse_tag(tag)
    assert v is not None
    return v


def test_series_and_final() -> None:
    assert version("v6.12-rc3").series == (6, 12)
    assert version("v2.6.39.4").series == (2, 6, 39)
    finals = [t for t in ["v6.12-rc3", "v6.12", "v6.12.1", "v2.6.39"] if version(t).is_final]
    assert finals == ["v6.12", "v2.6.39"]


def test_sort_key_orders_by_kernel_version() -> None:
    expected = [
        "v2.6.39-rc1",
        "v2.6.39",
        "v2.6.39.4",
        "v3.0-rc1",
        "v3.0",
        "v6.9",
        "v6.10-rc1",
        "v6.10-rc2",
        "v6.10-rc10",
        "v6.10",
        "v6.12-rc1",
        "v6.12-rc2",
        "v6.12-rc7",
        "v6.12",
        "v6.12.1",
        "v6.12.10",
        "v6.13-rc1",
        "next-20251231",
        "next-20260101",
    ]
    shuffled = expected[:]
    random.Random(1).shuffle(shuffled)
    assert sorted(shuffled, key=rc.sort_key) == expected
    assert sorted(shuffled) != expected  # plain string order would be wrong


@pytest.mark.parametrize(
    ("measured", "expected"),
    [
        (set(), "v6.13-rc2"),
        ({"v6.12-rc3"}, "v6.13-rc2"),
        ({"v6.13-rc1"}, "v6.13-rc2"),
        ({"v6.13-rc2"}, None),
        ({"v6.13-rc2", "v6.12-rc1"}, None),  # older gaps are not back-filled
    ],
)
def test_pick_next(measured: set[str], expected: str | None) -> None:
    candidates = [t for t in MAINLINE if "-rc" in t]
    assert rc.pick_next(candidates, measured) == expected


@pytest.mark.parametrize(
    ("tag", "measured", "expected"),
    [
        ("v6.13-rc1", set(), "v6.12"),  # first -rc: the previous final release
        ("v6.13-rc1", {"v6.12-rc7"}, "v6.12"),  # even if the final itself was not measured
        ("v6.13-rc2", {"v6.13-rc1", "v6.12"}, "v6.13-rc1"),  # else the previous measured -rc
        ("v6.12-rc7", {"v6.12-rc2", "v6.12-rc5"}, "v6.12-rc5"),
        ("v6.12-rc5", {"v6.12-rc7"}, "v6.11"),  # later measurements are never a baseline
        ("v6.12.1", {"v6.12-rc7"}, "v6.12-rc7"),
        ("v6.11", set(), None),  # nothing older at all
        ("next-20260331", {"next-20260330", "v6.13-rc2"}, "next-20260330"),
        ("next-20260330", {"next-20260331"}, None),
    ],
)
def test_pick_baseline(tag: str, measured: set[str], expected: str | None) -> None:
    assert rc.pick_baseline(tag, MAINLINE + NEXT, measured) == expected


# Selection on a real git tree.


def test_next_on_empty_history(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    got = run_next(tree, tmp_path / "none", capsys)
    assert got["tag"] == "v6.13-rc2"
    assert got["commit"] == _git(tree, "rev-parse", "v6.13-rc2^{commit}")
    assert got["baseline"] == "v6.12"
    assert got["baseline_commit"] == _git(tree, "rev-parse", "v6.12^{commit}")
    assert len(got["commit"]) == 40 and got["commit"] != got["baseline_commit"]


def test_next_after_first_rc(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    got = run_next(tree, history(tmp_path, "v6.12", "v6.13-rc1"), capsys)
    assert (got["tag"], got["baseline"]) == ("v6.13-rc2", "v6.13-rc1")


def test_nothing_new(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rc_command.main(next_args(tree, history(tmp_path, "v6.13-rc1", "v6.13-rc2"))) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["tag=", "commit=", "baseline=", "baseline_commit="]
    assert "nothing new" in err


def test_pattern_limits_candidates(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got = run_next(tree, history(tmp_path, "v6.12-rc5"), capsys, "--pattern", "v6.12-rc*")
    assert (got["tag"], got["baseline"]) == ("v6.12-rc7", "v6.12-rc5")
    got = run_next(tree, history(tmp_path, "v6.12-rc7"), capsys, "--pattern", "v6.12*")
    assert (got["tag"], got["baseline"]) == ("v6.12.1", "v6.12-rc7")


def test_linux_next(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = run_next(tree, tmp_path / "none", capsys, "--linux-next")
    # nothing measured: the mainline tag the next tree is built on
    assert (got["tag"], got["baseline"]) == ("next-20260331", "v6.13-rc2")
    got = run_next(tree, history(tmp_path, "next-20260330"), capsys, "--linux-next")
    assert (got["tag"], got["baseline"]) == ("next-20260331", "next-20260330")
    assert run_next(tree, history(tmp_path, "next-20260331"), capsys, "--linux-next")["tag"] == ""


def test_json_output(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rc_command.main(next_args(tree, history(tmp_path, "v6.13-rc2"), "--json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["new"] is False and data["tag"] == "" and data["pattern"] == "v*-rc*"


def test_history_from_environment(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KBISECT_HISTORY", str(history(tmp_path, "v6.13-rc2")))
    assert kbisect_rc(["next", "--tree", str(tree)]) == 0
    assert capsys.readouterr().out.startswith("tag=\n")


# Bad input: one line, exit 2.


@pytest.mark.parametrize(
    "extra",
    [
        ["--pattern", "nope-*"],
        ["--pattern", ""],
        ["--pattern", "v* -rc"],
        ["--pattern", "some-other-tag"],
    ],
)
def test_bad_pattern(
    tree: Path, tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = kbisect_rc(["next", "--tree", str(tree), "--history", str(tmp_path), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("kbisect: ") and err.count("\n") == 1


def test_not_a_git_repo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through cli.main: `rc` is wired in and the error becomes exit 2."""
    (tmp_path / "plain").mkdir()
    assert cli.main(["rc", "next", "--tree", str(tmp_path / "plain")]) == 2
    assert "not a git repository" in capsys.readouterr().err


def test_broken_history(tree: Path, tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "history.json").write_text("[1, 2]")
    with pytest.raises(reading.CorruptFile, match="not a kbisect rc history") as info:
        rc_command.main(next_args(tree, tmp_path / "h"))
    assert info.value.exit_code == 3 and str(info.value).endswith("start a new history")
    (tmp_path / "h" / "history.json").write_text('{"entries": [{"tag": "v1"')
    with pytest.raises(reading.CorruptFile, match="truncated or not JSON"):
        rc_command.main(next_args(tree, tmp_path / "h"))


# record


def record(hist: Path, result: Path, *extra: str) -> int:
    return kbisect_rc(["record", "--history", str(hist), "--result", str(result), *extra])


HASH = "abc" * 21 + "d"  # a scenario hash: 64 hex digits
DEMO_SAMPLE = Path(__file__).resolve().parents[2] / "docs/examples/demo/samples/001-A.json"


def sample(commit: str, tps: float | None, status: str = "ok", label: str = "B") -> dict[str, Any]:
    """A real sample (the demo's first), of `commit`, as measure/results.py writes one."""
    data: dict[str, Any] = json.loads(DEMO_SAMPLE.read_text())
    kernel = {**data["kernel"], "commit": commit}
    scenario = {**data["scenario"], "hash": HASH}
    error = None if status == "ok" else "the guest did not boot"
    changed = {"label": label, "status": status, "tps": tps, "error": error}
    return {**data, **changed, "kernel": kernel, "scenario": scenario}


def test_record_then_next(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hist, result = tmp_path / "h", tmp_path / "run1"
    result.mkdir()
    commit = _git(tree, "rev-parse", "v6.13-rc2^{commit}")
    args = ["--tag", "v6.13-rc2", "--commit", commit, "--scenario-hash", "h1", "--tps", "500.5"]
    assert record(hist, result, *args) == 0
    assert record(hist, result, *args[:-1], "501") == 0  # same tag and scenario: replaced
    entries = json.loads((hist / "history.json").read_text())["entries"]
    assert entries == [
        {
            "tag": "v6.13-rc2",
            "commit": commit,
            "result_dir": str(result),
            "scenario_hash": "h1",
            "tps_mean": 501.0,
            "recorded": entries[0]["recorded"],
        }
    ]
    assert not list(hist.glob(".*.tmp")), "written atomically, no temp file left"
    capsys.readouterr()
    assert run_next(tree, hist, capsys)["tag"] == ""


def test_record_reads_samples(tmp_path: Path) -> None:
    result, commit, other = tmp_path / "run", "a" * 40, "b" * 40
    (result / "boots").mkdir(parents=True)
    samples = [
        sample(commit, 100.0),
        sample(commit, 110.0),
        sample(commit, None, "boot-failed"),
        sample(other, 900.0, label="A"),
    ]
    (result / "samples").mkdir()
    for i, s in enumerate(samples):
        (result / "samples" / f"{i + 1:03d}-{s['label']}.json").write_text(json.dumps(s))
    (result / "boots" / "guest-result.json").write_text(json.dumps(sample(commit, 1.0)))
    (result / "summary.json").write_text(json.dumps({"kind": "compare"}))
    assert record(tmp_path / "h", result, "--tag", "v6.13-rc1", "--commit", commit) == 0
    [entry] = rc.load_history(tmp_path / "h")
    assert (entry["scenario_hash"], entry["tps_mean"]) == (HASH, 105.0)


@pytest.mark.parametrize(
    ("commit", "make_dir", "message"),
    [
        ("a" * 40, False, "no such directory"),
        ("not-a-sha", True, "expected a hexadecimal commit id"),
        ("abc", True, "'abc': 3 hexadecimal digits; give the full commit id (40 digits"),
        ("a" * 41, True, "41 hexadecimal digits"),
        ("c" * 40, True, "no ok samples"),
    ],
)
def test_record_bad_input(
    tmp_path: Path, commit: str, make_dir: bool, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if make_dir:
        (tmp_path / "run").mkdir()
    assert record(tmp_path / "h", tmp_path / "run", "--tag", "v1.0", "--commit", commit) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "h" / "history.json").exists()


@pytest.mark.parametrize("tps", ["nan", "inf", "-inf", "-5", "0"])
def test_record_refuses_a_tps_that_is_not_a_positive_number(
    tmp_path: Path, tps: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--tps nan` used to write a bare NaN into history.json (not JSON)."""
    (tmp_path / "run").mkdir()
    argv = ["--tag", "v1.0", "--commit", "a" * 40, "--scenario-hash", "h", f"--tps={tps}"]
    assert record(tmp_path / "h", tmp_path / "run", *argv) == 2
    assert f"argument --tps: {tps} " in capsys.readouterr().err  # not finite, or not above 0
    assert not (tmp_path / "h" / "history.json").exists()


# next --missed, and the tps values record keeps.


@pytest.mark.parametrize(
    ("measured", "expected"),
    [
        (set(), ["v6.13-rc2"]),  # nothing measured: the newest, as `next`
        ({"v6.12-rc3"}, [f"v6.12-rc{i}" for i in (4, 5, 6, 7)] + ["v6.13-rc1", "v6.13-rc2"]),
        ({"v6.12", "v6.13-rc2"}, ["v6.13-rc1"]),  # between two scheduled runs
        ({"v6.11", "v6.12-rc1", "v6.12", "v6.13-rc1", "v6.13-rc2"}, []),
    ],
)
def test_pick_missed(measured: set[str], expected: list[str]) -> None:
    candidates = [t for t in MAINLINE if "-rc" in t]
    assert rc.pick_missed(candidates, measured) == expected


def test_next_missed_prints_the_oldest_and_all(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hist = history(tmp_path, "v6.12", "v6.13-rc2")
    out = run_next(tree, hist, capsys, "--missed")
    assert (out["tag"], out["missed"], out["count"]) == ("v6.13-rc1", "v6.13-rc1", "1")
    assert out["baseline"] == "v6.12"
    assert run_next(tree, hist, capsys)["tag"] == ""  # without --missed: as before
    assert rc_command.main(next_args(tree, hist, "--missed", "--json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["tag"] for m in data["missed"]] == ["v6.13-rc1"] and data["new"] is True


def test_record_keeps_every_tps_and_old_entries_load(tmp_path: Path) -> None:
    result, commit = tmp_path / "run", "a" * 40
    (result / "samples").mkdir(parents=True)
    for i, tps in enumerate((100.0, 110.0, 120.0)):
        (result / "samples" / f"{i:03d}-B.json").write_text(json.dumps(sample(commit, tps)))
    assert record(tmp_path / "h", result, "--tag", "v6.13-rc1", "--commit", commit) == 0
    [entry] = rc.load_history(tmp_path / "h")
    assert (entry["tps"], entry["n"], entry["tps_mean"]) == ([100.0, 110.0, 120.0], 3, 110.0)
    old = history(tmp_path, "v6.12")  # entries without the values still load
    assert "tps" not in rc.load_history(old)[0]
    with pytest.raises(KbisectError, match="tps must be a list of positive numbers"):
        rc.save_history(old, [{"tag": "v6.12", "tps": [1.0, "x"]}])


# One bad input never costs the history: every entry checked before writing,
# readers keep what they can read, `rc repair` rewrites the file with it.


def _raw_history(hist: Path, entries: list[Any]) -> Path:
    """history.json written as a damaged one is: bypassing save_history's checks."""
    hist.mkdir(parents=True, exist_ok=True)
    body = {"version": 1, "kind": "rc-history", "entries": entries}
    (hist / "history.json").write_text(json.dumps(body))  # NaN written as json writes it
    return hist / "history.json"


def _entry(tag: str, **extra: Any) -> dict[str, Any]:
    return {"tag": tag, "commit": "0" * 40, "scenario_hash": "h", "tps_mean": 1.0, **extra}


BAD_ENTRIES = [
    _entry("v6.13-rc1", tps=[float("nan")]),  # a NaN written before record checked
    _entry("v6.13-rc1", tps_mean="fast"),
    _entry("", tps_mean=1.0),
    _entry("v6.13-rc1\nv6.13-rc2"),
    {"commit": "0" * 40},  # no tag
    "junk",
    _entry("v6.13-rc1", n=2**70 + 0.5),
]


@pytest.mark.parametrize("bad", BAD_ENTRIES, ids=lambda b: reading.got(b)[:40])
def test_one_bad_entry_costs_only_itself(
    tree: Path, tmp_path: Path, bad: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rc next` still sees every readable tag (one warning line for the bad one), and
    `rc repair` drops the bad entry alone, saying why, atomically; a second repair has
    nothing to drop and writes nothing."""
    file = _raw_history(tmp_path / "h", [_entry("v6.12"), bad, _entry("v6.13-rc2")])
    for given in (tmp_path / "h", file):  # the dir, or the file itself
        assert rc_command.main(next_args(tree, given)) == 0
        captured = capsys.readouterr()
        assert "tag=\n" in captured.out, "v6.13-rc2 is measured: nothing new"
        assert len(captured.err.splitlines()) == 2, "the bad entry named, and nothing new"
        assert "left out; `kbisect rc repair` drops it for good" in captured.err
    assert kbisect_rc(["repair", "--history", str(tmp_path / "h")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("dropped entries[1]") and out[-1].endswith("2 entries kept, 1 dropped")
    kept = json.loads(file.read_text(), parse_constant=lambda c: pytest.fail(f"{c} kept"))
    assert [e["tag"] for e in kept["entries"]] == ["v6.12", "v6.13-rc2"]
    before = file.stat().st_mtime_ns
    assert kbisect_rc(["repair", "--history", str(file)]) == 0
    assert capsys.readouterr().out.strip().endswith("2 entries kept, 0 dropped")
    assert file.stat().st_mtime_ns == before and not list(file.parent.glob(".*.tmp"))


def test_record_keeps_the_readable_entries_and_never_writes_a_bad_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hist = tmp_path / "h"
    _raw_history(hist, [_entry("v6.12"), BAD_ENTRIES[0]])
    (tmp_path / "run").mkdir()
    argv = ["--tag", "v6.13-rc2", "--commit", "a" * 40, "--scenario-hash", "h", "--tps", "5"]
    assert record(hist, tmp_path / "run", *argv) == 0
    entries = json.loads((hist / "history.json").read_text())["entries"]
    assert [e["tag"] for e in entries] == ["v6.12", "v6.13-rc2"]
    with pytest.raises(KbisectError, match=r"not written.*entries\[0\].tps_mean"):
        rc.save_history(hist, [_entry("v6.14", tps_mean=float("nan"))])
    assert [e["tag"] for e in rc.load_history(hist)] == ["v6.12", "v6.13-rc2"]


@pytest.mark.parametrize(
    ("tps", "message"),
    [("fast", '$.tps: must be number or null, got "fast"'), (float("nan"), "NaN or Infinity")],
)
def test_record_reads_the_samples_through_their_schema(
    tmp_path: Path, tps: Any, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sample of --result with a tps that is text, or NaN: one line naming it, exit 3,
    and the history as it was (the NaN never reaches history.json)."""
    hist, result, commit = tmp_path / "h", tmp_path / "run", "a" * 40
    (result / "samples").mkdir(parents=True)
    _raw_history(hist, [_entry("v6.12")])
    before = (hist / "history.json").read_bytes()
    for i, value in enumerate((100.0, tps, 110.0)):
        s = sample(commit, 1.0)
        (result / "samples" / f"{i + 1:03d}-B.json").write_text(json.dumps({**s, "tps": value}))
    assert record(hist, result, "--tag", "v6.13-rc1", "--commit", commit) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "002-B.json" in err[0] and message in err[0]
    assert (hist / "history.json").read_bytes() == before


def test_repair_refuses_what_is_no_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "h").mkdir()
    assert kbisect_rc(["repair", "--history", str(tmp_path / "h")]) == 2  # nothing there
    (tmp_path / "h" / "history.json").write_text('{"entries": [')
    assert kbisect_rc(["repair", "--history", str(tmp_path / "h")]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "move it aside to start a new history" in err[1]
    assert (tmp_path / "h" / "history.json").read_text() == '{"entries": ['
