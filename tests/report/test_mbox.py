"""`kbisect report --format mbox` and `kbisect diff`: every compare and bisect example as a
mail (golden files tests/data/examples/<run>.mbox), read back by the email package and
by `git mailinfo`; every text and mail line at most 72 columns; the diffs of stored
examples (golden files diff-*.txt/json/md, written by `python -m tests.report.golden`)."""

from __future__ import annotations

import email
import email.policy
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.commands.diff import bisect_store
from kbisect.compare import diff
from kbisect.report import mbox
from kbisect.report.text import WIDTH, command
from tests.report.golden import (
    DIFFS,
    EXAMPLES,
    GOLDEN,
    MAILS,
    RUNS,
    copy,
    diff_golden,
    render,
    render_diff,
)


@pytest.mark.parametrize("name", MAILS)
def test_the_mail_renders_as_the_golden_file(name: str, tmp_path: Path) -> None:
    run = copy(name, tmp_path)
    code, out = render(run, "mbox")
    assert code == 0
    assert out == (GOLDEN / f"{name}.mbox").read_text()
    assert (run / mbox.MBOX).read_text().replace(str(run), "RUN") == out


@pytest.mark.parametrize("name", RUNS)
def test_every_text_and_mail_line_fits_72_columns(name: str) -> None:
    for suffix in (".txt", ".mbox"):
        path = GOLDEN / f"{name}{suffix}"
        if path.is_file():
            long = [x for x in path.read_text().splitlines() if len(x) > WIDTH]
            assert long == [], (path.name, long)


@pytest.mark.parametrize("name", MAILS)
def test_the_mail_parses_back(name: str) -> None:
    text = (GOLDEN / f"{name}.mbox").read_text()
    assert text.startswith("From kbisect ")
    msg = email.message_from_string(text.split("\n", 1)[1], policy=email.policy.default)
    assert msg["Subject"].startswith("[kbisect] ") and "pgbench.tps" in msg["Subject"]
    assert msg["From"] == mbox.PLACEHOLDER_FROM
    assert msg["Date"]  # the summary's `created`: the golden file never changes
    body = msg.get_content()
    for part in ("Hello,", "testcase: pgbench", "machine:", "reproduce:", *mbox.TRAILERS):
        assert part in body, (name, part)
    assert body.endswith(mbox.SIGNATURE)


