"""Compare guest fingerprints across the sides of a compare, and across boots of a side.

A fingerprint (docs/architecture.md) records what the guest actually ran with: kernel
release, command line, preemption mode, huge pages, PostgreSQL settings. A difference the
user did not ask for (THP, a clocksource fallback) can explain a tps difference, and a
field that changes from boot to boot within one side makes that side's numbers suspect.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The fields that can move tps, in the order a reader scans them.
FIELDS = (
    "uname_r",
    "cmdline",
    "preempt",
    "hugepages_total",
    "hugepages_free",
    "huge_pages_used",
    "thp",
    "nproc",
    "mem_total_kb",
    "clocksource",
    "pg_version",
)
# Fields the harness records since servers were pinned per scenario: the running server's
# `SELECT version()` and the sha256 of the binary that ran (older fingerprints lack them).
LATER_FIELDS = ("pg_server", "pg_binary_sha256")
PG_PREFIX = "pg_settings."
# Where PGDATA lived (harness/storage.py): compared like the fields above. The fio
# figures vary from boot to boot; fiodiff.py compares them with a noise margin.
STORAGE_FIELDS = (
    "kind",
    "fs",
    "device",
    "mount_options",
    "backing",
    "size_gb",
    "cache",
    "throttle_iops",
)
STORAGE_PREFIX = "storage."
MISSING = "—"


@dataclass(frozen=True)
class Row:
    """One fingerprint field: the distinct values each side saw, in boot order."""

    field: str
    values: dict[str, tuple[str, ...]]
    differs: bool  # the sides saw different values
    varies: tuple[str, ...]  # the sides whose boots disagree among themselves


def show(value: Any) -> str:
    """A fingerprint value as one short string."""
    if value is None:
        return MISSING
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def kernel_cmdline(cmdline: str | None) -> str | None:
    """The command line without virtme-ng's own per-boot tokens (virtme_*, virtme.exec,
    init=, and the init's random path, /virtme-init-XXXXXXXX, which newer virtme-ng passes
    as an argument) and a machine's boot nonce (kbisect.boot=): they differ between any
    two boots."""
    if cmdline is None:
        return None
    own = ("virtme", "/virtme-init-", "init=/", "kbisect.boot=")
    return " ".join(t for t in cmdline.split() if not t.startswith(own))


def flatten(fp: Mapping[str, Any]) -> dict[str, str]:
    """The fields of FIELDS plus every PostgreSQL setting, as strings."""
    flat = {name: show(fp.get(name)) for name in FIELDS}
    flat.update({name: show(fp[name]) for name in LATER_FIELDS if name in fp})
    flat["cmdline"] = show(kernel_cmdline(fp.get("cmdline")))
    settings = fp.get("pg_settings") or {}
    for key in sorted(settings):
        flat[PG_PREFIX + key] = show(settings[key])
    storage = fp.get("storage")
    if isinstance(storage, Mapping):  # fingerprints from before [storage] have none
        for key in STORAGE_FIELDS:
            flat[STORAGE_PREFIX + key] = show(storage.get(key))
    return flat


def _distinct(values: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def diff(sides: Mapping[str, list[Mapping[str, Any]]]) -> list[Row]:
    """One row per field, comparing each side's fingerprints with the others' and its own.

    Empty fingerprints (a boot that never reached the harness) are ignored. A field that
    only some fingerprints carry counts as a difference: MISSING is a value like any other.
    """
    flat = {s: [flatten(fp) for fp in fps if fp] for s, fps in sides.items()}
    names = [*FIELDS, *(n for n in LATER_FIELDS if any(n in fp for f in flat.values() for fp in f))]
    for fps in flat.values():
        names += sorted({k for fp in fps for k in fp if k not in names})
    rows = []
    for name in names:
        values = {s: _distinct([fp.get(name, MISSING) for fp in fps]) for s, fps in flat.items()}
        seen = [set(v) for v in values.values() if v]
        differs = any(v != seen[0] for v in seen[1:])
        varies = tuple(s for s, v in values.items() if len(v) > 1)
        rows.append(Row(name, values, differs, varies))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(row: Row, side: str) -> str:
    text = _cell(" / ".join(row.values.get(side, ())) or MISSING)
    text = f"**{text}**" if row.differs else text
    return text + (" ⚠ varies across boots" if side in row.varies else "")


def markdown(rows: list[Row], names: Mapping[str, str]) -> list[str]:
    """Two summary lines, then the fields side by side, differences in bold with ⚠."""
    differ = ", ".join(f"**{r.field}**" for r in rows if r.differs) or "none"
    vary = ", ".join(f"{r.field} ({', '.join(r.varies)})" for r in rows if r.varies) or "none"
    out = [
        f"Differences between the sides: {differ}.",
        f"Varies across boots within a side: {vary}.",
        "",
        "| field | " + " | ".join(f"{s}: {_cell(n)}" for s, n in names.items()) + " |",
        "|---|" + "---|" * len(names),
    ]
    for r in rows:
        field = f"⚠ **{r.field}**" if r.differs else r.field
        out.append(f"| {field} | " + " | ".join(_value(r, s) for s in names) + " |")
    return out
