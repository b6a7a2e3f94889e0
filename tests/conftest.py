"""Shared fixtures. Every test gets its own HOME, XDG dirs and git identity."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The real cache (kernel trees, build dirs) survives the isolation below, so the real
# tests can reuse a tree and ccache across runs; unit tests never touch it.
REAL_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kbisect"
REAL_CCACHE = Path(os.environ.get("CCACHE_DIR") or Path.home() / ".cache" / "ccache")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    for sub in ("", ".config", ".cache", ".local/share"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.setenv("KBISECT_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("KBISECT_CACHE", raising=False)
    monkeypatch.setenv("CCACHE_DIR", str(REAL_CCACHE))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(var, raising=False)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = kbisect test\n\temail = test@kbisect.invalid\n"
        "[init]\n\tdefaultBranch = main\n"
    )
    return home


@pytest.fixture
def real_cache(monkeypatch: pytest.MonkeyPatch) -> Path:
    """For tests that use real kernel trees and builds: the user's real kbisect cache."""
    monkeypatch.setenv("KBISECT_CACHE", str(REAL_CACHE))
    REAL_CACHE.mkdir(parents=True, exist_ok=True)
    return REAL_CACHE


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Where the fault-injection suite (tests/faults/test_faults.py) left its figures."""
    from tests.faults import procs

    for line in procs.SUMMARY:
        terminalreporter.write_line(line)