@pytest.mark.skipif(not shutil.which("git"), reason="git")
@pytest.mark.parametrize("name", ["demo", "machine-bisect"])
def test_git_mailinfo_reads_the_subject_and_the_body(name: str, tmp_path: Path) -> None:
    mail = GOLDEN / f"{name}.mbox"
    info = subprocess.run(
        ["git", "mailinfo", "-k", str(tmp_path / "msg"), str(tmp_path / "patch")],
        stdin=mail.open("rb"),
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    subject = next(x for x in info.splitlines() if x.startswith("Subject: "))
    want = {
        "demo": 'reverting d59fc21905a7 ("net/unix: [kbisect demo] SYNTHETIC REGRESSION: '
        'busy delay in sendmsg") restores +99.1% pgbench.tps (simple-update-2vcpu)',
        "machine-bisect": "d59fc21905a7 net/unix: [kbisect demo] SYNTHETIC REGRESSION: "
        "busy delay in sendmsg: -51.3% pgbench.tps (smoke)",
    }
    assert subject == f"Subject: [kbisect] {want[name]}"
    assert "Email: edit-me@example.invalid" in info
    body = (tmp_path / "msg").read_text()
    assert body.startswith("Hello,\n") and "Reported-by: <your name>" in body


def test_a_revert_check_reads_as_what_the_commit_costs() -> None:
    text = (GOLDEN / "demo.txt").read_text()
    flat = " ".join(text.split())
    assert "an improvement" not in flat
    assert flat.startswith(
        "kbisect checked a revert in pgbench tps (simple-update-2vcpu): reverting d59fc21905a7 "
        '("net/unix: [kbisect demo] SYNTHETIC REGRESSION: busy delay in sendmsg") restores '
        "+99.1% [+68.8%, +134.7%]: d59fc21905a7 costs -49.8% [-57.4%, -40.8%]."
    )
    # the commit's cost is A/B's interval, 1/high and 1/low of B/A's
    assert "B/A 1.991x (+99.1%), 95% CI [1.688, 2.347]" in flat


def test_the_machine_and_the_build_are_in_the_text() -> None:
    demo, machine = ((GOLDEN / f"{n}.txt").read_text() for n in ("demo", "machine-bisect"))
    assert "target: vng (x86_64), accelerator tcg" in demo and "vng vng" not in demo
    assert "target: ssh emu (x86_64)\n" in machine and "accelerator None" not in machine
    assert "cpu: QEMU TCG CPU version 2.5+, 2 cores, 2 threads" in demo
    assert "memory: 1975 MB, NUMA nodes 1" in machine
    assert "compiler: gcc (Debian 12.2.0-14+deb12u1) 12.2.0" in demo
    assert "kconfig: sha256 10e3aea54c07, from tinyconfig" in demo
    assert "base/console.config" in demo and "tree: linux-6.12-debian" in demo


@pytest.mark.parametrize("name", MAILS)
def test_subjects_are_wrapped_between_words_only(name: str) -> None:
    """Every commit subject the summary records is in the text and the mail whole, its
    words kept (a wrap at a space joins back with one space)."""
    summary = json.loads((EXAMPLES / name / "summary.json").read_text())
    subjects = [(side.get("kernel") or {}).get("subject") for side in summary["sides"].values()] + [
        (summary.get("first_bad") or {}).get("subject")
    ]
    assert any(subjects)
    for suffix in (".txt", ".mbox"):
        flat = " ".join((GOLDEN / f"{name}{suffix}").read_text().split())
        for subject in filter(None, subjects):
            assert subject in flat, (name, suffix, subject)


def test_a_long_word_in_a_command_is_split_for_the_shell(tmp_path: Path) -> None:
    path = "kernel-patches/7.2/" + "0001-" + "-".join(["word"] * 20) + ".patch"
    lines = command(f"kbisect compare --patch-b {path} --scenario smoke")
    assert max(map(len, lines)) <= WIDTH
    script = tmp_path / "s.sh"
    script.write_text("printf '%s\\n' " + "\n".join(lines).removeprefix("  kbisect compare "))
    out = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["--patch-b", path, "--scenario", "smoke"]


@pytest.mark.parametrize(
    "bad", ["nobody", "a@b", "x\ny@example.org", "<>", "@example.org"], ids=repr
)
def test_a_bad_address_is_refused_in_one_line(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy("demo", tmp_path)
    assert cli.main(["report", str(run), "--format", "mbox", "--to", bad]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "not a mail address" in err or "control characters" in err
    assert not (run / mbox.MBOX).exists()


def test_to_cc_and_from_are_the_headers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = copy("demo-bisect", tmp_path)
    argv = ["--to", "Dev <dev@example.org>", "--cc", "a@example.org", "--cc", "b@example.org"]
    assert (
        cli.main(["report", str(run), "--format", "mbox", *argv, "--from", "Me <me@ex.org>"]) == 0
    )
    msg = email.message_from_string(capsys.readouterr().out.split("\n", 1)[1])
    assert (msg["To"], msg["Cc"], msg["From"]) == (
        "Dev <dev@example.org>",
        "a@example.org, b@example.org",
        "Me <me@ex.org>",
    )


def test_to_without_mbox_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(copy("demo", tmp_path)), "--to", "a@example.org"]) == 2
    assert "--format mbox" in capsys.readouterr().err


def test_a_study_has_no_mail(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main(["report", str(copy("demo-study", tmp_path)), "--format", "mbox"]) == 2
    assert "has no mail" in capsys.readouterr().err


# --- kbisect diff ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "argv"), DIFFS, ids=[n for n, _ in DIFFS])
def test_the_diff_prints_as_the_golden_file(name: str, argv: tuple[str, ...]) -> None:
    code, out = render_diff(argv)
    assert out == diff_golden(name, argv).read_text()
    head = json.loads(out)["verdict"]["kind"] if "json" in argv else out.split("\n\n")[0]
    assert code == (1 if "regression" in head else 0)
    if "--format" not in argv:
        assert max(map(len, out.splitlines())) <= WIDTH


def test_the_diff_uses_compare_statistics() -> None:
    """demo:A against demo:B is the demo compare itself: the same verdict, to the digit."""
    code, out = render_diff(("demo:A", "demo:B", "--format", "json"))
    got = json.loads(out)["verdict"]
    stored = json.loads((EXAMPLES / "demo" / "summary.json").read_text())["verdict"]
    assert code == 0
    assert got["kind"] == stored["kind"] == "improvement"
    assert got["ratio"] == pytest.approx(stored["ratio"])
    assert got["a"]["n"] == stored["a"]["n"] and got["b"]["n"] == stored["b"]["n"]


def test_a_regression_exits_1() -> None:
    code, out = render_diff(("demo:B", "demo:A"))
    flat = " ".join(out.split())
    assert code == 1 and "a regression (B/A = 0.502x [0.426, 0.592])" in flat
    assert "add boots" not in flat  # the interval settles it: nothing to add


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("demo", "demo:B"), "a compare has two sides: pick one"),
        (("demo:C", "demo:B"), "a compare has two sides: pick one"),
        (("drift-bisect", "demo:A"), "pick one, DIR:<commit>"),
        (("drift-bisect:ffff", "demo:A"), "no revision of the bisect store"),
        (("demo:A", "founding:A"), "ran different scenarios"),
        (("nosuch:A", "demo:A"), "no such run directory"),
        (("demo:A", "demo-bisect-posterior:d59fc"), "need at least 2 boots"),
    ],
)
def test_the_diff_refuses_in_one_line(
    argv: tuple[str, ...], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    words = [str(EXAMPLES / w) for w in argv]
    assert cli.main(["diff", *words]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err


def test_force_lists_the_scenario_fields_that_differ() -> None:
    a, b = (diff.resolve(str(EXAMPLES / x), bisect_store) for x in ("demo:A", "founding:A"))
    differs = diff.check_scenarios(a, b, force=True)
    assert "pgbench.clients: 16 -> 64" in differs
    assert "postgres.settings.shared_buffers: 64MB -> 16MB" in differs
    assert not any(d.startswith("description") for d in differs)


def test_a_bisection_copied_with_its_store_is_read_from_its_copy(tmp_path: Path) -> None:
    """The state's store is the machine's, shared by the tree's bisections: a later run's
    samples of the same revision there must not change what a stored example says."""
    run = tmp_path / "drift-bisect"
    shutil.copytree(EXAMPLES / "drift-bisect", run)
    rev = next((run / "store").glob("a1dfdbe6aceb*"))
    shared = tmp_path / "shared"
    shutil.copytree(rev, shared / rev.name)
    extra = shared / rev.name / "samples"
    for i, path in enumerate(sorted(extra.glob("*-sample.json"))):
        later = json.loads(path.read_text())
        later["boot_dir"] = f"{later.get('boot_dir')}-later"  # another boot, not a copy
        (extra / f"{100 + i:03d}-sample.json").write_text(json.dumps(later))
    st = json.loads((run / "state.json").read_text())
    (run / "state.json").write_text(json.dumps({**st, "store": str(shared)}))
    copied = diff.resolve(f"{run}:a1dfdbe6aceb", bisect_store)
    assert copied.dir == rev
    shutil.rmtree(run / "store")
    live = diff.resolve(f"{run}:a1dfdbe6aceb", bisect_store)
    assert live.dir == shared / rev.name
    assert len(live.samples) > len(copied.samples)
