"""`kbisect compare` end to end on the fake target (and the fake kernel tree for builds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kbisect.commands import cli
from kbisect.compare import schedule as compare
from kbisect.core import paths
from kbisect.core.exceptions import EXIT_BOOT, EXIT_NEGATIVE, EXIT_OK, EXIT_USER
from kbisect.measure import results
from kbisect.stats import means, ratio
from tests.fakes import fake_calls, fake_image, fake_target, make_fake_kernel_repo


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake target's TOML (tests rewrite it with `fake_target`)."""
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    return fake_target(tmp_path)


def vng_calls(target_file: Path) -> list[dict[str, Any]]:
    return fake_calls(target_file)


def compare_argv(image: Path, out: Path, *extra: str) -> list[str]:
    return [
        "compare",
        "--target",
        str(Path(out).parent / "fake.toml"),
        "--kernel",
        str(image),
        "--append-a",
        "x=1",
        "--append-b",
        "x=2",
        "--scenario",
        "smoke",
        "--boots",
        "3",
        "--out",
        str(out),
        *extra,
    ]


def tps_by_label(out: Path) -> dict[str, list[float]]:
    by: dict[str, list[float]] = {}
    for s in results.load_samples(out):  # validated against the schema
        if s.status == "ok":
            by.setdefault(str(s.label), []).append(s.data["tps"])
    return by


# -- order -----------------------------------------------------------------------------


def test_order_abba() -> None:
    assert compare.order(2)[0] == ["A", "B", "B", "A"]
    assert compare.order(3)[0] == ["A", "B", "B", "A", "A", "B"]
    assert compare.order(5)[0].count("A") == compare.order(5)[0].count("B") == 5


def test_order_random_is_seeded_pairs() -> None:
    plan = compare.order(20, "random", seed=7)[0]
    assert plan == compare.order(20, "random", seed=7)[0]
    pairs = [plan[i : i + 2] for i in range(0, len(plan), 2)]
    assert all(sorted(p) == ["A", "B"] for p in pairs)
    assert {tuple(p) for p in pairs} == {("A", "B"), ("B", "A")}
    assert plan != compare.order(20, "random", seed=8)[0]


# -- end to end ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tps_b", "kind", "code"),
    [
        (500, "regression", EXIT_NEGATIVE),
        (1000, means.NO_DIFFERENCE, EXIT_OK),
        (1500, "improvement", EXIT_OK),
    ],
)
def test_compare_end_to_end(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    state: Path,
    tps_b: int,
    kind: str,
    code: int,
) -> None:
    # 0.2% noise: the fake keys an image without a commit by its path, which is new on
    # every run, so the draws are too; at 1% a 1000 against 1000 compare was now and then
    # an "improvement" beyond the 2% min effect. At 0.2% no draw can get there.
    fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": tps_b}, cv=0.002)
    out = tmp_path / "cmp"
    assert cli.main(compare_argv(fake_image(tmp_path / "k"), out)) == code
    summary = results.load_summary(out)  # validated against the schema
    assert (out / "report.md").is_file()
    plan = ["A", "B", "B", "A", "A", "B"]
    assert summary["order"] == plan
    sides = ["A" if "x=1" in c["append"] else "B" for c in vng_calls(state)]
    assert sides == plan  # the boots really ran in that order
    by = tps_by_label(out)
    expected = ratio.verdict(by["A"], by["B"], min_effect=0.02)
    assert summary["verdict"]["kind"] == expected.kind == kind
    assert summary["verdict"]["ratio"]["ratio"] == pytest.approx(expected.ratio.ratio)
    assert summary["failed"] == {"A": 0, "B": 0}
    assert [len(summary["sides"][s]["samples"]) for s in "AB"] == [3, 3]
    assert summary["sides"]["B"]["append"] == "x=2"


def test_failed_boot_is_excluded_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Path
) -> None:
    fake_target(tmp_path, script=["ok", "ok", "panic"])  # B's 2nd boot
    out = tmp_path / "cmp"
    argv = compare_argv(fake_image(tmp_path / "k"), out, "--retries", "0")
    assert cli.main(argv) == EXIT_OK
    summary = results.load_summary(out)
    assert summary["failed"] == {"A": 0, "B": 1}
    assert (summary["stats"]["A"]["n"], summary["stats"]["B"]["n"]) == (3, 2)
    statuses = [(s.label, s.status) for s in results.load_samples(out)]
    assert statuses.count(("B", "boot-failed")) == 1 and len(statuses) == 6
    by = tps_by_label(out)
    assert summary["stats"]["B"]["mean"] == pytest.approx(sum(by["B"]) / 2)


