"""Bad files and overrides through the real command line: one line on stderr, no
traceback; exit 2 for the user's own files and options, exit 3, saying how to recover,
for a file of kbisect's own run that cannot be read back."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from kbisect.bisect.report import files as bisect_files
from kbisect.commands import cli
from kbisect.core import paths
from kbisect.core.exceptions import EXIT_INFRA, EXIT_USER
from kbisect.study import store
from tests.fakes import fake_image, fake_target, make_fake_kernel_repo

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
DOTTED = "pgbench.clients.x=1"


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.removeprefix("kbisect: ").strip()


def commands(tmp_path: Path) -> dict[str, list[str]]:
    """run, compare, bisect and study on the fake target, without a --scenario."""
    image, target = fake_image(tmp_path / "k"), str(fake_target(tmp_path))
    repo = tmp_path / "linux"
    shas = make_fake_kernel_repo(repo, [{"subject": "one"}])
    where, sides = ["--target", target], ["--append-a", "x=1", "--append-b", "x=2"]
    return {
        "run": ["run", "--kernel", str(image), *where],
        "compare": ["compare", "--kernel", str(image), *sides, *where],
        "bisect": ["bisect", "--tree", str(repo), "--good", shas[0], "--bad", shas[1], *where],
        "study": ["study", "--kernels", str(image), "--axis", "pgbench.clients=2,3", *where],
    }


@pytest.mark.parametrize("command", ["run", "compare", "bisect", "study"])
def test_set_through_a_plain_value_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    argv = [*commands(tmp_path)[command], "--scenario", "smoke", "--set", DOTTED]
    assert cli.main(argv) == EXIT_USER
    line = one_line(capsys)
    assert line.endswith(
        "--set pgbench.clients.x: pgbench.clients is a value (4), not a section with fields"
    )
    assert not list((tmp_path / "results").glob("*/samples/*"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("pgbench.clients=nan", "--set pgbench.clients: must be a finite value, got NaN"),
        ("pgbench.runs=-1", "pgbench.runs must be 1 to 1000, got -1"),
        ("pgbench.nope=1", "unknown field pgbench.nope"),
        ("guest.vcpus=2.5", "guest.vcpus must be an integer, got 2.5"),
    ],
)
def test_bad_overrides_in_run_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, message: str
) -> None:
    argv = [*commands(tmp_path)["run"], "--scenario", "smoke", "--set", override]
    assert cli.main(argv) == EXIT_USER
    assert message in one_line(capsys)


def test_a_scenario_file_that_is_not_utf8_or_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = commands(tmp_path)["run"]
    latin1 = tmp_path / "smoke.toml"
    latin1.write_bytes((paths.scenarios_dir() / "smoke.toml").read_bytes() + b"# caf\xe9\n")
    assert cli.main([*run, "--scenario", str(latin1)]) == EXIT_USER
    assert one_line(capsys).startswith(f"{latin1}: not UTF-8 text (byte ")
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    assert cli.main([*run, "--scenario", str(folder)]) == EXIT_USER
    assert one_line(capsys) == f"{folder}: is a directory, not a file"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"name = \xff", "not UTF-8 text (byte 7)"),
        (b"name = ", "invalid TOML"),
        (b"min_effect = nan\n", "min_effect must be a finite number, got nan"),
        (b"budget_hours = inf\n", "budget_hours must be a finite number, got inf"),
        (b"boots = -3\n", "boots must be 1 to 1000, got -3"),
        (b"retries = 1.5\n", "retries must be an integer, got 1.5"),
        (b"colour = 1\n", "colour is not a known field"),
        (b"[kernels]\nrevs = [1]\n", "kernels.revs must be a list of strings"),
    ],
)
def test_a_bad_study_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    head = b'name = "s"\nscenario = "smoke"\n' if not content.startswith(b"name") else b""
    kernels = b"" if b"[kernels]" in content else b'[kernels]\nrevs = ["v1"]\n'
    study = tmp_path / "s.toml"
    study.write_bytes(head + content + (b"\n" + kernels if head else b""))
    assert cli.main(["study", str(study), "--target", str(fake_target(tmp_path))]) == EXIT_USER
    assert message in one_line(capsys)


def test_a_directory_where_a_study_or_target_file_belongs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "s.toml"
    folder.mkdir()
    assert cli.main(["study", str(folder)]) == EXIT_USER
    assert one_line(capsys) == f"{folder}: is a directory, not a file"
    argv = [*commands(tmp_path)["run"][:3], "--scenario", "smoke", "--target", str(folder)]
    assert cli.main(argv) == EXIT_USER
    assert one_line(capsys) == f"{folder}: is a directory, not a file"


def example(tmp_path: Path, name: str) -> Path:
    run = tmp_path / name
    shutil.copytree(EXAMPLES / name, run)
    return run


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


@pytest.mark.parametrize(
    ("name", "file", "argv", "recover"),
    [
        ("demo", "plan.json", ["compare", "--resume"], "run the same kbisect compare again"),
        ("demo", "summary.json", ["report"], "run the command with --resume"),
        ("demo", "summary.json/", ["report"], "run the command with --resume"),
        ("demo", "samples/001-A.json", ["report"], "move it out of the samples folder"),
        (
            "demo-bisect-posterior",
            "state.json",
            ["bisect", "--resume"],
            "run the same kbisect bisect again",
        ),
        ("demo-study", "study.json", ["study", "--resume"], "run the study again"),
        ("demo-study", "samples/001-k0-c0.json", ["report"], "move it out of the samples"),
    ],
)
def test_a_truncated_file_of_a_run_exits_3_saying_how_to_recover(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    file: str,
    argv: list[str],
    recover: str,
) -> None:
    run = example(tmp_path, name)
    if file == "plan.json":
        (run / "summary.json").unlink()  # an unfinished compare
    if file.startswith("samples/") and not (run / file).exists():
        file = f"samples/{sorted(p.name for p in (run / 'samples').iterdir())[0]}"
    if file.endswith("/"):  # a directory where the file belongs
        file = file.rstrip("/")
        (run / file).unlink()
        (run / file).mkdir()
    else:
        truncate(run / file)
    assert cli.main([*argv, str(run)]) == EXIT_INFRA
    line = one_line(capsys)
    assert line.startswith(f"{run / file}: ") and recover in line


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("kernels", "v1", 'kernels must be a list, got "v1"'),
        ("retries", -1, "retries must be at least 0, got -1"),
        ("min_effect", "big", 'min_effect must be a number, got "big"'),
        ("scenario", None, "scenario must be a table, got null"),
    ],
)
def test_a_study_definition_with_a_wrong_field_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object, problem: str
) -> None:
    run = example(tmp_path, "demo-study")
    definition = json.loads((run / "study.json").read_text())
    (run / "study.json").write_text(json.dumps({**definition, field: value}))
    assert cli.main(["study", "--resume", str(run)]) == EXIT_INFRA
    assert one_line(capsys) == f"{run}/study.json: {problem}; {store.RECOVER}"


@pytest.mark.parametrize(
    ("manifest", "problem"),
    [
        ({"config_hash": "0123456789ab"}, 'config_hash must be a sha256 (64 hex digits), got "01'),
        ({"commit": "../x"}, 'commit must be a commit id (7 to 64 hex digits), got "../x"'),
        ({"arch": 64}, "arch must be a string, got 64"),
        ({"duration_s": math.nan}, "holds NaN or Infinity, which no build writes"),
    ],
)
def test_a_manifest_with_a_wrong_field_exits_3_before_any_boot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest: dict[str, Any], problem: str
) -> None:
    run = commands(tmp_path)["run"]
    path = Path(run[2]).parent / "manifest.json"
    path.write_text(json.dumps({"arch": "x86_64", **manifest}))
    assert cli.main([*run, "--scenario", "smoke"]) == EXIT_INFRA
    line = one_line(capsys)
    assert line.startswith(f"{path}: {problem}") and "built elsewhere" in line, line
    assert not list((tmp_path / "results").glob("*/samples/*"))


def test_a_damaged_manifest_beside_a_kernel_image_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = commands(tmp_path)["run"]
    manifest = Path(run[2]).parent / "manifest.json"
    manifest.write_text('{"arch": "x86')
    assert cli.main([*run, "--scenario", "smoke"]) == EXIT_INFRA
    line = one_line(capsys)
    assert line.startswith(f"{manifest}: truncated or not JSON") and "built elsewhere" in line


def _set(doc: Any, path: str, value: object) -> None:
    """Set (or, with DELETE, delete) the field at a dotted path; a number is an index."""
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    for p in parents:
        doc = doc[p]
    if value is DELETE:
        del doc[last]
    else:
        doc[last] = value


DELETE = object()
POSTERIOR, GIT = "demo-bisect-posterior", "demo-bisect"


@pytest.mark.parametrize(
    ("name", "field", "value", "problem"),
    [
        # the revisions tested (table, plots)
        (POSTERIOR, "revisions.0.tps.1", None, "$.revisions[0].tps[1]: must be number, got null"),
        (POSTERIOR, "revisions.0.tps", DELETE, "$.revisions[0].tps: is missing"),
        (GIT, "revisions.1.failures", [1], "$.revisions[1].failures[0]: must be string"),
        (GIT, "revisions.0.n", -1, "$.revisions[0].n: must be >= 0, got -1"),
        (POSTERIOR, "revisions.2.p_bad", DELETE, "$.revisions[2].p_bad: is missing"),
        (GIT, "revisions.0.mean", math.nan, "$.revisions[0].mean: must be a finite number"),
        # every sample in time order (tps-time.png, the posterior's table)
        (POSTERIOR, "samples.5.tps", DELETE, "$.samples[5].tps: is missing"),
        (POSTERIOR, "samples.0.t", math.inf, "$.samples[0].t: must be a finite number"),
        (POSTERIOR, "samples.3.role", 7, "$.samples[3].role: must be string, got 7"),
        # the re-check
        (GIT, "recheck.parent_tps", [], "$.recheck.parent_tps: must have at least 1 items"),
        (GIT, "recheck.ratio", DELETE, "$.recheck.ratio: is missing"),
        (POSTERIOR, "recheck.level", DELETE, "$.recheck.level: is missing"),
        (GIT, "recheck.confirmed", "yes", '$.recheck.confirmed: must be boolean, got "yes"'),
        # the answer and its candidates
        (GIT, "first_bad", {}, "$.first_bad.commit: is missing"),
        (GIT, "candidates.0.subject", 3, "$.candidates[0].subject: must be string, got 3"),
        (POSTERIOR, "answer.kind", "x", '$.answer.kind: must be one of "culprit"'),
        (POSTERIOR, "candidates", [], "$.candidates: must have at least 1 items"),
        (POSTERIOR, "first_stop.p", 2, "$.first_stop.p: must be <= 1.000001, got 2"),
        # the options and settings the page shows
        (GIT, "options.configs", "x", '$.options.configs: must be array, got "x"'),
        (GIT, "options.runs_max", DELETE, "$.options.runs_max: is missing"),
        (POSTERIOR, "options.confidence", None, "$.options.confidence: must be number"),
        (GIT, "threshold", None, "$.threshold: must be number, got null"),
        (GIT, "bisect_log", DELETE, "$.bisect_log: is missing"),
        (POSTERIOR, "boots", -3, "$.boots: must be >= 0, got -3"),
        (POSTERIOR, "method", "gitt", '$.method: must be "posterior", got "gitt"'),
        (GIT, "good", "../x", '$.good: must match ^[0-9a-f]{7,64}$, got "../x"'),
        # drift, disturbed samples
        (POSTERIOR, "drift.trend.p", "low", '$.drift.trend.p: must be number, got "low"'),
        (POSTERIOR, "drift.warning", 1, "$.drift.warning: must be string or null, got 1"),
        (POSTERIOR, "disturbed", [{"sample": 1}], "$.disturbed[0].of: is missing"),
        # the posterior's trail (posterior.png), and what a schema cannot say
        (POSTERIOR, "trail.0.p_names", [], "$.trail[0].p_names: 0 entries for 1 trail_names"),
        (POSTERIOR, "trail", [], "$.trail: 0 entries for 17 samples with a tps"),
        (POSTERIOR, "trail.1.top", None, "$.trail[1].top: must be string, got null"),
    ],
)
@pytest.mark.parametrize("fmt", ["markdown", "text"])
def test_a_damaged_field_of_a_bisect_summary_exits_3_naming_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    field: str,
    value: object,
    problem: str,
    fmt: str,
) -> None:
    run = example(tmp_path, name)
    data = json.loads((run / "summary.json").read_text())
    _set(data, field, value)
    (run / "summary.json").write_text(json.dumps(data))
    before = (run / "report.md").read_bytes()
    assert cli.main(["report", str(run), "--format", fmt]) == EXIT_INFRA
    line = one_line(capsys)
    assert line.startswith(f"{run}/summary.json: not a valid bisect-summary: {problem}"), line
    assert line.endswith(f"; {bisect_files.recover(run)}")
    assert (run / "report.md").read_bytes() == before  # nothing rendered


def test_the_recovery_of_a_bisect_summary_says_what_the_run_allows(tmp_path: Path) -> None:
    with_state, without = example(tmp_path, POSTERIOR), example(tmp_path, GIT)
    assert bisect_files.recover(with_state) == (
        f"remove {with_state}/report.md and run kbisect bisect --resume {with_state}: it "
        "writes summary.json again from state.json and the stored samples"
    )
    assert bisect_files.recover(without) == (
        "restore it from a copy: the run has no state.json to write it again from"
    )


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [
        (GIT, "recheck", {"confirmed": False, "error": "boot failed"}),
        (POSTERIOR, "recheck", {"confirmed": False, "error": "the budget ended"}),
        (GIT, "first_bad", None),
        (POSTERIOR, "drift", DELETE),
        (POSTERIOR, "disturbed", None),
        (POSTERIOR, "first_stop", None),
        (POSTERIOR, "threshold", None),
        (GIT, "kind", "bisect-summary"),
        (POSTERIOR, "samples.0.tps", None),
    ],
)
def test_a_bisect_summary_with_an_optional_field_left_out_renders(
    tmp_path: Path, name: str, field: str, value: object
) -> None:
    run = example(tmp_path, name)
    data = json.loads((run / "summary.json").read_text())
    _set(data, field, value)
    if field == "samples.0.tps":  # a failed boot: no trail entry after it
        data["trail"] = data["trail"][1:]
    (run / "summary.json").write_text(json.dumps(data))
    assert cli.main(["report", str(run)]) == 0
    assert cli.main(["report", str(run), "--format", "text"]) == 0


@pytest.mark.parametrize(
    ("file", "field", "value", "problem"),
    [
        # the kernels, the axes and their cells (tables, interactions, figures)
        ("study.json", "kernels", [], "kernels must have at least 1 item(s), got 0"),
        ("study.json", "kernels.1.label", None, "kernels[1].label must be a string, got null"),
        ("study.json", "kernels.0.rev", 7, "kernels[0].rev must be a string, got 7"),
        ("study.json", "cells.0.set.0", 10**30, "cells[0].set must be a list of strings"),
        ("study.json", "cells.1.values", DELETE, "cells[1].values is missing"),
        ("study.json", "cells.1.append", None, "cells[1].append must be a string, got null"),
        ("study.json", "cells.0.values.pgbench.clients", "9", "cells are not the 2 combinations"),
        ("study.json", "cells", [], "cells must have at least 1 item(s), got 0"),
        ("study.json", "axes.0.name", [], "axes[0].name must be a string, got []"),
        ("study.json", "axes.0.levels.1.label", DELETE, "axes[0].levels[1].label is missing"),
        ("study.json", "axes.0.levels", [], "axes[0].levels must have at least 1 item(s)"),
        # the settings the report and a resume read
        ("study.json", "boots", "3", 'boots must be an integer, got "3"'),
        ("study.json", "append", DELETE, "append is missing"),
        ("study.json", "baseline", 3, "baseline must be 0 to 2, got 3"),
        ("study.json", "scenario.hash", None, "scenario.hash must be a string, got null"),
        ("study.json", "scenario.source", DELETE, "scenario.source is missing"),
        ("study.json", "machine", "x", 'machine must be a table, got "x"'),
        ("study.json", "sets", [1], "sets must be a list of strings, got [1]"),
        ("study.json", "description", 1.5, "description must be a string, got 1.5"),
        # the schedule: every slot a kernel and a cell there are
        ("schedule.json", "slots.0.kernel", 3, "slots[0].kernel must be 0 to 2, got 3"),
        ("schedule.json", "slots.2.cell", "0", 'slots[2].cell must be an integer, got "0"'),
        ("schedule.json", "slots.1.block", DELETE, "slots[1].block is missing"),
        ("schedule.json", "slots", {}, "slots must be a list, got {}"),
    ],
)
@pytest.mark.parametrize("argv", [["report"], ["study", "--resume"]])
def test_a_damaged_field_of_a_stored_study_exits_3_naming_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    file: str,
    field: str,
    value: object,
    problem: str,
    argv: list[str],
) -> None:
    run = example(tmp_path, "demo-study")
    data = json.loads((run / file).read_text())
    if field.startswith("cells.0.values."):  # a key with a dot in it
        data["cells"][0]["values"]["pgbench.clients"] = value
    else:
        _set(data, field, value)
    (run / file).write_text(json.dumps(data))
    if argv == ["report"] and file == "schedule.json":
        argv = ["study", "--resume"]  # a report reads no schedule
    assert cli.main([*argv, str(run)]) == EXIT_INFRA
    line = one_line(capsys)
    assert line.startswith(f"{run}/{file}: {problem}"), line
    assert line.endswith(f"; {store.RECOVER}")


@pytest.mark.parametrize("key", ["state", "kill_pid_file"])
def test_a_fake_target_path_that_is_relative_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    """The fake target writes its call log where `state` says: a relative path would land
    in whatever directory kbisect was started from."""
    run = commands(tmp_path)["run"][:3]
    target = fake_target(tmp_path / "odd", **{key: "x"})
    argv = [*run, "--scenario", "smoke", "--target", str(target)]
    assert cli.main(argv) == EXIT_USER
    assert one_line(capsys).endswith(f"{key} must be an absolute path, got 'x'")
    assert not (Path.cwd() / "x").exists()


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"tag": {"x": 1}}, "entries[0].tag must be a string"),
        ({"tag": "v7.2-rc1", "tps_mean": "fast"}, "entries[0].tps_mean must be a number"),
        ({"tag": "v7.2-rc1", "commit": 7}, "entries[0].commit must be a string"),
    ],
)
def test_a_damaged_rc_history_entry_is_left_out_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: dict[str, Any], field: str
) -> None:
    """One damaged entry costs only itself: named in a warning line, with the
    command that drops it, the file left as it was."""
    history = tmp_path / "history"
    history.mkdir()
    doc = {"version": 1, "kind": "rc-history", "entries": [entry]}
    (history / "history.json").write_text(json.dumps(doc))
    before = (history / "history.json").read_bytes()
    repo = tmp_path / "linux"
    make_fake_kernel_repo(repo, [{"subject": "one"}])
    assert cli.main(["rc", "next", "--tree", str(repo), "--history", str(history)]) == EXIT_USER
    warned, refused = capsys.readouterr().err.strip().splitlines()
    assert field in warned and warned.endswith("`kbisect rc repair` drops it for good"), warned
    assert "no kernel version tags" in refused  # the tree's own answer, the entry aside
    assert (history / "history.json").read_bytes() == before
