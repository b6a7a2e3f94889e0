"""Fixtures of the results database tests: docs/examples (a stored tree of real runs) and
one real sample to write again."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import ROOT

EXAMPLES = ROOT / "docs" / "examples"
DEMO_SAMPLE = EXAMPLES / "demo" / "samples" / "001-A.json"
DEMO_TPS = 488.995627  # 001-A.json's tps, as stored


def example_sample_files() -> list[Path]:
    return sorted(p.resolve() for p in EXAMPLES.rglob("samples/[0-9]*-*.json"))


@pytest.fixture
def sample() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DEMO_SAMPLE.read_text())
    return copy.deepcopy(data)
