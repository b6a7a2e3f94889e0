"""The demo history: 16 small commits on the embedded 6.12 tree, one of which is a
clearly labeled synthetic regression (a busy delay in unix_stream_sendmsg(), which
every pgbench transaction over the Unix socket takes many times).

The history is created once in kbisect's own cached copy of the tree (never a user's
tree), on the branch `kbisect-demo`, with a fixed identity and dates so that its
commit ids are the same on every machine.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

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


def _note(n: int) -> Edit:
    return Edit(
        "Documentation/admin-guide/kbisect-demo.rst",
        "",
        f"Demo note {n}: this line exists so the demo history has harmless commits.\n",
        f"Documentation: kbisect demo note {n}",
    )


def _comment(path: str, n: int) -> Edit:
    return Edit(
        path,
        "",
        f"/* kbisect demo: harmless comment {n} */\n",
        f"{path.split('/')[0]}: kbisect demo harmless change {n}",
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
    _STREAM_SEND.replace(
        "\n\terr = scm_send",
        f"\n\t/* kbisect demo: SYNTHETIC REGRESSION, {DELAY_US} us busy wait per send. */\n"
        f"\tudelay({DELAY_US});\n\n\terr = scm_send",
    ),
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


# Identifies the edits: a cached history made from other edits is made again.
EDITS_ID = hashlib.sha256(repr([INCLUDE, *EDITS]).encode()).hexdigest()[:16]


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


def create(repo: Path) -> dict[str, str]:
    """Create the demo branch once; return {base, head, regression} commit ids."""
    info = repo / ".git" / "kbisect-demo.json"
    if info.exists() and git.git(repo, "branch", "--list", BRANCH):
        try:
            data: dict[str, str] = reading.json_table(info, "")
        except reading.CorruptFile:
            data = {}  # damaged: the branch is made again
        if data.get("edits") == EDITS_ID:
            return data
    progress.step(f"creating the demo history ({len(EDITS)} commits) on {BRANCH}")
    base = git.rev_parse(repo, tree.DEFAULT_TAG)
    where = worktree.checkout(repo, base, slot="demo")  # in kbisect's scratch repository
    regression = ""
    for i, edit in enumerate(EDITS):
        if edit is REGRESSION:
            apply(where, INCLUDE)
        apply(where, edit)
        env = {
            **tarball.FIXED_IDENTITY,
            "GIT_AUTHOR_DATE": f"2025-01-02T00:{i:02d}:00+0000",
            "GIT_COMMITTER_DATE": f"2025-01-02T00:{i:02d}:00+0000",
        }
        proc.run(git.command(where, "add", "-f", "-A", "."), env=env)
        commit = ["commit", "-q", "--no-verify", "--no-gpg-sign", "-m", edit.subject]
        proc.run(git.command(where, *commit), env=env)
        if edit is REGRESSION:
            regression = git.rev_parse(where, "HEAD")
    head = git.rev_parse(where, "HEAD")
    _publish(repo, where, head)
    data = {
        "base": base,
        "head": head,
        "regression": regression,
        "branch": BRANCH,
        "edits": EDITS_ID,
    }
    atomic.write_json(info, data)
    progress.step(f"demo history: {base[:12]}..{head[:12]}, regression {regression[:12]}")
    return data


def _publish(repo: Path, where: Path, head: str) -> None:
    """The branch in the embedded tree (kbisect's own import), with the commits fetched
    from the scratch repository where they were made."""
    git.git(where, "update-ref", f"refs/kbisect/{BRANCH}", head)
    own = git.common_dir(where)
    git.git(
        repo, "fetch", "-q", "--no-tags", str(own), f"+refs/kbisect/{BRANCH}:refs/heads/{BRANCH}"
    )
