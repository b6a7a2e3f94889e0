"""The demo history: the edits, applied to small fake trees, and the branch they make."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kbisect.core import proc
from kbisect.core.exceptions import InfraError
from kbisect.source import demo, tarball, tree
from tests.fakes import git

# The two functions of net/unix/af_unix.c (6.12) that open with the same scm_send lines.
AF_UNIX = """\
#include <linux/btf_ids.h>
#include <linux/bpf-cgroup.h>

static int unix_dgram_sendmsg(struct socket *sock, struct msghdr *msg,
\t\t\t      size_t len)
{
\tstruct scm_cookie scm;
\tlong timeo;
\tint err;

\terr = scm_send(sock, msg, &scm, false);
\tif (err < 0)
\t\treturn err;

\twait_for_unix_gc(scm.fp);
}

static int unix_stream_sendmsg(struct socket *sock, struct msghdr *msg,
\t\t\t       size_t len)
{
\tstruct scm_cookie scm;
\tbool fds_sent = false;
\tint data_len;

\terr = scm_send(sock, msg, &scm, false);
\tif (err < 0)
\t\treturn err;

\twait_for_unix_gc(scm.fp);
}
"""


def function_of(text: str, needle: str) -> str:
    """The name of the function whose body holds `needle`."""
    before = text[: text.index(needle)]
    return str(re.findall(r"^static int (\w+)\(", before, re.MULTILINE)[-1])


# -- the edits -------------------------------------------------------------------------


def test_edits_are_sixteen_with_one_labeled_regression() -> None:
    assert len(demo.EDITS) == 16
    flagged = [e for e in demo.EDITS if "SYNTHETIC REGRESSION" in e.subject]
    assert flagged == [demo.REGRESSION]
    assert demo.EDITS.count(demo.REGRESSION) == 1
    assert len({e.subject for e in demo.EDITS}) == 16
    assert all(e.subject for e in demo.EDITS)
    assert f"udelay({demo.DELAY_US})" in demo.REGRESSION.new
    assert "SYNTHETIC REGRESSION" in demo.REGRESSION.new  # labeled in the source too
    harmless = [e for e in demo.EDITS if e is not demo.REGRESSION]
    assert all(e.old == "" and "udelay" not in e.new for e in harmless)


def test_regression_lands_in_unix_stream_sendmsg(tmp_path: Path) -> None:
    (tmp_path / "net/unix").mkdir(parents=True)
    (tmp_path / "net/unix/af_unix.c").write_text(AF_UNIX)
    demo.apply(tmp_path, demo.INCLUDE)
    demo.apply(tmp_path, demo.REGRESSION)
    text = (tmp_path / "net/unix/af_unix.c").read_text()
    assert text.count("udelay(") == 1
    assert function_of(text, "udelay(") == "unix_stream_sendmsg"  # what pgbench calls
    assert "#include <linux/bpf-cgroup.h>\n#include <linux/delay.h>\n" in text
    assert (
        text.replace(demo.REGRESSION.new, demo.REGRESSION.old).replace(
            "#include <linux/delay.h>\n", ""
        )
        == AF_UNIX
    )


def test_apply_append_creates_then_appends(tmp_path: Path) -> None:
    note1, note3 = demo.EDITS[0], demo.EDITS[2]
    demo.apply(tmp_path, note1)
    demo.apply(tmp_path, note3)
    text = (tmp_path / note1.path).read_text()
    assert text == note1.new + note3.new and text.startswith("Demo note 1:")
    src = tmp_path / "kernel/sched/core.c"
    src.parent.mkdir(parents=True)
    src.write_text("int x;\n")
    demo.apply(tmp_path, demo.EDITS[1])
    assert src.read_text() == "int x;\n/* kbisect demo: harmless comment 2 */\n"


def test_apply_replace(tmp_path: Path) -> None:
    (tmp_path / "f.c").write_text("a\nold\nb\n")
    demo.apply(tmp_path, demo.Edit("f.c", "old\n", "new\n", "s"))
    assert (tmp_path / "f.c").read_text() == "a\nnew\nb\n"


@pytest.mark.parametrize(
    ("content", "message"), [("nothing\n", "not found"), ("old old\n", "found 2 times")]
)
def test_edit_that_does_not_apply_raises(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "f.c").write_text(content)
    with pytest.raises(demo.DemoEditFailed, match=message) as info:
        demo.apply(tmp_path, demo.Edit("f.c", "old", "new", "s"))
    assert isinstance(info.value, InfraError)
    assert (tmp_path / "f.c").read_text() == content  # untouched


def test_regression_on_a_tree_without_the_anchor_raises(tmp_path: Path) -> None:
    (tmp_path / "net/unix").mkdir(parents=True)
    (tmp_path / "net/unix/af_unix.c").write_text(AF_UNIX.replace("bool fds_sent", "bool x"))
    with pytest.raises(demo.DemoEditFailed, match=r"net/unix/af_unix\.c"):
        demo.apply(tmp_path, demo.REGRESSION)


# -- the branch ------------------------------------------------------------------------


def tiny_default_tree(path: Path, af_unix: str = AF_UNIX) -> Path:
    """A repo shaped like the imported default tree: fixed identity, the tag."""
    (path / "net/unix").mkdir(parents=True)
    (path / "net/unix/af_unix.c").write_text(af_unix)
    for name in ("kernel/sched/core.c", "mm/page_alloc.c", "ipc/sem.c"):
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text("/* x */\n")
    for cmd in tree.import_commands(Path("x.tar.xz"), path)[1:]:
        proc.run(cmd, env=tarball.FIXED_IDENTITY)
    return path


def test_create_makes_a_reproducible_branch_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    repo = tiny_default_tree(tmp_path / "one")
    data = demo.create(repo)
    assert data["base"] == git(repo, "rev-parse", tree.DEFAULT_TAG)
    assert git(repo, "rev-parse", demo.BRANCH) == data["head"]
    assert git(repo, "rev-list", "--count", f"{data['base']}..{data['head']}") == "16"
    assert git(repo, "log", "-1", "--format=%s", data["regression"]) == demo.REGRESSION_SUBJECT
    assert git(repo, "diff", "--name-only", f"{data['regression']}^", data["regression"]) == (
        "net/unix/af_unix.c"
    )
    assert git(repo, "rev-parse", "HEAD") == data["base"]  # the checkout did not move
    assert not (repo / ".git/worktrees").exists()  # made in kbisect's scratch repository
    assert json.loads((repo / ".git/kbisect-demo.json").read_text()) == data
    assert demo.create(repo) == data  # once
    other = demo.create(tiny_default_tree(tmp_path / "two"))
    assert other["head"] == data["head"] and other["regression"] == data["regression"]


def test_create_remakes_a_history_from_other_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    repo = tiny_default_tree(tmp_path / "one")
    info = repo / ".git/kbisect-demo.json"
    data = demo.create(repo)
    stale = {**data, "edits": "older", "head": "0" * 40}
    info.write_text(json.dumps(stale))
    assert demo.create(repo) == data


def test_default_history_keeps_its_commit_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pinned: the ids the default history had before the demo had variants (the real
    tree's are in docs/examples: head 497e2bae621e, regression d59fc21905a7)."""
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    data = demo.create(tiny_default_tree(tmp_path / "one"))
    assert data == {
        "base": "5bbeee098daf59dd4b69bcb728a0ea4cc68f1be4",
        "head": "6555a69ddd4cc6fb8cf883c8b6f43d3b8935e796",
        "regression": "cfd45e1c93a6bcb53f527f029c23e2a7c3692bb9",
        "branch": "kbisect-demo",
        "edits": "20a9d50406524ab5",
    }
