"""A compare's profiles (kbisect/report/profile.py) and the flame graph (flame.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from kbisect.measure.record import Sample
from kbisect.report import flame, profile

SVG = "{http://www.w3.org/2000/svg}"


def sample(label: str, top: dict[str, float], tps: float = 100.0, **extra: Any) -> Sample:
    rows = [{"symbol": k, "self_pct": v} for k, v in top.items()]
    prof = {"event": "cpu-clock", "frequency": 499, "seconds": 10, "samples": 1000}
    return Sample(
        {
            "label": label,
            "status": "ok",
            "profile": {**prof, "top": rows, "run": {"tps": tps}, "folded": "profile.folded"},
            **extra,
        }
    )


SIDES = {
    "A": [
        sample("A", {"s_lock": 2.0, "ExecInterpExpr": 30.0}),
        Sample({"label": "A", "status": "ok"}),
    ],
    "B": [
        sample("B", {"s_lock": 50.0, "ExecInterpExpr": 10.0}, 50.0),
        sample("B", {"s_lock": 60.0, "hash_search": 4.0}, 40.0),
    ],
}


def test_side_averages_over_profiled_boots() -> None:
    b = profile.side(SIDES["B"])
    assert b is not None
    assert b.boots == 2 and b.samples == 2000 and b.tps == [50.0, 40.0]
    assert b.self_pct == {"s_lock": 55.0, "ExecInterpExpr": 5.0, "hash_search": 2.0}
    assert profile.top(b) == [("s_lock", 55.0), ("ExecInterpExpr", 5.0), ("hash_search", 2.0)]
    assert profile.side([Sample({"label": "A", "status": "ok"})]) is None


def test_difference_sorted_by_size() -> None:
    a, b = profile.side(SIDES["A"]), profile.side(SIDES["B"])
    assert a is not None and b is not None
    assert profile.difference(a, b) == [
        ("s_lock", 2.0, 55.0, 53.0),
        ("ExecInterpExpr", 30.0, 5.0, -25.0),
        ("hash_search", 0.0, 2.0, 2.0),
    ]


def test_markdown_and_text_tables(tmp_path: Path) -> None:
    lines = profile.markdown(tmp_path, SIDES, {"A": "preempt=full", "B": "preempt=none"})
    assert lines[0] == "## Profiles"
    assert "| `s_lock` | 2.0% | 55.0% | +53.0 |" in lines
    assert any(line.startswith("- B (preempt=none): 2 boot(s), 2000 samples") for line in lines)
    text = profile.text(SIDES)
    assert all(len(line) <= 72 for line in text)
    assert text[2].split() == ["s_lock", "2.0", "55.0", "+53.0"]
    assert profile.markdown(tmp_path, {"A": [], "B": []}, {}) == []


def test_flames_from_the_boot_dirs(tmp_path: Path) -> None:
    boot = tmp_path / "boots" / "1-B"
    boot.mkdir(parents=True)
    (boot / "profile.folded").write_text("postgres;a;s_lock 3\nswapper;idle 1\n")
    moved = sample("B", {"s_lock": 75.0}, boot_dir="/elsewhere/boots/1-B")  # a copied run
    assert profile.folded(tmp_path, [moved]) == {"postgres;a;s_lock": 3, "swapper;idle": 1}
    assert profile.flames(tmp_path, {"A": [], "B": [moved]}) == {"B": "profile-B.svg"}
    assert (tmp_path / "profile-B.svg").is_file()


def _rects(svg: str) -> list[tuple[str, float, float, float]]:
    """(tooltip, x, y, width) of every frame."""
    root = ET.fromstring(svg)
    out = []
    for g in root.iter(f"{SVG}g"):
        title, rect = g.find(f"{SVG}title"), g.find(f"{SVG}rect")
        assert title is not None and rect is not None
        out.append(
            (str(title.text), float(rect.get("x", 0)), float(rect.get("y", 0)),
             float(rect.get("width", 0)))
        )  # fmt: skip
    return out


def test_flame_svg_widths_add_up() -> None:
    stacks = {"postgres;main;s_lock": 6, "postgres;main;exec": 2, "swapper;idle": 2}
    svg = flame.render(stacks, "side B")
    rects = _rects(svg)
    root = next(r for r in rects if r[0].startswith("all "))
    assert root[3] == pytest.approx(flame.WIDTH)
    levels: dict[float, float] = {}
    for _, _, y, width in rects:
        levels[y] = levels.get(y, 0.0) + width
    widths = [levels[y] for y in sorted(levels, reverse=True)]  # from the root up
    assert widths[:3] == [pytest.approx(flame.WIDTH)] * 3  # all, comm, second frame
    assert widths[3] == pytest.approx(flame.WIDTH * 8 / 10)  # swapper;idle ends below
    s_lock = next(r for r in rects if r[0].startswith("s_lock "))
    assert s_lock[0] == "s_lock (6 samples, 60.00%)"
    assert s_lock[3] == pytest.approx(flame.WIDTH * 0.6)
    assert flame.render(dict(reversed(stacks.items())), "side B") == svg  # deterministic


def test_flame_escapes_and_tiny_frames() -> None:
    svg = flame.render({"a<b>&c": 1, "big": 100000}, "t & t")
    names = [r[0] for r in _rects(svg)]
    assert any(n.startswith("big ") for n in names)
    assert not any(n.startswith("a<b>&c") for n in names)  # under MIN_WIDTH: not drawn
    assert flame.parse("a;b 3\nbad line\na;b 2\n") == {"a;b": 5}
    ET.fromstring(flame.render({}, "empty"))
