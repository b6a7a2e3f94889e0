"""The demo histories on the embedded 6.12 tree, made of small commits with clearly
labeled synthetic changes to unix_stream_sendmsg(), which every pgbench transaction over
the Unix socket takes many times (one send per statement and reply).

- `default` (branch `kbisect-demo`): 16 commits, one of which is a synthetic regression
  (a busy delay of DELAY_US before scm_send()).
- `steps` (branch `kbisect-demo-steps`): 24 commits that are not one clean step: a first
  regression at commit 10 (40%), its fix at commit 15 (60%), and a second regression at
  commit 19 (80%), the history where one-step bisection names the fixed commit 10. Both
  delays are DELAY_US, once per send, in the same function: the default's delay is
  known to cut tps clearly under TCG on 2 vCPUs (B/A 1.75x and 1.99x for its revert in
  the real compares), so each step is as visible as the default's and of the same
  size, and the fix restores the base level in between. The second delay sits at
  the function's other end (before its successful return), so the two regressions are
  different hunks that their diffs tell apart.
- `heavy` (branch `kbisect-demo-heavy`): the default's 16 commits with the regression's
  delay at HEAVY_DELAY_US; the main job (`just demo`, README line 1) reverts it. The
  delay is a fixed cost per send, so its weight is the ratio of the delay to a
  transaction's own cost: 1.99x for the default's 150 us on the host of 2026-11-23
  (about 1,050 tps), 1.24x and 1.28x on slower 2-core hosts (about 200 tps), where a
  compare must run 5 to 10 boots a side to settle it; on a slow guest (1 vCPU under
  TCG, or two guests sharing a small host, as a pool of vng slots does) it is lost in
  the noise. This one is a large step on each of them, settled at the first look.
- `two` (branch `kbisect-demo-two`): 24 commits with two regressions of TWO_DELAY_US each
  that both persist to the head, at commits 8 and 17, at the function's two ends (as the
  steps variant's): the history where one culprit explains only part of the gap, so
  that reverting it restores part of it and the rest is bisected with it reverted.

Each history is created once in kbisect's own cached copy of the tree (never a user's
tree), on its own branch, with a fixed identity and dates so that its commit ids are the
same on every machine.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import atomic, proc, progress, reading
from kbisect.core.exceptions import InfraError
from kbisect.source import git, tarball, tree, worktree

BRANCH = "kbisect-demo"
REGRESSION_SUBJECT = "net/unix: [kbisect demo] SYNTHETIC REGRESSION: busy delay in sendmsg"
DELAY_US = 150


class DemoEditFailed(InfraError):
    """A demo edit's anchor text is not exactly once in the tree's file."""


@dataclass(frozen=True)
class Edit:
    path: str
    old: str  # text to find ("" = append at the end)
    new: str
    subject: str


def _note(n: int, name: str = "demo") -> Edit:
    return Edit(
        "Documentation/admin-guide/kbisect-demo.rst",
        "",
        f"Demo note {n}: this line exists so the demo history has harmless commits.\n",
        f"Documentation: kbisect {name} note {n}",
    )


def _comment(path: str, n: int, name: str = "demo") -> Edit:
    return Edit(
        path,
        "",
        f"/* kbisect {name}: harmless comment {n} */\n",
        f"{path.split('/')[0]}: kbisect {name} harmless change {n}",
    )


def _delay(label: str, us: int = DELAY_US) -> str:
    return (
        f"\t/* kbisect demo: SYNTHETIC {label}, {us} us busy wait per send. */\n\tudelay({us});\n"
    )


# The anchor is unix_stream_sendmsg()'s (its last locals, then scm_send): the same
# scm_send lines also open unix_dgram_sendmsg(), which pgbench never calls.
_STREAM_SEND = (
    "\tbool fds_sent = false;\n\tint data_len;\n\n"
    "\terr = scm_send(sock, msg, &scm, false);\n\tif (err < 0)\n\t\treturn err;\n"
)
REGRESSION = Edit(
    "net/unix/af_unix.c",
    _STREAM_SEND,
    _STREAM_SEND.replace("\n\terr = scm_send", f"\n{_delay('REGRESSION')}\n\terr = scm_send"),
    REGRESSION_SUBJECT,
)
INCLUDE = Edit(
    "net/unix/af_unix.c",
    "#include <linux/bpf-cgroup.h>\n",
    "#include <linux/bpf-cgroup.h>\n#include <linux/delay.h>\n",
    "",
)

EDITS: list[Edit] = [
    _note(1),
    _comment("kernel/sched/core.c", 2),
    _note(3),
    _comment("mm/page_alloc.c", 4),
    _note(5),
    _comment("fs/read_write.c", 6),
    _note(7),
    _comment("kernel/fork.c", 8),
    _note(9),
    REGRESSION,
    _note(11),
    _comment("kernel/sched/fair.c", 12),
    _note(13),
    _comment("mm/memory.c", 14),
    _note(15),
    _comment("ipc/sem.c", 16),
]

# -- the steps variant: regression 1, its fix, regression 2 ------------------------------

STEPS_BRANCH = "kbisect-demo-steps"
REGRESSION_1 = Edit(
    "net/unix/af_unix.c",
    _STREAM_SEND,
    _STREAM_SEND.replace("\n\terr = scm_send", f"\n{_delay('REGRESSION 1')}\n\terr = scm_send"),
    "net/unix: [kbisect demo] SYNTHETIC REGRESSION 1: busy delay in sendmsg",
)
FIX_1 = Edit(
    "net/unix/af_unix.c",
    REGRESSION_1.new,
    REGRESSION_1.old,
    "net/unix: [kbisect demo] SYNTHETIC FIX of 1: remove the busy delay in sendmsg",
)
# unix_stream_sendmsg()'s successful return (once per send, as the first delay).
_STREAM_SENT = "\tscm_destroy(&scm);\n\n\treturn sent;\n"
REGRESSION_2 = Edit(
    "net/unix/af_unix.c",
    _STREAM_SENT,
    f"{_delay('REGRESSION 2')}\n{_STREAM_SENT}",
    "net/unix: [kbisect demo] SYNTHETIC REGRESSION 2: busy delay before sendmsg returns",
)
_STEPS_FILES = [
    "kernel/sched/core.c",
    "mm/page_alloc.c",
    "fs/read_write.c",
    "kernel/fork.c",
    "kernel/sched/fair.c",
    "mm/memory.c",
    "ipc/sem.c",
    "kernel/time/timer.c",
    "fs/open.c",
    "mm/slub.c",
]
_PLANTED = {10: REGRESSION_1, 15: FIX_1, 19: REGRESSION_2}


def _harmless(n: int, name: str) -> Edit:
    """Commit n's harmless edit: notes and comments in turn, over _STEPS_FILES."""
    if n % 2:
        return _note(n, name)
    return _comment(_STEPS_FILES[(n // 2 - 1) % len(_STEPS_FILES)], n, name)


STEPS_EDITS: list[Edit] = [_PLANTED.get(n) or _harmless(n, "demo-steps") for n in range(1, 25)]

# -- the heavy variant: the default's history, its delay HEAVY_DELAY_US ------------------

HEAVY_BRANCH = "kbisect-demo-heavy"
HEAVY_DELAY_US = 1000
HEAVY_REGRESSION = Edit(
    "net/unix/af_unix.c",
    _STREAM_SEND,
    _STREAM_SEND.replace(
        "\n\terr = scm_send", f"\n{_delay('REGRESSION', HEAVY_DELAY_US)}\n\terr = scm_send"
    ),
    f"net/unix: [kbisect demo] SYNTHETIC REGRESSION: {HEAVY_DELAY_US} us busy delay in sendmsg",
)
HEAVY_EDITS: list[Edit] = [HEAVY_REGRESSION if e is REGRESSION else e for e in EDITS]


@dataclass(frozen=True)
class Change:
    """A labeled synthetic change of a demo history, and what it does to tps."""

    edit: Edit
    kind: str  # "regression" or "fix"


@dataclass(frozen=True)
class Variant:
    """One demo history: its branch, its commits' edits in order, the labeled changes
    among them (INCLUDE goes in with the first), and the day of its fixed dates."""

    name: str
    branch: str
    edits: tuple[Edit, ...]
    changes: tuple[Change, ...]
    day: str

    @property
    def edits_id(self) -> str:
        """Identifies the edits: a cached history made from other edits is made again."""
        return hashlib.sha256(repr([INCLUDE, *self.edits]).encode()).hexdigest()[:16]

    def kind(self, edit: Edit) -> str | None:
        return next((c.kind for c in self.changes if c.edit is edit), None)


DEFAULT = Variant("default", BRANCH, tuple(EDITS), (Change(REGRESSION, "regression"),), "01-02")
STEPS = Variant(
    "steps",
    STEPS_BRANCH,
    tuple(STEPS_EDITS),
    (
        Change(REGRESSION_1, "regression"),
        Change(FIX_1, "fix"),
        Change(REGRESSION_2, "regression"),
    ),
    "01-03",
)
HEAVY = Variant(
    "heavy",
    HEAVY_BRANCH,
    tuple(HEAVY_EDITS),
    (Change(HEAVY_REGRESSION, "regression"),),
    "01-04",
)
# -- the two variant: two regressions that both persist ----------------------------------

TWO_BRANCH = "kbisect-demo-two"
TWO_DELAY_US = 500
TWO_1 = Edit(
    "net/unix/af_unix.c",
    _STREAM_SEND,
    _STREAM_SEND.replace(
        "\n\terr = scm_send", f"\n{_delay('REGRESSION A', TWO_DELAY_US)}\n\terr = scm_send"
    ),
    f"net/unix: [kbisect demo] SYNTHETIC REGRESSION A: {TWO_DELAY_US} us busy delay in sendmsg",
)
TWO_2 = Edit(
    "net/unix/af_unix.c",
    _STREAM_SENT,
    f"{_delay('REGRESSION B', TWO_DELAY_US)}\n{_STREAM_SENT}",
    f"net/unix: [kbisect demo] SYNTHETIC REGRESSION B: {TWO_DELAY_US} us busy delay before "
    "sendmsg returns",
)
_TWO_PLANTED = {8: TWO_1, 17: TWO_2}
TWO = Variant(
    "two",
    TWO_BRANCH,
    tuple(_TWO_PLANTED.get(n) or _harmless(n, "demo-two") for n in range(1, 25)),
    (Change(TWO_1, "regression"), Change(TWO_2, "regression")),
    "01-05",
)
VARIANTS = {v.name: v for v in (DEFAULT, STEPS, HEAVY, TWO)}


def apply(root: Path, edit: Edit) -> None:
    """Apply one edit to the files under root (pure text change)."""
    path = root / edit.path
    text = path.read_text() if path.exists() else ""
    if not edit.old:
        text += edit.new
    else:
        count = text.count(edit.old)
        if count != 1:
            where = "not found" if count == 0 else f"found {count} times"
            raise DemoEditFailed(f"{edit.path}: demo edit {where} (tree changed?)")
        text = text.replace(edit.old, edit.new)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def create(repo: Path, which: Variant = DEFAULT) -> dict[str, Any]:
    """Create the variant's branch once; return its record: {base, head, regression,
    branch, edits} for the default, {variant, base, head, branch, edits, changes} for
    another, each change {commit, kind, subject, position} (position 1 = base's child)."""
    info = repo / ".git" / f"{which.branch}.json"
    if info.exists() and git.git(repo, "branch", "--list", which.branch):
        try:
            data: dict[str, Any] = reading.json_table(info, "")
        except reading.CorruptFile:
            data = {}  # damaged: the branch is made again
        if data.get("edits") == which.edits_id:
            return data
    progress.step(f"creating the demo history ({len(which.edits)} commits) on {which.branch}")
    base = git.rev_parse(repo, tree.DEFAULT_TAG)
    where = worktree.checkout(repo, base, slot="demo")  # in kbisect's scratch repository
    changes = []
    for i, edit in enumerate(which.edits):
        if edit is which.changes[0].edit:
            apply(where, INCLUDE)
        apply(where, edit)
        date = f"2025-{which.day}T00:{i:02d}:00+0000"
        env = {**tarball.FIXED_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        proc.run(git.command(where, "add", "-f", "-A", "."), env=env)
        commit = ["commit", "-q", "--no-verify", "--no-gpg-sign", "-m", edit.subject]
        proc.run(git.command(where, *commit), env=env)
        if kind := which.kind(edit):
            changes.append(
                {
                    "commit": git.rev_parse(where, "HEAD"),
                    "kind": kind,
                    "subject": edit.subject,
                    "position": i + 1,
                }
            )
    head = git.rev_parse(where, "HEAD")
    _publish(repo, where, which.branch, head)
    data = _record(which, base, head, changes)
    atomic.write_json(info, data)
    planted = ", ".join(f"{c['kind']} {str(c['commit'])[:12]}" for c in changes)
    progress.step(f"demo history: {base[:12]}..{head[:12]}, {planted}")
    return data


def _record(which: Variant, base: str, head: str, changes: list[dict[str, Any]]) -> dict[str, Any]:
    """The default's record keeps its keys (one regression); another lists its changes."""
    if which is DEFAULT:
        regression = changes[0]["commit"]
        return {
            "base": base,
            "head": head,
            "regression": regression,
            "branch": which.branch,
            "edits": which.edits_id,
        }
    return {
        "variant": which.name,
        "base": base,
        "head": head,
        "branch": which.branch,
        "edits": which.edits_id,
        "changes": changes,
    }


def _publish(repo: Path, where: Path, branch: str, head: str) -> None:
    """The branch in the embedded tree (kbisect's own import), with the commits fetched
    from the scratch repository where they were made."""
    git.git(where, "update-ref", f"refs/kbisect/{branch}", head)
    own = git.common_dir(where)
    git.git(
        repo, "fetch", "-q", "--no-tags", str(own), f"+refs/kbisect/{branch}:refs/heads/{branch}"
    )
