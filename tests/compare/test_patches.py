"""`kbisect compare` with patches as a side, on the fake tree and the fake target: the
patch is applied before any build, named in the summary and in both reports, and one
that does not apply (or is no patch) is one line, exit 2, before any build or boot."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.compare import markdown, text
from kbisect.compare.report import load, load_summary
from kbisect.core import paths
from kbisect.core.exceptions import EXIT_OK, EXIT_USER
from tests.compare.test_compare import history, tps_by_label, vng_calls
from tests.fakes import fake_target, repo_snapshot


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    return fake_target(tmp_path)


def tps_diff(tmp_path: Path, name: str, old: int, new: int) -> Path:
    """A plain unified diff of the fake tree's TPS file (what the fake benchmark reports)."""
    out = tmp_path / name
    out.write_text(f"--- a/TPS\n+++ b/TPS\n@@ -1 +1 @@\n-{old}\n+{new}\n")
    return out


def errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """stderr without the progress lines."""
    return [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[kbisect")]


def argv(repo: Path, base: str, state: Path, out: Path, *extra: str) -> list[str]:
    fixed = ["--scenario", "smoke", "--boots", "2", "--target", str(state), "--out", str(out)]
    return ["compare", "--tree", str(repo), "--base", base, *fixed, *extra]


def test_a_patch_on_side_b_is_built_measured_and_named(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, shas = history(tmp_path)
    tps_diff(tmp_path, "fast-again.diff", 500, 1000)
    out = tmp_path / "cmp"
    before = repo_snapshot(repo)
    monkeypatch.chdir(tmp_path)  # a relative path is made absolute
    assert cli.main(argv(repo, shas[3], state, out, "--patch-b", "fast-again.diff")) == EXIT_OK
    assert repo_snapshot(repo) == before
    assert tps_by_label(out)["B"] == pytest.approx([1000.0, 1000.0], rel=0.05)
    summary = load_summary(out)
    a, b = summary["sides"]["A"], summary["sides"]["B"]
    assert "patches" not in a["kernel"] and a["kernel"]["commit"] == shas[3]
    assert b["label"].endswith(" + fast-again.diff") and b["kernel"]["commit"] not in shas
    digest = b["kernel"]["patches"][0]["sha256"]
    assert b["kernel"]["patches"] == [
        {"file": "fast-again.diff", "subject": "Apply fast-again.diff", "sha256": digest}
    ]
    run = load(out, summary, None)
    md = markdown.markdown(run)
    assert (
        "## Patches" in md
        and f"| B | 1 | `fast-again.diff` | Apply fast-again.diff | `{digest}` |" in md
    )
    txt = " ".join(text.render(run).split())  # wrapped at 72 columns
    assert f'with patches: fast-again.diff ("Apply fast-again.diff", sha256 {digest})' in txt


def test_patch_goes_on_both_sides_before_each_sides_own(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """... and a compare without --pg-build or --pg-patch does no PostgreSQL build work."""

    def no_pgbuild(*args: object) -> None:
        raise AssertionError("PostgreSQL build work in a compare that asks for none")

    for name in ("check", "apply", "wanted"):
        monkeypatch.setattr(f"kbisect.compare.pgsides.{name}", no_pgbuild)
    repo, shas = history(tmp_path)
    both = tps_diff(tmp_path, "both.diff", 500, 700)
    own = tps_diff(tmp_path, "own.diff", 700, 900)
    out = tmp_path / "cmp"
    extra = ["--patch", str(both), "--patch-b", str(own)]
    assert cli.main(argv(repo, shas[3], state, out, *extra)) in (EXIT_OK, 1)
    by = tps_by_label(out)
    assert by["A"] == pytest.approx([700.0] * 2, rel=0.05)
    assert by["B"] == pytest.approx([900.0] * 2, rel=0.05)
    sides = load_summary(out)["sides"]
    assert [p["file"] for p in sides["A"]["kernel"]["patches"]] == ["both.diff"]
    assert [p["file"] for p in sides["B"]["kernel"]["patches"]] == ["both.diff", "own.diff"]


def test_a_patch_that_does_not_apply_exits_2_before_any_build(
    tmp_path: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, shas = history(tmp_path)
    good = tps_diff(tmp_path, "good.diff", 500, 1000)
    bad = tps_diff(tmp_path, "stale.diff", 400, 1000)
    out = tmp_path / "cmp"
    extra = ["--patch-a", str(good), "--patch-b", str(bad)]
    assert cli.main(argv(repo, shas[3], state, out, *extra)) == EXIT_USER
    err = errors(capsys)
    assert len(err) == 1 and f"{bad}: does not apply" in err[0], err
    assert "first failing hunk TPS @@ -1 +1 @@" in err[0]
    assert vng_calls(state) == [] and not (paths.cache_dir() / "builds").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--patch-b", "missing.patch"], "missing.patch: no such file"),
        (["--patch-b", "README"], "not a patch"),
        (["--kernel-b", "bzImage", "--patch-b", "x.diff"], "not a prebuilt"),
    ],
)
def test_bad_patch_options_are_one_line(
    tmp_path: Path,
    state: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    repo, shas = history(tmp_path)
    extra = [str(repo / e) if e == "README" else e for e in extra]
    assert cli.main(argv(repo, shas[3], state, tmp_path / "cmp", *extra)) == EXIT_USER
    err = errors(capsys)
    assert len(err) == 1 and message in err[0], err
    assert vng_calls(state) == []


def test_patch_without_base_is_refused(
    tmp_path: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = ["compare", "--kernel", "bzImage", "--patch", "x.diff", "--scenario", "smoke"]
    assert cli.main([*line, "--target", str(state)]) == EXIT_USER
    assert "not a prebuilt" in capsys.readouterr().err
