"""The profiles of a compare's sides (the scenario's [profile], docs/profiles.md): each
side's top symbols by self share, averaged over its profiled boots, the difference table
(symbol, A %, B %, B - A in points, by the size of the difference) and a flame graph per
side (flame.py) from the boot dirs' profile.folded. Read from the stored samples, so
`kbisect report` renders them again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kbisect.core import atomic
from kbisect.measure.record import Sample
from kbisect.report import flame

SHOWN = 15  # rows of each table in a report
FLAME = "profile-{side}.svg"


@dataclass(frozen=True)
class SideProfile:
    """A side's profiled boots: their count, perf's samples, each symbol's mean self %
    (0 in a boot whose top list lacks it) and the profiled runs' tps (never counted)."""

    boots: int
    samples: int
    self_pct: dict[str, float]
    tps: list[float]
    event: str
    frequency: int
    seconds: int


def profiled(samples: Sequence[Sample]) -> list[Sample]:
    return [s for s in samples if s.status in ("ok", "disturbed") and s.profile]


def shares(run_dir: Path | None, sample: Sample) -> dict[str, float]:
    """A profiled boot's self % by leaf symbol: every symbol from its profile.folded when
    the boot dir keeps it, else the top list the sample carries (a symbol outside it
    counts 0 there, which can make a small difference look like one)."""
    stacks = boot_stacks(run_dir, sample) if run_dir else {}
    total = sum(stacks.values())
    if not total:
        return {row["symbol"]: float(row["self_pct"]) for row in sample.profile["top"]}
    leaves: dict[str, int] = {}
    for stack, count in stacks.items():
        leaf = stack.rsplit(";", 1)[-1]
        leaves[leaf] = leaves.get(leaf, 0) + count
    return {leaf: 100.0 * n / total for leaf, n in leaves.items()}


def side(samples: Sequence[Sample], run_dir: Path | None = None) -> SideProfile | None:
    """The profile of one side's samples, None when none of them was profiled; each
    boot's shares from its stacks when `run_dir` holds them (`shares`)."""
    boots = profiled(samples)
    if not boots:
        return None
    sums: dict[str, float] = {}
    for s in boots:
        for symbol, pct in shares(run_dir, s).items():
            sums[symbol] = sums.get(symbol, 0.0) + pct
    first = boots[0].profile
    return SideProfile(
        boots=len(boots),
        samples=sum(int(s.profile["samples"]) for s in boots),
        self_pct={k: v / len(boots) for k, v in sums.items()},
        tps=[float(t) for s in boots if (t := (s.profile.get("run") or {}).get("tps"))],
        event=str(first["event"]),
        frequency=int(first["frequency"]),
        seconds=int(first["seconds"]),
    )


