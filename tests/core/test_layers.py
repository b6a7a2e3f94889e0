"""The layering of kbisect/, read from the code's own imports (ast), so that it cannot rot.

The packages follow the data, from the ground up; an import may point down this list or
stay inside its own package, never up, and no module may take part in a cycle. Nothing
hides an import from the interpreter (no import inside a function, no TYPE_CHECKING
block), nothing re-exports a name (`import X as X`), and no engine knows the command line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "kbisect"

# The stages, from the ground up: a package may import only those before it (and itself).
STAGES = (
    "core",
    "stats",
    "source",
    "kernel",
    "scenario",
    "pgbuild",
    "targets",
    "db",
    "measure",
    "report",
    "history",
    "compare",
    "bisect",
    "study",
    "doctor",
    "simulate",
    "commands",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> list[str]:
    """The kbisect modules an import statement loads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("kbisect")]
    if node.level or not node.module or not node.module.startswith("kbisect"):
        return []
    found = []
    for a in node.names:
        sub = f"{node.module}.{a.name}"
        found.append(sub if sub in known else node.module)
    return found


def imports(path: Path, known: dict[str, Path]) -> list[tuple[str, ast.stmt, bool]]:
    """(module imported, the statement, whether it sits at the top level)."""
    tree = ast.parse(path.read_text(), str(path))
    top = set(map(id, tree.body))
    out: list[tuple[str, ast.stmt, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.extend((t, node, id(node) in top) for t in _targets(node, known))
    return out


def stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: {t for t, _, _ in imports(p, known) if t in known} for m, p in known.items()}


def test_every_package_is_a_stage() -> None:
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages == set(STAGES)
    loose = sorted(
        p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert loose == [], f"modules outside the stage packages: {loose}"
    text = (ROOT.parent / "docs" / "architecture.md").read_text()
    listed = re.search(r"\n    (core < .*?< commands)\n", text, re.S)
    assert listed is not None and tuple(listed[1].split()[::2]) == STAGES  # the docs' list


def test_imports_point_down_the_stages() -> None:
    up = []
    for module, targets in graph().items():
        here = stage(module)
        for t in targets:
            there = stage(t)
            if here and there and STAGES.index(there) > STAGES.index(here):
                up.append(f"{module} -> {t}")
    assert up == [], "imports up the stages:\n" + "\n".join(sorted(up))


def test_no_module_is_in_a_cycle() -> None:
    g = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in g[v]:
                cycles.append(sorted(group))

    for v in sorted(g):
        if v not in index:
            visit(v)
    assert cycles == [], f"import cycles: {cycles}"


def test_no_hidden_or_re_exported_import() -> None:
    known = modules()
    problems = []
    for module, path in known.items():
        for target, node, at_top in imports(path, known):
            if not at_top:
                problems.append(f"{module}: imports {target} inside a block (line {node.lineno})")
            if isinstance(node, ast.ImportFrom) and any(a.asname == a.name for a in node.names):
                problems.append(f"{module}: re-exports a name from {target} (line {node.lineno})")
        text = path.read_text()
        if "TYPE_CHECKING" in text:
            problems.append(f"{module}: a TYPE_CHECKING block hides an import")
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(
    "module", sorted(m for m in modules() if stage(m) not in (None, "commands"))
)
def test_no_engine_knows_the_command_line(module: str) -> None:
    path = modules()[module]
    if module == "kbisect.targets.fake.guest":  # a standalone script with its own argv
        return
    names = {t for t, _, _ in imports(path, modules())}
    assert not any(n.startswith("kbisect.commands") for n in names), f"{module} imports commands"
    assert "argparse" not in {
        a.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import)
        for a in node.names
    }, f"{module} imports argparse"
