"""A study kernel with patches: `REV + FILE` is the revision with the patch applied (a
kernel of its own beside the revision), named in the report; a patch that does not
apply is one line, exit 2, before any build."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.core.exceptions import EXIT_USER
from tests.study.test_cli import fake_target, history, kbisect, run_dir


def argv(repo: Path, kernels: str) -> list[str]:
    where = ["study", "--tree", str(repo), "--kernels", kernels, "--scenario", "smoke"]
    return [*where, "--axis", "pgbench.clients=2", "--target", "fakey", "--boots", "3"]


def test_a_patched_kernel_beside_its_release(
    isolated_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = history(tmp_path)
    fake_target(isolated_env, cv=0.01)
    fix = tmp_path / "fast.diff"
    fix.write_text("--- a/TPS\n+++ b/TPS\n@@ -1 +1 @@\n-600\n+1000\n")
    assert kbisect(*argv(repo, f"v6.3,v6.3 + {fix}")) == 0
    report = (run_dir(tmp_path / "results") / "report.md").read_text()
    assert f'- `v6.3 + {fix}`: fast.diff ("Apply fast.diff", sha256 ' in report
    stale = tmp_path / "stale.diff"
    stale.write_text("--- a/TPS\n+++ b/TPS\n@@ -1 +1 @@\n-1\n+2\n")
    capsys.readouterr()
    assert kbisect(*argv(repo, f"v6.3,v6.3 + {stale}")) == EXIT_USER
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[kbisect")]
    assert len(err) == 1 and "stale.diff: does not apply" in err[0], err
