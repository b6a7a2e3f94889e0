from __future__ import annotations

from typing import Any

from kbisect.measure import fingerprint


def fp(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "uname_r": "6.12.48",
        "cmdline": "console=ttyS0 preempt=none",
        "preempt": "none",
        "hugepages_total": 0,
        "hugepages_free": 0,
        "hugepage_size_kb": 2048,
        "huge_pages_used": False,
        "thp": "madvise",
        "nproc": 2,
        "mem_total_kb": 2000000,
        "clocksource": "tsc",
        "pg_version": "15.14",
        "pg_settings": {"shared_buffers": "128MB", "huge_pages": "try"},
    }
    base.update(over)
    return base


def by_field(rows: list[fingerprint.Row]) -> dict[str, fingerprint.Row]:
    return {r.field: r for r in rows}


def test_identical_sides_have_nothing_notable() -> None:
    rows = fingerprint.diff({"A": [fp(), fp()], "B": [fp(), fp()]})
    assert rows, "every field gets a row"
    assert not [r.field for r in rows if r.differs or r.varies]


def test_difference_across_sides() -> None:
    rows = by_field(fingerprint.diff({"A": [fp(), fp()], "B": [fp(preempt="full")] * 2}))
    row = rows["preempt"]
    assert row.differs and not row.varies
    assert row.values == {"A": ("none",), "B": ("full",)}
    assert not rows["thp"].differs and not rows["thp"].varies


def test_variation_within_one_side_in_boot_order() -> None:
    rows = by_field(
        fingerprint.diff({"A": [fp(clocksource="tsc"), fp(clocksource="hpet"), fp()], "B": [fp()]})
    )
    row = rows["clocksource"]
    assert row.varies == ("A",)
    assert row.values["A"] == ("tsc", "hpet")
    assert row.differs  # {tsc, hpet} is not {tsc}


def test_pg_settings_are_rows_and_missing_counts() -> None:
    b = fp(pg_settings={"shared_buffers": "1GB"})
    rows = by_field(fingerprint.diff({"A": [fp()], "B": [b]}))
    assert rows["pg_settings.shared_buffers"].values == {"A": ("128MB",), "B": ("1GB",)}
    assert rows["pg_settings.huge_pages"].values["B"] == (fingerprint.MISSING,)
    assert rows["pg_settings.huge_pages"].differs


def test_empty_fingerprints_are_ignored() -> None:
    rows = by_field(fingerprint.diff({"A": [fp(), {}], "B": [fp()]}))
    assert not rows["preempt"].differs and not rows["preempt"].varies
    assert rows["preempt"].values["A"] == ("none",)


def test_values_render_compactly() -> None:
    assert fingerprint.show(None) == fingerprint.MISSING
    assert fingerprint.show(True) == "true"
    assert fingerprint.show(2048) == "2048"
    assert fingerprint.show("full") == "full"


def test_kernel_cmdline_drops_virtme_per_boot_tokens() -> None:
    raw = (
        "virtme_initmount0=tmp/run/boots/1-A virtme.exec=`cHl0aG9u` console=ttyS0 "
        "panic=-1 preempt=full init=/venv/virtme-ng-init"
    )
    assert fingerprint.kernel_cmdline(raw) == "console=ttyS0 panic=-1 preempt=full"
    assert fingerprint.kernel_cmdline(None) is None
    newer = "console=ttyS0 ro loglevel=7 /virtme-init-flqrraoy / console=ttyS0"
    assert fingerprint.kernel_cmdline(newer) == "console=ttyS0 ro loglevel=7 / console=ttyS0"


def test_boots_that_differ_only_in_virtme_paths_do_not_vary() -> None:
    a1 = {"cmdline": "virtme_initmount0=boots/1 preempt=none", "preempt": "none"}
    a2 = {"cmdline": "virtme_initmount0=boots/2 preempt=none", "preempt": "none"}
    b1 = {"cmdline": "virtme_initmount0=boots/3 preempt=full", "preempt": "full"}
    rows = {r.field: r for r in fingerprint.diff({"A": [a1, a2], "B": [b1]})}
    assert rows["cmdline"].varies == ()
    assert rows["cmdline"].differs
