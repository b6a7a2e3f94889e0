"""kbisect study end to end on the fake target (kbisect/targets/fake/target.py): runs, resume
(after failed boots and after a kill), bad input, plan and merge, builds of a generated
history, and the report in both formats."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kbisect.commands import cli
from kbisect.measure import results
from kbisect.report.text import WIDTH
from kbisect.source import tree
from kbisect.study import store
from tests.fakes import FAKELINUX, make_fake_kernel_repo, start_driver

ROOT = Path(__file__).resolve().parents[2]
NO_CHANGE = "no significant difference"


def kbisect(*argv: str) -> int:
    return cli.main(list(argv))


def fake_target(home: Path, name: str = "fakey", **settings: Any) -> Path:
    """A fake target TOML in ~/.config/kbisect/targets/."""
    folder = home / ".config" / "kbisect" / "targets"
    folder.mkdir(parents=True, exist_ok=True)
    lines = ['kind = "fake"', *(f"{k} = {json.dumps(v)}" for k, v in settings.items())]
    path = folder / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def image(where: Path, tps: float, arch: str | None = None) -> str:
    where.mkdir(parents=True)
    (where / "bzImage").write_text(f"fake-kernel\n6.12.0-fake\n{tps}\n0\n")
    if arch:
        (where / "manifest.json").write_text(json.dumps({"arch": arch}))
    return str(where)


@pytest.fixture
def kernels(tmp_path: Path) -> str:
    return ",".join(image(tmp_path / f"k{i}", tps) for i, tps in enumerate((1000, 1004, 650)))


def study_args(kernels: str, *extra: str) -> list[str]:
    return [
        "study",
        "--kernels",
        kernels,
        "--scenario",
        "smoke",
        "--axis",
        "pgbench.clients=2,4",
        "--target",
        "fakey",
        "--boots",
        "3",
        "--seed",
        "7",
        *extra,
    ]


def run_dir(results_root: Path) -> Path:
    (found,) = [p for p in results_root.glob("*-study-*") if p.is_dir()]
    return found


def ok_units(run: Path) -> Counter[tuple[int, int] | None]:
    return Counter(store.unit_of(s.label) for s in store.samples(run) if s.ok)


def test_a_study_finds_the_planted_step_and_reports_it(
    isolated_env: Path, kernels: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_target(isolated_env, cv=0.01)
    assert kbisect(*study_args(kernels)) == 0
    out = capsys.readouterr().out
    assert "3 kernel(s) x 2 cell(s), 0 build(s), 18 boots" in out
    run = run_dir(tmp_path / "results")
    assert ok_units(run) == {(k, c): 3 for k in range(3) for c in range(2)}
    summary = results.load_summary(run)
    called = [
        (s["cell"], s["a"], s["b"], s["kind"])
        for s in summary["stats"]["steps"]
        if s["kind"] != NO_CHANGE
    ]
    assert called == [(0, 1, 2, "regression"), (1, 1, 2, "regression")]
    report = (run / "report.md").read_text()
    assert "# Study study: 2 significant steps" in report and "Holm" in report
    assert all(
        (run / f).is_file() for f in ("study-tps.png", "study-ratios.png", "study-clients.png")
    )
    text = (run / "report.txt").read_text()
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert text.startswith("kbisect study study: 2 significant steps in pgbench tps")
    flat = " ".join(text.split())
    assert "clients=2: k1 -> k2: 0.6" in flat and "3 + 3 boots" in flat


def test_failed_boots_are_retried_and_the_rest_resumed(
    isolated_env: Path, kernels: str, tmp_path: Path
) -> None:
    target = fake_target(isolated_env, script=["ok", "panic", "ok", "panic", "panic"])
    assert kbisect(*study_args(kernels, "--retries", "1")) == 5  # one slot failed twice
    run = run_dir(tmp_path / "results")
    plan = (run / store.SCHEDULE).read_text()
    assert sum(ok_units(run).values()) == 17
    failed = [s for s in store.samples(run) if not s.ok]
    assert len(failed) == 3
    target.write_text('kind = "fake"\n')
    assert kbisect("study", "--resume") == 0
    assert ok_units(run) == {(k, c): 3 for k in range(3) for c in range(2)}  # none twice
    assert (run / store.SCHEDULE).read_text() == plan
    assert kbisect("study", "--resume", str(run)) == 2  # nothing left to take


def test_resume_after_a_kill_loses_no_sample_and_takes_none_twice(
    isolated_env: Path, kernels: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    fake_target(isolated_env, kill_at=7, kill_pid_file=str(pid_file))
    proc = start_driver(study_args(kernels), pid_file)
    assert proc.wait(timeout=120) == -signal.SIGKILL
    run = run_dir(tmp_path / "results")
    assert sum(ok_units(run).values()) == 6
    fake_target(isolated_env)
    assert kbisect("study", "--resume", str(run)) == 0
    assert ok_units(run) == {(k, c): 3 for k in range(3) for c in range(2)}
    assert len(store.samples(run)) == 18


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--axis", "pgbench.clientz=1,2"], "not a scenario key"),
        (["--axis", "pgbench.clients=0,4"], "cell c0 (clients=0)"),
        (["--budget", "0.1"], "over the budget of 0.1 h: pass --yes"),
        (["--boots", "1"], "--boots: 1 is not in 2..1000"),
        (["--min-effect", "nan"], "--min-effect: nan is not a finite number"),
        (["--budget", "nan"], "--budget: nan is not a finite number"),
        (["--budget", "inf"], "--budget: inf is not a finite number"),
        (["--budget", "-2"], "--budget: -2 must be above 0"),
    ],
)
def test_bad_input_is_one_line_exit_2_before_any_boot(
    isolated_env: Path,
    kernels: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    fake_target(isolated_env)
    argv = study_args(kernels)
    if extra[0] == "--axis":
        argv = [*argv[: argv.index("--axis")], *argv[argv.index("--axis") + 2 :]]
    assert kbisect(*argv, *extra) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "results").exists()


def test_mixed_arches_are_refused(
    isolated_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_target(isolated_env)
    k = f"{image(tmp_path / 'x', 1000, 'x86_64')},{image(tmp_path / 'y', 900, 'arm64')}"
    assert kbisect(*study_args(k)) == 2
    assert "kernels of mixed arches (arm64: y; x86_64: x)" in capsys.readouterr().err


def history(tmp_path: Path) -> Path:
    repo = tmp_path / "linux"
    make_fake_kernel_repo(
        repo,
        [
            {"subject": "fast", "tps": 1000, "tag": "v6.1"},
            {"subject": "same", "tag": "v6.2"},
            {"subject": "slow", "tps": 600},
            {"subject": "later", "tag": "v6.3"},
            {"subject": "rc", "tag": "v6.4-rc1"},
        ],
    )
    return repo


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kbisect cache of the test's own: the builds of its generated trees."""
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_tag_pattern_in_version_order_builds_each_kernel_once(
    isolated_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], cache: Path
) -> None:
    repo = history(tmp_path)
    fake_target(isolated_env, cv=0.01)
    argv = [
        "study",
        "--tree",
        str(repo),
        "--kernels",
        "v6.[0-9]",
        "--scenario",
        "smoke",
        "--axis",
        "pgbench.clients=2",
        "--target",
        "fakey",
        "--boots",
        "3",
    ]
    assert kbisect(*argv) == 0
    out = capsys.readouterr().out
    assert "kernels (3): v6.1, v6.2, v6.3" in out and "3 build(s)" in out
    builds = list((cache / "builds").glob("*/*/*/manifest.json"))
    assert len(builds) == 3
    run = run_dir(tmp_path / "results")
    (step,) = [s for s in results.load_summary(run)["stats"]["steps"] if s["kind"] != NO_CHANGE]
    assert step["bisect"] == (
        f"kbisect bisect --good v6.2 --bad v6.3 --scenario smoke --tree {repo} "
        "--set pgbench.clients=2 --arch x86_64"
    )
    text = (run / "report.txt").read_text()
    assert "clients=2: v6.2 -> v6.3:" in text
    flat = " ".join(text.replace("\\\n", " ").split())
    assert "bisect: kbisect bisect --good v6.2 --bad v6.3 --scenario smoke --tree" in flat
    assert (
        kbisect(
            "study",
            "--tree",
            str(repo),
            "--kernels",
            "v9.*",
            "--scenario",
            "smoke",
            "--target",
            "fakey",
        )
        == 2
    )
    assert "no version tag matches" in capsys.readouterr().err


