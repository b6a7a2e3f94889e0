"""The sample record: one boot's stored JSON (measure/schemas/sample.json) as a typed,
read-only class. measure/sample.py makes one, measure/results.py writes and reads it
(validated, in today's shape); every other module reads its fields, never string keys.
`data` is the record as stored, written back unchanged; its free-form documents
(fingerprint, runs, timings, profile, preempt, settings) are read through the
properties below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbisect.core.reading import mapping


@dataclass(frozen=True)
class Sample:
    """One stored boot. `revision` is the commit a bisection stored it under (the store's
    folder, bisect/samples.py), which a kernel built from an image does not record."""

    data: Mapping[str, Any] = dataclasses.field(repr=False)
    revision: str | None = None

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Sample:
        """A record in today's shape: version 1 recorded only the accelerator of a vng
        boot, where version 2 records its target."""
        if data.get("version") == 1 and "target" not in data:
            arch = mapping(mapping(data.get("kernel")).get("manifest")).get("arch")
            where = {"kind": "vng", "name": "vng", "arch": arch, "accel": data.get("accel")}
            data = {**data, "target": where}
        return cls(data)

    def at(self, revision: str) -> Sample:
        return dataclasses.replace(self, revision=revision)

    def with_(self, **changes: Any) -> Sample:
        """The same record with some top-level fields changed (tests, fakes, the
        simulator's residuals)."""
        return Sample({**self.data, **changes}, self.revision)

    # -- what the statistics read ----------------------------------------------------
    @property
    def label(self) -> str | None:
        label = self.data.get("label")
        return label if isinstance(label, str) else None

    @property
    def status(self) -> str:
        return str(self.data.get("status") or "unknown")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def tps(self) -> float | None:
        tps = self.data.get("tps")
        return float(tps) if isinstance(tps, int | float) and not isinstance(tps, bool) else None

    @property
    def error(self) -> str | None:
        error = self.data.get("error")
        return None if error is None else str(error)

    @property
    def slot(self) -> int | None:
        slot = self.data.get("slot")
        return slot if isinstance(slot, int) and not isinstance(slot, bool) else None

    @property
    def disturbance(self) -> Mapping[str, Any]:
        """The host monitor's judgement (targets/monitor.py): disturbed, counted,
        last_try, the share of the host others used; empty when not monitored."""
        return mapping(self.data.get("disturbance"))

    @property
    def disturbed(self) -> bool:
        return bool(self.disturbance.get("disturbed"))

    @property
    def machine(self) -> str:
        """The machine it ran on: a pool's member records `machine` (targets/pool/),
        any other target its name."""
        t = self.target
        return str(t.get("machine") or t.get("name") or "?")

    # -- where and what it ran -----------------------------------------------------
    @property
    def kernel(self) -> Mapping[str, Any]:
        return mapping(self.data.get("kernel"))

    @property
    def manifest(self) -> Mapping[str, Any]:
        return mapping(self.kernel.get("manifest"))

    @property
    def commit(self) -> str | None:
        """The kernel's commit, or the revision a bisection stored it under."""
        commit = self.kernel.get("commit") or self.revision
        return None if commit is None else str(commit)

    @property
    def image(self) -> str:
        return str(self.kernel.get("image") or "")

    @property
    def target(self) -> Mapping[str, Any]:
        return mapping(self.data.get("target"))

    @property
    def scenario(self) -> str:
        return str(mapping(self.data.get("scenario")).get("name") or "")

    @property
    def scenario_hash(self) -> str:
        return str(mapping(self.data.get("scenario")).get("hash") or "")

    @property
    def settings(self) -> Mapping[str, Any]:
        """The resolved scenario the boot ran."""
        return mapping(mapping(self.data.get("scenario")).get("settings"))

    @property
    def append(self) -> str:
        return str(self.data.get("append") or "")

    @property
    def created(self) -> str:
        return str(self.data.get("created") or "")

    @property
    def boot_dir(self) -> str | None:
        boot_dir = self.data.get("boot_dir")
        return None if boot_dir is None else str(boot_dir)

    # -- the free-form documents -----------------------------------------------------
    @property
    def fingerprint(self) -> Mapping[str, Any]:
        return mapping(self.data.get("fingerprint"))

    @property
    def runs(self) -> Sequence[Mapping[str, Any]]:
        runs = self.data.get("runs")
        return [mapping(r) for r in runs] if isinstance(runs, list) else []

    @property
    def timings(self) -> Mapping[str, Any]:
        return mapping(self.data.get("timings"))

    @property
    def profile(self) -> Mapping[str, Any]:
        return mapping(self.data.get("profile"))

    @property
    def preempt(self) -> Mapping[str, Any] | None:
        preempt = self.data.get("preempt")
        return preempt if isinstance(preempt, Mapping) else None

    @property
    def userland(self) -> Mapping[str, Any]:
        return mapping(self.data.get("userland"))
