"""Which boots are profiled (the scenario's [profile], docs/profiles.md), decided on the
host: the first `boots_per_side` boots of each side that came back with a profile. A
side is a label (a compare's A or B) and a kernel commit; a failed profiled boot leaves
the turn to the next boot of its side. The guest learns it from its scenario JSON,
whose profile.enabled is true only for a boot to profile."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from kbisect.core import reading
from kbisect.measure import results
from kbisect.scenario import profile


def _same_side(sample: dict[str, Any], label: str | None, commit: str | None) -> bool:
    kernel = sample.get("kernel") or {}
    return sample.get("label") == label and kernel.get("commit") == commit


def profiled_so_far(out_dir: Path, label: str | None, commit: str | None) -> int:
    """Samples of this side in the run that carry a profile."""
    count = 0
    for path in results.sample_paths(out_dir):
        try:
            sample = reading.json_table(path, "")
        except reading.CorruptFile:
            continue
        if _same_side(sample, label, commit) and sample.get("profile"):
            count += 1
    return count


def due(data: dict[str, Any], out_dir: Path, label: str | None, commit: str | None) -> bool:
    """Is the next boot of this side to be profiled?"""
    if not profile.enabled(data):
        return False
    wanted = int(data["profile"]["boots_per_side"])
    return profiled_so_far(out_dir, label, commit) < wanted


def guest_json(data: dict[str, Any], profiled: bool) -> str:
    """The scenario JSON the guest harness reads: profile.enabled says this boot's part."""
    view = copy.deepcopy(data)
    if "profile" in view:
        view["profile"]["enabled"] = profiled
    return json.dumps(view, indent=2, sort_keys=True) + "\n"