def test_plan_gives_whole_cells_and_merge_joins_the_shares(
    isolated_env: Path, kernels: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_target(isolated_env, cv=0.01)
    study_file = tmp_path / "s.toml"
    study_file.write_text(
        f'name = "s"\nscenario = "smoke"\nboots = 2\nseed = 3\n[kernels]\n'
        f"images = {json.dumps(kernels.split(','))}\n"
        '[[axes]]\nkey = "pgbench.clients"\nvalues = [2, 3, 4]\n'
    )
    assert kbisect("study", "plan", str(study_file), "--runners", "2") == 0
    matrix = json.loads(capsys.readouterr().out)
    cells = [c for share in matrix["include"] for c in share["cells"].split()]
    assert sorted(cells) == ["c0", "c1", "c2"]
    assert [s["share"] for s in matrix["include"]] == ["1/2", "2/2"]
    shares = []
    for share in matrix["include"]:
        out = tmp_path / share["share"].replace("/", "-of-")
        assert (
            kbisect(
                "study",
                str(study_file),
                "--target",
                "fakey",
                "--share",
                share["share"],
                "--out",
                str(out),
            )
            == 0
        )
        shares.append(out)
    merged = tmp_path / "merged"
    assert kbisect("study", "merge", *map(str, shares), "--out", str(merged)) == 0
    assert ok_units(merged) == {(k, c): 2 for k in range(3) for c in range(3)}
    assert "Study s" in (merged / "report.md").read_text()
    # a share of another study, or from another machine, is refused
    other = json.loads((shares[1] / store.DEFINITION).read_text())
    (shares[1] / store.DEFINITION).write_text(json.dumps({**other, "seed": 4}))
    assert kbisect("study", "merge", *map(str, shares), "--out", str(tmp_path / "m2")) == 2
    assert "is a share of another study" in capsys.readouterr().err
    machine = {**other["machine"], "cores": 96}
    (shares[1] / store.DEFINITION).write_text(json.dumps({**other, "machine": machine}))
    assert kbisect("study", "merge", *map(str, shares), "--out", str(tmp_path / "m3")) == 2
    err = capsys.readouterr().err
    assert "ran on a different machine" in err and f"(cores: {os.cpu_count()} vs 96)" in err
    assert not (tmp_path / "m2").exists() and not (tmp_path / "m3").exists()


def test_report_rerenders_a_study_in_both_formats(
    isolated_env: Path, kernels: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_target(isolated_env, cv=0.01)
    assert kbisect(*study_args(kernels)) == 0
    run = run_dir(tmp_path / "results")
    before = (run / "report.md").read_text()
    (run / "report.md").unlink()
    capsys.readouterr()
    assert kbisect("report", str(run)) == 0
    assert (run / "report.md").read_text().split("Reproduce")[1] == before.split("Reproduce")[1]
    capsys.readouterr()
    assert kbisect("report", str(run), "--format", "text") == 0
    printed = capsys.readouterr().out
    assert printed == (run / "report.txt").read_text()
    assert max(map(len, printed.splitlines())) <= WIDTH


def release(tmp_path: Path, name: str, version: tuple[int, int, int], tps: float) -> Path:
    """A generated repo standing for an imported release: one commit on its own history
    (no shared ancestor with another), its Makefile naming the version, tagged like an
    import when `name` says so."""
    repo = tmp_path / name
    head = "VERSION = {}\nPATCHLEVEL = {}\nSUBLEVEL = {}\nEXTRAVERSION =\n".format(*version)
    makefile = head + (FAKELINUX / "Makefile").read_text()
    tag = {"tag": f"debian/{'.'.join(map(str, version))}-1"} if "debian" in name else {}
    commit = {"subject": f"Import {name}", "tps": tps, "files": {"Makefile": makefile}}
    make_fake_kernel_repo(repo, [{**commit, **tag}])
    return repo


def test_kernels_in_two_trees_build_in_each_and_the_step_says_where_to_bisect(
    isolated_env: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = release(tmp_path, "debian-6.1", (6, 1, 158), 1000)
    new = release(tmp_path, "linux-7.2", (7, 2, 13), 600)
    resolve = tree.resolve
    monkeypatch.setattr(tree, "resolve", lambda t: old if t == "debian:6.1" else resolve(t))
    study_file = tmp_path / "r.toml"
    study_file.write_text(
        'name = "r"\nscenario = "smoke"\nboots = 3\nseed = 5\n'
        '[[kernels.list]]\ntree = "debian:6.1"\nlabel = "6.1"\n'
        f"[[kernels.list]]\ntree = {json.dumps(str(new))}\n"
        '[[axes]]\nkey = "pgbench.clients"\nvalues = [2, 4]\n'
    )
    fake_target(isolated_env, cv=0.01, script=["ok", "panic", "panic"])
    assert kbisect("study", str(study_file), "--target", "fakey", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "kernels (2): 6.1, linux-7.2; baseline 6.1" in out and "2 build(s)" in out
    assert "6.1: debian/6.1.158-1 (" in out and f") in tree debian:6.1 ({old})" in out
    assert "linux-7.2: HEAD (" in out and f") in tree {new} ({new})" in out
    assert not (tmp_path / "results").exists()
    assert kbisect("study", str(study_file), "--target", "fakey", "--retries", "1") == 5
    run = run_dir(tmp_path / "results")
    d = store.load_definition(run)
    assert [(k["tree"], k["rev"], k["version"]) for k in d["kernels"]] == [
        ("debian:6.1", "debian/6.1.158-1", "6.1.158"),
        (str(new), "HEAD", "7.2.13"),
    ]
    assert len(list((cache / "builds").glob("*/*/*/manifest.json"))) == 2
    fake_target(isolated_env, cv=0.01)
    assert kbisect("study", "--resume", str(run)) == 0  # each tree resolved again
    assert ok_units(run) == {(k, c): 3 for k in range(2) for c in range(2)}
    steps = [s for s in results.load_summary(run)["stats"]["steps"] if s["kind"] != NO_CHANGE]
    assert [s["bisect"] for s in steps] == [None, None]
    assert steps[0]["elsewhere"] == (
        "kbisect bisect --good v6.1 --bad v7.2 --scenario smoke --tree /path/to/linux.git "
        "--set pgbench.clients=2 --arch x86_64"
    )
    report = (run / "report.md").read_text()
    assert "are in different trees, and kbisect does not bisect across trees" in report
    assert "| # | kernel | tree | commit | subject / image |" in report
    assert "| 0 | `6.1` (baseline) | debian:6.1 at debian/6.1.158-1 |" in report
    text = (run / "report.txt").read_text()
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    flat = " ".join(text.replace("\\\n", " ").split())
    assert "not bisectable here: 6.1 (debian:6.1) and linux-7.2 (/" in flat
    assert "kbisect bisect --good v6.1 --bad v7.2 --scenario smoke" in flat
    assert "6.1: debian:6.1 at debian/6.1.158-1" in flat
    capsys.readouterr()
    (run / "report.md").unlink()
    assert kbisect("report", str(run)) == 0
    assert (run / "report.md").read_text().split("Reproduce")[1] == report.split("Reproduce")[1]


def test_a_kernel_list_with_one_kernel_twice_or_one_label_twice_is_one_line(
    isolated_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = json.dumps(str(history(tmp_path)))
    fake_target(isolated_env)
    for second, message in (
        ('rev = "v6.2"\nlabel = "a"', "two kernels are named a: give each a label"),
        ('rev = "v6.1"', "kernels a and v6.1 are the same kernel"),
    ):
        study_file = tmp_path / "twice.toml"
        study_file.write_text(
            f'name = "twice"\nscenario = "smoke"\n[kernels]\ntree = {repo}\n'
            '[[kernels.list]]\nrev = "v6.1"\nlabel = "a"\n'
            f"[[kernels.list]]\n{second}\n"
            '[[axes]]\nkey = "pgbench.clients"\nvalues = [2]\n'
        )
        assert kbisect("study", str(study_file), "--target", "fakey", "--dry-run") == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1
