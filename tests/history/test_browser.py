"""The history page in a real browser (real tier): headless Chromium, networking off (a
proxy to nowhere), opens the committed example (docs/examples/history-demo-study) and a
page the command writes now; the screenshot is not blank and shows the plot's levels,
the DOM holds the table and the plot. Needs Debian's `chromium` on PATH: scripts/setup
does not install it (it is not needed to run kbisect), so the test says so and skips."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import colors
from PIL import Image

from kbisect.commands import cli
from kbisect.report import plots
from tests.history.test_history import Page

EXAMPLES = Path(__file__).parents[2] / "docs/examples"
CHROMIUM = shutil.which("chromium")

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not on PATH (Debian's chromium package: apt-get install chromium)",
    ),
]


def chromium(tmp_path: Path, page: Path, *args: str) -> str:
    """Headless Chromium on `page` with no network: every request goes to a proxy on a
    closed local port, loopback included."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
            *args, page.resolve().as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def written_now(tmp_path: Path) -> Path:
    out = tmp_path / "page"
    argv = ["history", str(EXAMPLES), "--scenario", "simple-update-2vcpu", "--by", "time"]
    assert cli.main([*argv, "--scenario-hash", "8260", "--out", str(out)]) == 1
    return out / "history.html"


@pytest.mark.parametrize("which", ["committed", "written now"])
def test_the_page_loads_offline_with_its_table_and_plot(tmp_path: Path, which: str) -> None:
    committed = EXAMPLES / "history-demo-study/history.html"
    page = committed if which == "committed" else written_now(tmp_path)
    shot = tmp_path / "screenshot.png"
    chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1200,1400")
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=float)
    assert pixels.shape[:2] == (1400, 1200)
    assert (pixels.min(axis=-1) < 200).mean() > 0.01  # not blank: text, table, plot
    level = np.array(colors.to_rgb(plots.SIDE_COLOURS["B"])) * 255  # the levels' orange
    assert (np.abs(pixels - level).max(axis=-1) < 40).sum() > 200  # the PNG was drawn

    dom = Page()
    dom.feed(chromium(tmp_path, page, "--dump-dom"))
    assert "table" in dom.tags and "script" not in dom.tags
    [plot] = dom.images
    assert plot["id"] == "plot" and str(plot["src"]).startswith("data:image/png;base64,")
    assert {"demo-study k0-c0", "demo-study k1-c0", "demo-study k2-c0"} <= set(dom.cells)
    assert "regression step" in dom.cells
