"""The host under a vng guest, as every vng sample records it (targets/vng/host.py), and
what follows from it: two hosts are two machines to the results database, and reports
name the host."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from kbisect.db import schema
from kbisect.measure.record import Sample
from kbisect.report import text
from kbisect.targets.vng import host

EXAMPLE = Path(__file__).parents[2] / "docs/examples/demo/samples/001-A.json"
X86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nflags\t\t: fpu\n"
ARM = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd40\n"


def test_cpu_model_of_x86_and_arm64_cpuinfo() -> None:
    assert host.cpu_model(X86) == "AMD EPYC"
    assert host.cpu_model(ARM) == "implementer 0x41 part 0xd40"
    assert host.cpu_model("") is None


def test_memory_from_meminfo() -> None:
    assert host.memory_mb("MemTotal:       24684112 kB\nMemFree: 1 kB\n") == 24105
    assert host.memory_mb("MemFree: 1 kB\n") is None


def test_facts_of_this_host_name_its_cpu_kernel_and_qemu() -> None:
    f = host.facts("qemu-system-x86_64")
    assert set(f) == {"cpu_model", "cpus", "memory_mb", "kernel", "qemu"}
    assert isinstance(f["cpus"], int) and f["cpus"] >= 1
    assert f["kernel"]
    assert host.qemu_version("/nonexistent/qemu") is None


def _sample(**host_facts: object) -> dict[str, object]:
    s: dict[str, object] = copy.deepcopy(json.loads(EXAMPLE.read_text()))
    if host_facts:
        s["target"]["vm_host"] = host_facts  # type: ignore[index]
    return s


def test_two_hosts_are_two_machines_and_old_samples_keep_their_hash() -> None:
    old = _sample()
    a = _sample(cpu_model="AMD EPYC", cpus=2, qemu="QEMU emulator version 7.2.22")
    b = _sample(cpu_model="Intel Xeon", cpus=2, qemu="QEMU emulator version 7.2.22")
    hashes = [schema.machine(s["fingerprint"], s["target"]) for s in (old, a, b)]  # type: ignore[arg-type]
    assert len(set(hashes)) == 3
    again = schema.machine(old["fingerprint"], {**old["target"]})  # type: ignore[arg-type,dict-item]
    assert again == hashes[0]


def test_the_text_report_names_the_host_when_recorded() -> None:
    a = Sample.of(
        _sample(cpu_model="AMD EPYC", cpus=2, memory_mb=24105, kernel="6.1.0", qemu="QEMU 7.2")
    )
    assert text.host_line([a]) == ["AMD EPYC, 2 CPUs, 23 GiB, Linux 6.1.0, QEMU 7.2"]
    lines = text.machine([a])
    assert any(x.strip().startswith("host: AMD EPYC") for x in lines)
    assert not any("host:" in x for x in text.machine([Sample.of(_sample())]))