def top(p: SideProfile, limit: int = SHOWN) -> list[tuple[str, float]]:
    """The side's symbols by mean self %, largest first (ties by name)."""
    return sorted(p.self_pct.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


def difference(
    a: SideProfile, b: SideProfile, limit: int = SHOWN
) -> list[tuple[str, float, float, float]]:
    """(symbol, A %, B %, B - A points), largest |B - A| first (ties by name)."""
    rows = [
        (name, a.self_pct.get(name, 0.0), b.self_pct.get(name, 0.0))
        for name in sorted({*a.self_pct, *b.self_pct})
    ]
    diffs = [(name, pa, pb, pb - pa) for name, pa, pb in rows]
    return sorted(diffs, key=lambda r: (-abs(r[3]), r[0]))[:limit]


def boot_dir(run_dir: Path | None, sample: Sample) -> Path:
    """A sample's boot dir: where it was written, else the run dir's boots/ of that
    name (a run moved or copied, as the docs' examples are)."""
    recorded = Path(sample.boot_dir or "")
    if recorded.is_dir() or run_dir is None:
        return recorded
    return run_dir / "boots" / recorded.name


def boot_stacks(run_dir: Path | None, sample: Sample) -> dict[str, int]:
    """A profiled boot's stacks from its profile.folded; {} when the boot dir lacks it."""
    path = boot_dir(run_dir, sample) / str(sample.profile.get("folded") or "profile.folded")
    return flame.parse(path.read_text(errors="replace")) if path.is_file() else {}


def folded(run_dir: Path, samples: Sequence[Sample]) -> dict[str, int]:
    """The side's stacks, summed over its profiled boots whose profile.folded is kept."""
    stacks: dict[str, int] = {}
    for s in profiled(samples):
        for stack, count in boot_stacks(run_dir, s).items():
            stacks[stack] = stacks.get(stack, 0) + count
    return stacks


def flames(run_dir: Path, sides: Mapping[str, Sequence[Sample]]) -> dict[str, str]:
    """Write a flame graph per side that has stacks; {side: file name}."""
    written = {}
    for name, samples in sides.items():
        stacks = folded(run_dir, samples)
        if stacks:
            file = FLAME.format(side=name)
            title = f"side {name}: {sum(stacks.values())} samples"
            atomic.write_text(run_dir / file, flame.render(stacks, title))
            written[name] = file
    return written


def _pct(value: float) -> str:
    return f"{value:.1f}%"


def _what(p: SideProfile) -> str:
    tps = ", ".join(f"{t:,.1f}" for t in p.tps) or "—"
    return (
        f"{p.boots} boot(s), {p.samples} samples of {p.event} at {p.frequency} Hz for "
        f"{p.seconds} s; profiled runs' tps (not counted): {tps}"
    )


def markdown(
    run_dir: Path, sides: Mapping[str, Sequence[Sample]], names: Mapping[str, str]
) -> list[str]:
    """The report's Profiles section (and the flame graphs it links); [] when no boot
    was profiled."""
    found = {x: p for x, samples in sides.items() if (p := side(samples, run_dir)) is not None}
    if not found:
        return []
    out = ["## Profiles", "", "perf in the guest during one extra run of a profiled boot.", ""]
    for x, p in found.items():
        out += [f"- {x} ({names.get(x, x)}): {_what(p)}"]
    out.append("")
    if len(found) == 2:
        a, b = found.values()
        out += [
            "Self % by symbol (every symbol, from each boot's stacks), mean of each side's "
            "profiled boots, largest change first:",
            "",
            "| symbol | A % | B % | B − A (points) |",
            "|---|---:|---:|---:|",
        ]
        for name, pa, pb, d in difference(a, b):
            out.append(f"| `{_cell(name)}` | {_pct(pa)} | {_pct(pb)} | {d:+.1f} |")
        out.append("")
    for x, p in found.items():
        out += [f"Top symbols of {x} (self %):", "", "| symbol | self % |", "|---|---:|"]
        out += [f"| `{_cell(name)}` | {_pct(v)} |" for name, v in top(p)]
        out.append("")
    for x, file in flames(run_dir, sides).items():
        out += [f"![flame graph of {x}]({file})", ""]
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def text(
    sides: Mapping[str, Sequence[Sample]], width: int = 72, run_dir: Path | None = None
) -> list[str]:
    """The difference table (or one side's top symbols) in `width` columns; [] when no
    boot was profiled."""
    found = {x: p for x, samples in sides.items() if (p := side(samples, run_dir)) is not None}
    if not found:
        return []
    sym_w = width - 27
    out = ["profile (self %, perf in an extra run of the profiled boots):"]
    if len(found) == 2:
        a, b = found.values()
        out.append(f"  {'symbol':<{sym_w}} {'A %':>7} {'B %':>7} {'B-A':>7}")
        for name, pa, pb, d in difference(a, b, 10):
            out.append(f"  {_clip(name, sym_w):<{sym_w}} {pa:>7.1f} {pb:>7.1f} {d:>+7.1f}")
        return out
    for x, p in found.items():
        out += [f"  {x}:"] + [f"  {_clip(n, sym_w):<{sym_w}} {v:>7.1f}" for n, v in top(p, 10)]
    return out


def _clip(name: str, width: int) -> str:
    return name if len(name) <= width else name[: width - 2] + ".."
