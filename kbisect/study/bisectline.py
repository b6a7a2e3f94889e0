"""The `kbisect bisect` line for a study's step, with that cell's settings. A step
between kernels in different trees (releases imported from tarballs: no shared history)
has none; it comes with the line to run in a git tree that has both releases instead,
between the release tags their Makefiles name (Debian's 6.1.158 -> v6.1, mainline's tag).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from kbisect.study import store

GIT_TREE = "/path/to/linux.git"  # where a step between two trees' kernels can be bisected
VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?(-rc\d+)?")


def release_tag(kernel: Mapping[str, Any]) -> str:
    """The mainline tag a kernel's Makefile version is based on ("6.1.158" -> v6.1,
    "7.3.0-rc7" -> v7.3-rc7); its revision when the version is not known."""
    m = VERSION.match(kernel.get("version") or "")
    return f"v{m[1]}.{m[2]}{m[3] or ''}" if m else str(kernel["rev"])


def here(d: Mapping[str, Any], cell: int, a: int, b: int, improvement: bool) -> str | None:
    """`kbisect bisect --good A --bad B --scenario S --set ... --append ...` for one step,
    if both kernels are revisions in the same tree."""
    ka, kb = d["kernels"][a], d["kernels"][b]
    tree = store.kernel_tree(d, a)
    if not (ka.get("rev") and kb.get("rev")) or store.kernel_tree(d, b) != tree:
        return None
    return _bisect_words(d, cell, (ka["rev"], kb["rev"]), tree, improvement)


def elsewhere(d: Mapping[str, Any], cell: int, a: int, b: int, improvement: bool) -> str | None:
    """For two revisions in different trees (no shared history): the bisect line to run
    in a git tree that has both releases, between their release tags."""
    ka, kb = d["kernels"][a], d["kernels"][b]
    if not (ka.get("rev") and kb.get("rev")) or here(d, cell, a, b, False):
        return None
    return _bisect_words(d, cell, (release_tag(ka), release_tag(kb)), GIT_TREE, improvement)


def _bisect_words(
    d: Mapping[str, Any], cell: int, revs: tuple[str, str], tree: str | None, improvement: bool
) -> str:
    c = d["cells"][cell]
    words = ["kbisect", "bisect", "--good", revs[0], "--bad", revs[1]]
    words += ["--scenario", d["scenario"]["source"]]
    if tree:
        words += ["--tree", tree]
    for item in [*d["sets"], *c["set"]]:
        words += ["--set", item]
    if append := " ".join(filter(None, [d["append"], c["append"]])):
        words += ["--append", append]
    for name in d["configs"]:
        words += ["--config", name]
    words += ["--arch", d["arch"], *(["--lower-is-better"] if improvement else [])]
    return shlex.join(words)
