"""Preemption models the tree cannot build for the arch, known from its source before any
build: a fragment's `CONFIG_PREEMPT_NONE=y` on 7.2 is refused here, one line, exit 2.

kernel/Kconfig.preempt makes each model depend on symbols the arch selects: since 7.0
(7dadeaa6e851) PREEMPT_NONE depends on ARCH_NO_PREEMPT and PREEMPT_VOLUNTARY on
!ARCH_HAS_PREEMPT_LAZY, and x86 and arm64 select ARCH_HAS_PREEMPT_LAZY but never
ARCH_NO_PREEMPT. Only `depends on` lines that are a conjunction of plain ARCH_ terms
are judged, against the unconditional selects of the arch's own symbol (`config X86` in
arch/x86/Kconfig); anything else is left to olddefconfig and kconfig.verify (exit 4).
A tree without either file is not judged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kbisect.core.arch import Arch
from kbisect.core.exceptions import CommandFailed, UserError
from kbisect.kernel import kconfig
from kbisect.source import git

PREEMPT_KCONFIG = "kernel/Kconfig.preempt"
_BLOCK = re.compile(r"^(?:menu)?config\s+([A-Za-z0-9_]+)\s*$")
_ENDS = re.compile(r"^(?:choice|endchoice|menu|endmenu|if|endif|source|comment)\b")
_TERM = re.compile(r"(!?)(ARCH_[A-Za-z0-9_]+)")


class ConfigRefused(UserError, kconfig.ConfigDropped):
    """A fragment asks for a symbol the tree's Kconfig rules out on the arch: bad input
    (exit 2, UserError's code) found before any build, and still a dropped symbol, so
    that a bisection skips such a revision as it skips one that does not build."""


@dataclass(frozen=True)
class Refusal:
    symbol: str  # CONFIG_PREEMPT_NONE
    value: str
    fragment: str
    depends: str  # the `depends on` expression that rules it out
    why: str  # "x86 does not select ARCH_NO_PREEMPT"


def attributes(text: str) -> dict[str, list[str]]:
    """Each `config NAME` block's attribute lines (stripped), by NAME; blocks of the same
    name add up."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if m := _BLOCK.match(line):
            current = out.setdefault(m.group(1), [])
        elif _ENDS.match(line) or line.strip() in ("help", "---help---"):
            current = None  # the block's help text is prose, not attributes
        elif current is not None and line.strip():
            current.append(line.strip())
    return out


def depends(text: str, name: str) -> list[str]:
    """The `depends on` expressions of `config NAME` in a Kconfig file's text."""
    lines = attributes(text).get(name, [])
    return [x.removeprefix("depends on").strip() for x in lines if x.startswith("depends on ")]


def selects(text: str, name: str) -> set[str]:
    """The symbols `config NAME` selects without a condition (no `if`)."""
    lines = attributes(text).get(name, [])
    words = [x.split() for x in lines if x.startswith("select ")]
    return {w[1] for w in words if len(w) == 2}


def ruled_out(expression: str, selected: set[str], arch: str) -> str | None:
    """Why `depends on expression` cannot hold on the arch, if its terms are all plain
    (possibly negated) ARCH_ symbols joined by &&; None if it can, or cannot be told."""
    terms = [t.strip() for t in expression.split("&&")]
    found = [m for t in terms if (m := _TERM.fullmatch(t))]
    if len(found) != len(terms):
        return None
    for m in found:
        negated, symbol = bool(m.group(1)), m.group(2)
        if negated and symbol in selected:
            return f"{arch} selects {symbol}"
        if not negated and symbol not in selected:
            return f"{arch} does not select {symbol}"
    return None


def refusals(
    preempt_text: str,
    arch_text: str,
    arch: Arch,
    wanted: Mapping[str, tuple[str, str]],
    allowed: Iterable[str],
) -> list[Refusal]:
    """The symbols set to y (wanted: symbol -> (value, fragment name)) that the
    preemption Kconfig rules out on the arch, but for those `allowed` (--allow-dropped)."""
    selected = selects(arch_text, arch.kernel_arch.upper())
    ok = {kconfig.normalize_symbol(s) for s in allowed}
    out = []
    for symbol, (value, fragment) in wanted.items():
        if value != "y" or symbol in ok:
            continue
        for expression in depends(preempt_text, symbol.removeprefix("CONFIG_")):
            if why := ruled_out(expression, selected, arch.kernel_arch):
                out.append(Refusal(symbol, value, fragment, expression, why))
                break
    return out


def message(refused: list[Refusal], rev: str) -> str:
    """One line for every refusal, then how to accept them."""
    said = "; ".join(
        f"{r.symbol}={r.value} requested by {r.fragment} would be dropped at {rev}: "
        f"{PREEMPT_KCONFIG} makes {r.symbol.removeprefix('CONFIG_')} depend on "
        f"{r.depends} and {r.why}"
        for r in refused
    )
    accept = " ".join(f"--allow-dropped {r.symbol}" for r in refused)
    return f"{said} (use {accept} to build without it)"


def _show(tree: Path, commit: str, path: str) -> str | None:
    try:
        return git.git(tree, "cat-file", "-p", f"{commit}:{path}")
    except CommandFailed:
        return None


def check(
    tree: Path,
    commit: str,
    arch: Arch,
    fragments: list[kconfig.Fragment],
    allowed: Iterable[str],
) -> None:
    """ConfigRefused (exit 2) when a fragment asks for a preemption model the tree at
    `commit` rules out on the arch; nothing when it can be built or cannot be told."""
    preempt_text = _show(tree, commit, PREEMPT_KCONFIG)
    arch_text = _show(tree, commit, f"arch/{arch.kernel_arch}/Kconfig")
    if preempt_text is None or arch_text is None:
        return
    wanted = {s: (v, f.name) for s, (v, f) in kconfig.requested(fragments).items()}
    if refused := refusals(preempt_text, arch_text, arch, wanted, allowed):
        raise ConfigRefused(message(refused, commit[:12]))