def test_failed_boot_is_retried_in_place_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Path
) -> None:
    fake_target(tmp_path, script=["ok", "ok", "panic", "ok"])
    out = tmp_path / "cmp"
    assert cli.main(compare_argv(fake_image(tmp_path / "k"), out)) == EXIT_OK
    summary = results.load_summary(out)
    assert summary["failed"] == {"A": 0, "B": 1}
    assert (summary["stats"]["A"]["n"], summary["stats"]["B"]["n"]) == (3, 3)
    statuses = [(s.label, s.status) for s in results.load_samples(out)]
    # ABBA: the third boot (B) panicked and was retried right away, before A's second.
    assert statuses[:4] == [("A", "ok"), ("B", "ok"), ("B", "boot-failed"), ("B", "ok")]
    assert len(statuses) == 7


def test_too_many_failed_boots_is_a_boot_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Path
) -> None:
    fake_target(tmp_path, mode="panic")
    out = tmp_path / "cmp"
    assert cli.main(compare_argv(fake_image(tmp_path / "k"), out)) == EXIT_BOOT
    assert not (out / "summary.json").exists()
    assert len(results.load_samples(out)) == 12  # 6 boots, each retried once


# -- bad input -------------------------------------------------------------------------


def test_same_kernel_and_append_on_both_sides_exits_2(
    tmp_path: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "compare",
        "--kernel",
        str(fake_image(tmp_path / "k")),
        "--append",
        "x=1",
        "--scenario",
        "smoke",
        "--target",
        str(state),
        "--out",
        str(tmp_path / "cmp"),
    ]
    assert cli.main(argv) == EXIT_USER
    assert "nothing to compare" in capsys.readouterr().err
    assert vng_calls(state) == []


def test_one_boot_exits_2(tmp_path: Path, state: Path) -> None:
    argv = compare_argv(fake_image(tmp_path / "k"), tmp_path / "cmp")
    argv[argv.index("--boots") + 1] = "1"
    assert cli.main(argv) == EXIT_USER
    assert vng_calls(state) == []


def history(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "linux"
    return repo, make_fake_kernel_repo(
        repo,
        [
            {"subject": "sched: fast", "tps": 1000},
            {"subject": "sched: slow", "tps": 500},
            {"subject": "docs: unrelated", "files": {"Documentation/x.rst": "x\n"}},
        ],
    )


def test_revert_of_a_non_ancestor_exits_2(
    tmp_path: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, shas = history(tmp_path)
    argv = [
        "compare",
        "--tree",
        str(repo),
        "--base",
        shas[1],
        "--revert",
        shas[2],
        "--scenario",
        "smoke",
        "--target",
        str(state),
        "--out",
        str(tmp_path / "cmp"),
    ]
    assert cli.main(argv) == EXIT_USER
    assert "is not an ancestor" in capsys.readouterr().err
    assert vng_calls(state) == [] and not (paths.cache_dir() / "builds").exists()


def test_base_against_base_plus_revert(
    tmp_path: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, shas = history(tmp_path)
    out = tmp_path / "cmp"
    argv = [
        "compare",
        "--tree",
        str(repo),
        "--base",
        shas[3],
        "--revert",
        shas[2],
        "--scenario",
        "smoke",
        "--boots",
        "2",
        "--target",
        str(state),
        "--out",
        str(out),
    ]
    assert cli.main(argv) == EXIT_OK  # the revert brings back 1000 tps: an improvement
    summary: dict[str, Any] = results.load_summary(out)
    assert summary["verdict"]["kind"] == "improvement"
    a, b = summary["sides"]["A"], summary["sides"]["B"]
    assert a["kernel"]["commit"] == shas[3]
    assert b["kernel"]["commit"] not in shas and b["label"].startswith(f"revert {shas[2][:12]}")
    assert tps_by_label(out)["B"] == pytest.approx([1000.0, 1000.0], rel=0.05)
