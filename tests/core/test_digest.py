"""core/digest.py, the one input key: every key made through it is pinned here as it was
before there was one (cache directories, stores and stored scenario hashes are named by
them), non-ASCII text and nested tables included."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from kbisect.bisect import samples
from kbisect.core import arch, digest
from kbisect.db import schema
from kbisect.history import series, source
from kbisect.pgbuild import build, buildroot
from kbisect.scenario import scenario
from kbisect.scenario.server import Pin
from kbisect.source import git
from kbisect.study import store
from kbisect.targets.vng import rootfs


def test_key_is_the_sorted_json_sha256() -> None:
    assert digest.key({"b": 1, "a": [1, "é"]}, 12) == "dae7009e2bf6"
    assert len(digest.key([])) == 64


def test_every_key_is_the_one_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    assert buildroot.key("trixie", "amd64") == "amd64-trixie-0361ba3fc8"
    src = build.Source(Path("/r"), "b" * 40, "c" * 40, "x", ())
    assert build.key(src, 18, "amd64-trixie-0123456789") == "pg18-39aac0286256"
    pin = Pin(17, "17.5-1", ("linux-perf",))
    assert rootfs.key(arch.get("x86_64"), pin) == "x86_64-trixie-pg17-17.5-1-2122c115fc"
    fp = {"cpu_model": "Xeon é", "cpus": 8, "mem_total_kb": 16777216}
    host = {"cpu_model": "h", "cpus": 16, "qemu": "9.2"}
    target = {"kind": "vng", "name": "g", "vm_host": host}
    assert schema.machine(fp, target) == "2d57a304ce500df0"
    settings = {"pgbench": {"clients": 8, "jobs": 2}, "name": "é"}
    o = source.Obs("p", 1.0, "ok", False, "v", "c", "s", "h", "m", "t", "r", "l", "", settings)
    assert series._settings_hash(o, "pgbench.clients") == (
        "1b9e6eda4c709b598cd829080eb78e29be1ba7023f78eed4a04881ec6d08ba01"
    )
    monkeypatch.setattr(git, "git", lambda *a: "/home/u/linux/.git")
    ns = types.SimpleNamespace
    target_ = ns(name="ssh", arch=ns(name="x86_64"))
    ctx = ns(scen=ns(hash="h" * 64), append="quiet", target=target_, patches=[ns(sha256="p" * 64)])
    stored = samples.store_for(None, Path("/"), ctx, ("a.config",), "defconfig")  # type: ignore[arg-type]
    assert stored.name == "linux-34d8bcf428b2"
    study = {"kernels": [{"label": "A", "commit": "c"}], "cells": [{"clients": 8}], "seed": 1}
    assert store.identity({**study, "name": "é"}) == "def873171e5a4623"
    scen = {"name": "é", "description": "d", "postgres": {"source": "host", "major": 17}}
    assert scenario.scenario_hash({**scen, "pgbench": {"clients": 8}}) == (
        "a350574fbf712a4d6ca3a2c6cef221990665ec8fca14871862b99899f9a6e1e1"
    )
