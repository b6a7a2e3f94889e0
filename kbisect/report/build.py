"""The build a text report and a mail name: the kernel tree, the compiler, the kconfig
hash, the base config and the fragments, as each sample carries its build's manifest
(`kernel.manifest`, kbisect/kernel/manifest.py); what the kernel test robot's mails say
under "compiler:" and "config:"."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from kbisect.measure.record import Sample
from kbisect.report.text import para

FIELDS = ("tree", "compiler", "kconfig", "fragments")


def tree_name(path: str | None) -> str | None:
    """A tree's name from its path: `linux-6.12-debian` for the cache's
    `trees/linux-6.12-debian` and for a bisection's worktree of it
    (`worktrees/linux-6.12-debian-f7c9fd89/bisect`); the folder's name otherwise."""
    if not path:
        return None
    p = Path(path)
    if p.parent.parent.name == "worktrees":
        return re.sub(r"-[0-9a-f]{8}$", "", p.parent.name)
    return p.name


def facts(samples: Sequence[Sample]) -> dict[str, str]:
    """tree, compiler, kconfig (hash and base), fragments of the first sample with a
    manifest; {} when none has one."""
    m = next((s.manifest for s in samples if s.manifest), {})
    if not m:
        return {}
    fragments = [str(f.get("name")) for f in m.get("fragments") or [] if isinstance(f, Mapping)]
    digest = str(m.get("config_hash") or "?")[:12]
    return {
        "tree": tree_name(m.get("tree")) or "?",
        "compiler": str(m.get("compiler") or "?"),
        "kconfig": f"sha256 {digest}, from {m.get('base') or '?'}",
        "fragments": ", ".join(fragments) or "none",
    }


def lines(by_side: Mapping[str, Sequence[Sample]], fields: Sequence[str] = FIELDS) -> list[str]:
    """Each of `fields` once when every side with samples agrees, else one line per side."""
    known = {side: f for side, samples in by_side.items() if (f := facts(samples))}
    if not known:
        return ["  (no build manifest with this report's samples)"]
    out: list[str] = []
    for field in fields:
        values = {side: f[field] for side, f in known.items()}
        if len(set(values.values())) == 1:
            out += para(f"{field}: {next(iter(values.values()))}", "  ", "  ")
            continue
        out.append(f"  {field}:")
        for side, value in values.items():
            out += para(f"{side}: {value}", "    ", "  ")
    return out
