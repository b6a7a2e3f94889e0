"""`kbisect bisect --patch`: the patch is applied on every revision tested (a debug patch,
a fix carried through), named in the summary and the report; one that does not apply on
an endpoint is one line, exit 2, before any boot; on a revision between, a skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.bisect.git import step
from kbisect.core import arch
from kbisect.core.exceptions import EXIT_USER, BuildError
from kbisect.source import patches
from tests.bisect.test_bisect import args, env, history, kbisect, run_dirs, summary
from tests.fakes import fake_calls, git, make_fake_kernel_repo

__all__ = ["env"]  # the fixture, used by name

NEW_FILE = "--- /dev/null\n+++ b/DEBUG\n@@ -0,0 +1 @@\n+debug on\n"


@pytest.mark.parametrize("method", ["git", "posterior"])
def test_a_debug_patch_goes_on_every_revision(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], method: str
) -> None:
    shas = history(env["repo"], 8, 5)
    debug = env["repo"].parent / "debug.diff"
    debug.write_text(NEW_FILE)
    extra = ["--patch", str(debug), "--recheck-samples", "3"]
    assert kbisect(*args(env, shas[1], shas[-1], *extra, method=method)) == 0
    assert f"first bad commit: {shas[5]}" in capsys.readouterr().out
    booted = {c["commit"] for c in fake_calls(env["log"])}
    assert booted and not booted & set(shas)  # every kernel booted was a patched one
    s = summary(env["results"])
    digest = patches.read(debug).short_hash
    assert s["patches"] == [{"file": "debug.diff", "subject": "Apply debug.diff", "sha256": digest}]
    assert s["options"]["patches"] == [str(debug)]
    assert f"--patch {debug}" in s["command"]
    report = (run_dirs(env["results"])[0] / "report.md").read_text()
    line = f'- patches on every revision: debug.diff ("Apply debug.diff", sha256 {digest})'
    assert line in report.splitlines()


def test_a_patch_that_does_not_apply_on_an_endpoint_exits_2(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    shas = history(env["repo"], 6, 3)
    stale = env["repo"].parent / "stale.diff"
    stale.write_text("--- a/TPS\n+++ b/TPS\n@@ -1 +1 @@\n-123\n+456\n")
    assert kbisect(*args(env, shas[1], shas[-1], "--patch", str(stale))) == EXIT_USER
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[kbisect")]
    assert len(err) == 1 and "stale.diff: does not apply on" in err[0], err
    assert "first failing hunk TPS @@ -1 +1 @@" in err[0]
    assert fake_calls(env["log"]) == [] and run_dirs(env["results"]) == []


def test_a_revision_the_patch_does_not_apply_on_is_a_build_failure(tmp_path: Path) -> None:
    repo = tmp_path / "linux"
    shas = make_fake_kernel_repo(repo, [{"subject": "add DEBUG", "files": {"DEBUG": "x\n"}}])
    debug = tmp_path / "debug.diff"
    debug.write_text(NEW_FILE)
    host = arch.get(arch.host_arch())
    git(repo, "checkout", "-q", shas[0])
    built = step.build_here(repo, host, (), with_patches=(patches.read(debug),))
    assert built.manifest["patches"][0]["file"] == "debug.diff"
    git(repo, "checkout", "-q", shas[1])
    with pytest.raises(BuildError, match=r"debug\.diff: does not apply on"):
        step.build_here(repo, host, (), with_patches=(patches.read(debug),))
