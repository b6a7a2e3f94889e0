"""The preemption model a boot asked for against the one its kernel ran with.

A boot asks for a model on its command line (`preempt=none`, from --append or the
scenario's `guest.append`) or by building with a `--config preempt-X` fragment; the
guest reports the model in effect (harness/fingerprint.py: /sys/kernel/debug/sched/preempt
or the log's "Dynamic Preempt:" line). They can differ without a word from the kernel:
`preempt=` on the command line works only with CONFIG_PREEMPT_DYNAMIC, and since 7.0
(7dadeaa6e851) a kernel with ARCH_HAS_PREEMPT_LAZY (x86_64, arm64) refuses "none" and
"voluntary" and keeps its default. A sample measured so measures another model than asked:
`check()` records both in the sample and `message()` says so, in the run and in every
report. A model in effect that the guest could not read is unknown, never a mismatch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kbisect.measure.record import Sample

MODELS = ("none", "voluntary", "full", "lazy")
DYNAMIC = "CONFIG_PREEMPT_DYNAMIC"
HAS_LAZY = "CONFIG_ARCH_HAS_PREEMPT_LAZY"
REFUSED = ("none", "voluntary")  # what a 7.0+ kernel with ARCH_HAS_PREEMPT_LAZY refuses
_FRAGMENT = re.compile(r"preempt-([a-z]+)\.config")
_SET = re.compile(r"(CONFIG_[A-Za-z0-9_]+)=(.*)")


def from_cmdline(cmdline: Sequence[str]) -> str | None:
    """The model the last `preempt=X` token asks for (None without one)."""
    found = [t.split("=", 1)[1] for t in cmdline if t.startswith("preempt=")]
    return found[-1] if found else None


def from_fragments(names: Sequence[str]) -> str | None:
    """The model the last `preempt-X.config` fragment asks for (kernel-configs/)."""
    found = [m.group(1) for n in names if (m := _FRAGMENT.fullmatch(Path(n).name))]
    return found[-1] if found and found[-1] in MODELS else None


def asked(cmdline: Sequence[str], fragments: Sequence[str] = ()) -> tuple[str, str] | None:
    """(model, how it was asked) or None when the boot asked for none: the command line
    wins over the build's fragment, as it does in a PREEMPT_DYNAMIC kernel."""
    if (model := from_cmdline(cmdline)) is not None:
        return model, f"preempt={model} on the command line"
    if (model := from_fragments(fragments)) is not None:
        return model, f"--config preempt-{model}"
    return None


def read_config(path: Path) -> dict[str, str]:
    """The `CONFIG_X=value` lines of a built .config ({} if it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {}
    return {m.group(1): m.group(2) for line in text.splitlines() if (m := _SET.fullmatch(line))}


def check(
    cmdline: Sequence[str],
    fragments: Sequence[str],
    config: Mapping[str, str],
    fingerprint: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """What a sample stores: the model asked and how, the model in effect and where it
    was read, the build's PREEMPT_DYNAMIC and ARCH_HAS_PREEMPT_LAZY (None when unknown) and
    the kernel release; None when the boot asked for no model or never reached the
    harness (nothing was measured)."""
    wanted = asked(cmdline, fragments)
    if wanted is None or not fingerprint:
        return None
    fp = fingerprint
    return {
        "asked": wanted[0],
        "asked_via": wanted[1],
        "effective": fp.get("preempt"),
        "effective_source": fp.get("preempt_source"),
        "dynamic": _flag(config, DYNAMIC),
        "has_lazy": _flag(config, HAS_LAZY),
        "release": fp.get("uname_r"),
    }


def _flag(config: Mapping[str, str], symbol: str) -> bool | None:
    return None if not config else config.get(symbol) == "y"


def message(who: str, record: Mapping[str, Any] | None) -> str | None:
    """The warning for a sample's check() record, naming `who` (`side A`, a study cell,
    a revision); None when it got what it asked for, or asked for nothing."""
    if not record:
        return None
    want, via, got = record["asked"], record["asked_via"], record.get("effective")
    if got is None:
        return (
            f"{who} asked for preempt {want} ({via}); the model in effect is unknown (no "
            '/sys/kernel/debug/sched/preempt and no "Dynamic Preempt:" line in its log)'
            + _why_not(record, "")
        )
    if got == want:
        return None
    source = record.get("effective_source")
    read = f", read from {source}" if source else ""
    return (
        f"{who} asked for preempt {want} ({via}) but its kernel ran {got}{read}"
        f"{_why_not(record, got)}: its numbers measure {got}, not {want}"
    )


def _why_not(record: Mapping[str, Any], got: str) -> str:
    """Why the kernel did not do as asked, when its build or release tells."""
    want, via = record["asked"], record["asked_via"]
    if via.startswith("preempt=") and record.get("dynamic") is False:
        return " (built without PREEMPT_DYNAMIC: preempt= on the command line is ignored)"
    if want in REFUSED and got in ("full", "lazy") and _refuses(record):
        return (
            f" (since 7.0, 7dadeaa6e851, a kernel with ARCH_HAS_PREEMPT_LAZY refuses {want} "
            "and keeps its default)"
        )
    return ""


def _refuses(record: Mapping[str, Any]) -> bool:
    if record.get("has_lazy") is not None:
        return bool(record["has_lazy"])
    m = re.match(r"(\d+)\.", str(record.get("release") or ""))
    return m is not None and int(m.group(1)) >= 7


def first_warnings(samples: Sequence[Sample], who: Iterable[tuple[str | None, str]]) -> list[str]:
    """One warning per label whose boots did not all get the model they asked for, in
    the order of `who`'s (label, name) pairs: the first such sample's message, naming
    the label as `who` does, with how many boots."""
    out = []
    for label, name in who:
        mine = [s for s in samples if s.label == label]
        said = [m for s in mine if (m := message(name, s.preempt))]
        if said:
            out.append(said[0] + _count(len(said), len(mine)))
    return out


def who(label: str | None) -> str:
    """How a warning names the boots of a label: a compare's side, a study's cell."""
    if label in ("A", "B"):
        return f"side {label}"
    return label or "the boot"


def _count(n: int, total: int) -> str:
    if total == 1:
        return ""
    return f" (all {n} boots)" if n == total else f" ({n} of {total} boots)"
