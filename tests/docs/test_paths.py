"""The documentation names the code as it is: every module path, `kbisect/...` path and
dotted `kbisect.x.y` name in the READMEs and docs/*.md exists, and nothing there (or in
the code, scripts and help text) refers to a tracker's issue number instead of saying what
the thing is.

docs/examples/ is left out: its reports are stored runs, re-rendered byte for byte.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {"__pycache__", "results"}  # and hidden dirs but .github and .ci
SHOWN = {".github", ".ci"}


# A .py path: anything before it but another path character.
PY_PATH = re.compile(r"(?<![\w./~$-])((?:[\w.-]+/)*[\w-]+\.py)\b")
# A path inside the package, of any kind (a folder, data, a glob), but not one in a
# cache or config dir (~/.cache/kbisect/..., $cache/kbisect/...).
PKG_PATH = re.compile(r"(?<![\w./~$-])(kbisect/[\w.*/-]*[\w*/])")
# A dotted module name; `kbisect.boot=` is a kernel command-line parameter.
DOTTED = re.compile(r"(?<![\w./-])(kbisect(?:\.\w+)+)(?![\w=])")
ISSUE = re.compile(r"\b[Ii]ssues? ?#?\d{1,2}(?:, ?\d{1,2}|/\d{1,2})*\b")


def walk(top: Path) -> list[Path]:
    found = []
    for path in sorted(top.iterdir()):
        hidden = path.name.startswith(".") and path.name not in SHOWN
        if path.is_dir() and (hidden or path.name in SKIP_DIRS or path.suffix == ".egg-info"):
            continue
        found.extend(walk(path) if path.is_dir() else [path])
    return found


FILES = walk(CHECKOUT)
RELATIVE = [p.relative_to(CHECKOUT).as_posix() for p in FILES]


def docs() -> list[str]:
    """README.md, every folder's README, docs/*.md; not docs/examples/."""
    return [
        r
        for r in RELATIVE
        if (r.endswith("README.md") or r.endswith("/README") or re.fullmatch(r"docs/[^/]+\.md", r))
        and not r.startswith("docs/examples/")
    ]


def py_path_exists(path: str) -> bool:
    """At the checkout's root, or the tail of one (`targets/console.py`, `proc.py`)."""
    return path in RELATIVE or any(r.endswith("/" + path) for r in RELATIVE)


def defines(module: Path, name: str) -> bool:
    """Whether a module's top level binds a name (def, class, assignment, import)."""
    bound: set[str] = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update(a.asname or a.name.split(".")[0] for a in node.names)
    return name in bound


def dotted_exists(name: str) -> bool:
    """`kbisect.a.b[.attr]`: a module of the package, optionally one name it defines."""
    parts = name.split(".")
    where = CHECKOUT / parts[0]
    for i, part in enumerate(parts[1:], 1):
        if (where / part).is_dir():
            where = where / part
        elif (where / f"{part}.py").is_file():
            rest = parts[i + 1 :]
            return len(rest) <= 1 and (not rest or defines(where / f"{part}.py", rest[0]))
        else:
            init = where / "__init__.py"
            return i > 1 and len(parts) == i + 1 and init.is_file() and defines(init, part)
    return len(parts) > 1


def stale(doc: str) -> list[str]:
    problems = []
    for n, line in enumerate((CHECKOUT / doc).read_text().splitlines(), 1):
        for path in PY_PATH.findall(line):
            if not py_path_exists(path):
                problems.append(f"{doc}:{n}: {path}")
        for path in PKG_PATH.findall(line):
            path = path.rstrip("/")
            if not list(CHECKOUT.glob(path)):
                problems.append(f"{doc}:{n}: {path}")
        for name in DOTTED.findall(line):
            if not dotted_exists(name):
                problems.append(f"{doc}:{n}: {name}")
    return sorted(set(problems))


@pytest.mark.parametrize("doc", docs())
def test_every_path_named_exists(doc: str) -> None:
    assert stale(doc) == []


def test_the_checks_see_stale_names() -> None:
    assert py_path_exists("kbisect/core/proc.py") and py_path_exists("targets/console.py")
    assert py_path_exists("proc.py") and not py_path_exists("kbisect/proc.py")
    assert not py_path_exists("bisect/step.py")
    assert dotted_exists("kbisect.core.proc") and dotted_exists("kbisect.core.proc.run")
    assert dotted_exists("kbisect.stats") and dotted_exists("kbisect.commands.cli.main")
    assert not dotted_exists("kbisect.runner") and not dotted_exists("kbisect.sequential")
    assert not dotted_exists("kbisect.core.proc.no_such_name")
    assert PKG_PATH.findall("~/.cache/kbisect/trees and kbisect/core/arch/*.toml") == [
        "kbisect/core/arch/*.toml"
    ]
    assert DOTTED.findall("kbisect.boot=<id> kbisect.core.lock") == ["kbisect.core.lock"]
    assert ISSUE.findall("(issue 19), issues 18/19, Issue #7, tissue 3, issues") == [
        "issue 19",
        "issues 18/19",
        "Issue #7",
    ]


def written() -> list[str]:
    """Docs, code, tests, scripts and workflows: text files a person writes."""
    return [
        r
        for r, p in zip(RELATIVE, FILES, strict=True)
        if not r.startswith(("docs/examples/", "tests/data/"))
        and p.suffix not in {".png", ".json", ".raw", ".gz", ".xz"}
        and r != "tests/docs/test_paths.py"
    ]


def test_no_issue_numbers() -> None:
    found = []
    for rel in written():
        try:
            text = (CHECKOUT / rel).read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            found += [f"{rel}:{n}: {m}" for m in ISSUE.findall(line)]
    assert found == []
