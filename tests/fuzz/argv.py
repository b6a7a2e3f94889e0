"""Generated command lines for every subcommand: each starts from a command line that
works on the fake target (`BASE`), then hypothesis overrides, adds or drops options with
values that are valid, borderline or malformed (`OPTIONS`).

Values are strings that may hold `{token}`s, resolved per case by `Places` to paths in
the case's sandbox (a fresh copy of the seed inputs and runs) or to the user's commits:
a generated command line names what it means, so a failure reads as a reproducer.
"""

from __future__ import annotations

import itertools
import math
import shutil
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from tests.fuzz.sandbox import Sandbox, World
from tests.fuzz.world import QUICK_BISECT, Seeds

SearchStrategy = st.SearchStrategy

# --- values -------------------------------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
NUMBERS = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "-1",
    "0",
    "1e9",
    "1e308",
    "99999999999999999999",
    "",
    " ",
    "٣",
    "0x10",
    "1_0",
    "3.5",
    "-0",
    "1e-320",
    "abc",
]


@dataclass(frozen=True)
class Kind:
    """An option's values: what a user would mean (`good`), and the rest (`bad`)."""

    good: SearchStrategy[str | None]
    bad: SearchStrategy[str | None]
    refused: Callable[[str], bool] = lambda value: False  # a value that must give exit 2


def not_finite(value: str) -> bool:
    """nan, inf, -inf (as Python reads them): no count, share or threshold is that."""
    try:
        return not math.isfinite(float(value))
    except ValueError:
        return False


def negative_or_not_finite(value: str) -> bool:
    try:
        return int(value.strip()) < 0
    except ValueError:
        return not_finite(value)


def kind(good: list[str], bad: list[str], text: bool = True) -> Kind:
    extra = [TEXT] if text else []
    return Kind(st.sampled_from(good), st.one_of(st.sampled_from(bad), *extra))


def count(*good: str, signed: bool = False) -> Kind:
    """A whole number: a negative one (unless signed, like a seed) or nan/inf is refused."""
    return Kind(
        st.sampled_from(good),
        st.one_of(st.integers(-2, 12).map(str), st.sampled_from(NUMBERS), TEXT),
        not_finite if signed else negative_or_not_finite,
    )


def number(*good: str) -> Kind:
    """A real number: nan and inf are refused."""
    floats = st.floats(allow_nan=True, allow_infinity=True).map(str)
    return Kind(
        st.sampled_from(good), st.one_of(st.sampled_from(NUMBERS), floats, TEXT), not_finite
    )


# a file or dir the option names, of the wrong kind
PATHS = [
    "{missing}",
    "{dir}",
    "{file}",
    "{binary}",
    "",
    "/dev/null",
    "{scenario}",
    "{target}",
    "{image}",
    "{compare_run}",
]
PATH = Kind(st.sampled_from(["{file}"]), st.one_of(st.sampled_from(PATHS), TEXT))
SCENARIO = kind(
    ["smoke", "{scenario}", "{space}/smoke.toml"],
    ["nosuch", "../../etc/passwd", "{bad_scenario}", *PATHS],
)
TARGET = kind(
    ["{target}", "fake"], ["{machine}", "nosuch", "vng", "{bad_target}", "{bad_pool}", *PATHS]
)
ARCH = kind(["x86_64"], ["arm64", "sparc", "", "X86_64", "all"], text=False)
REV = kind(
    ["{sha1}", "{sha4}", "{sha7}", "HEAD", "v6.12-user"],
    ["HEAD~99", "nosuch", "", "-x", "{sha1}..{sha7}", "feature", "refs/bisect/bad", "0" * 40],
)
TREE = kind(["{repo}"], ["{missing}", "{file}", "{dir}", "", "{space}", "default"], text=False)
KERNEL = kind(["{image}", "{image1}", "{image_dir}"], ["{bad_image}", *PATHS])
GOOD_SETS = [
    "pgbench.clients=2",
    "pgbench.scale=2",
    "postgres.settings.huge_pages=on",
    "guest.vcpus=1",
    "pgbench.duration_s=3",
]
KEYS = [
    "pgbench.clients",
    "pgbench.scale",
    "pgbench.duration_s",
    "pgbench.runs",
    "guest.vcpus",
    "guest.memory_mb",
    "postgres.settings.huge_pages",
    "postgres.major",
    "timeouts.boot_s",
    "pgbench",
    "name",
    "description",
    "nosuch.key",
    "pgbench.clients.x",
    "fio.enabled",
    "profile.enabled",
    "profile.seconds",
    "profile.frequency",
    "profile.event",
    "guest.append",
    "",
    "pgbench.",
    ".x",
]
SETTING_VALUES = [
    "1",
    "4",
    "0",
    "-1",
    "nan",
    "inf",
    "1e100",
    "on",
    "true",
    '"x"',
    "[1, 2]",
    "{{a = 1}}",
    "",
    "x y",
    "1.5",
]
SET = Kind(
    st.sampled_from(GOOD_SETS),
    st.one_of(
        st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS), st.sampled_from(SETTING_VALUES)),
        st.sampled_from(["pgbench.clients", "=1", "==", "pgbench.clients==2"]),
        TEXT,
    ),
)
# a PostgreSQL source (`kbisect pg-build`, --pg-build): the user's tree is no PostgreSQL
# tree, so the good ones stop before any build (exit 3); no valid debian:MAJOR, whose
# source a build would fetch
PG_SOURCE = kind(
    ["{repo}", "{repo}@{sha4}"],
    ["debian:16", "debian:x", "debian:", "{missing}", "{dir}", "{file}", "{repo}@", "{space}", ""],
)
PG_PATCH = kind(["{patch}"], ["{missing}", "{dir}", "{file}", "{binary}", "", "/dev/null"])
AXIS = Kind(
    st.sampled_from(["pgbench.clients=2,4", "pgbench.scale=1,2"]),
    st.one_of(
        st.sampled_from(
            [
                "postgres=debian:16",
                "postgres=debian:17+",
                "postgres={repo}+{missing}",
                "postgres={repo}+{file}",
                "postgres={repo},{repo}+{patch}",
                "postgres={repo}+{patch}+{patch}",
                "postgres=",
            ]
        ),
        st.builds(
            lambda k, vs: f"{k}={','.join(vs)}",
            st.sampled_from(KEYS),
            st.lists(st.sampled_from(SETTING_VALUES), max_size=3),
        ),
        TEXT,
    ),
)
KERNELS = Kind(
    st.sampled_from(["{image_dir},{image1_dir}", "{image},{image1}"]),
    st.one_of(
        st.lists(
            st.sampled_from(["{image_dir}", "{missing}", "", "{file}", "{bad_image}"]), max_size=3
        ).map(",".join),
        TEXT,
    ),
)
OUT = kind(
    ["{out}"],
    [
        "{compare_run_copy}",
        "{file}",
        "{file}/sub",
        "{dir}",
        "",
        "{scenario}",
        "{missing}/deep/er",
        "{space}/out",
    ],
    text=False,
)
RUN_DIR = kind(
    ["{compare_run}", "{bisect_run}", "{study_run}"],
    ["{dir}", "{missing}", "{file}", "", "{binary}"],
    text=False,
)
RANGE = ["--tree", "{repo}", "--good", "{sha1}", "--bad", "{sha7}"]  # of the user's history
FLAG = Kind(st.just(None), st.just(None))
ANY_TEXT = Kind(st.sampled_from(["x=1", "quiet", ""]), TEXT)


def choice(good: list[str], bad: list[str]) -> Kind:
    return kind(good, bad, text=False)


@dataclass
class Spec:
    """One subcommand: the words before the options, the options of a working command line
    on the fake target, and what may be generated for each option (a list: repeatable)."""

    words: list[str]
    base: dict[str, str | None]
    options: dict[str, Kind | list[Kind]]
    positional: Kind = field(default_factory=lambda: Kind(st.just(""), st.just("")))
    examples: int = 30  # doctor's checks take seconds: fewer
    working: list[str] = field(default_factory=list)  # the positional words that work


COMMON_RUN: dict[str, Kind | list[Kind]] = {
    "--scenario": SCENARIO,
    "--target": TARGET,
    "--arch": ARCH,
    "--append": ANY_TEXT,
    "--set": [SET],
    "--retakes": count("0", "2"),
    "--disturbed-share": number("0.25", "0.5", "0"),
}
WHERE = {"--scenario": "{scenario}", "--target": "{target}"}
FRACTION = number("0.02", "0.1", "0")

RC_NEXT: dict[str, Kind | list[Kind]] = {
    "--tree": TREE,
    "--history": choice(["{rc_history}", "{out}"], ["{file}", "{binary}", "", "{compare_run}"]),
    "--pattern": kind(["v*", "v*-rc*"], ["[", "*", ""]),
    "--linux-next": FLAG,
    "--json": FLAG,
}

SPECS: dict[str, Spec] = {
    "doctor": Spec(
        ["doctor"],
        {},
        {"--recheck": FLAG, "--json": FLAG, "--arch": ARCH, "--target": TARGET},
        examples=3,
    ),
    "tree": Spec(
        ["tree"],
        {},
        {},
        Kind(
            st.sampled_from(["check {repo}", "default"]),
            st.sampled_from(
                [
                    "check {missing}",
                    "check {file}",
                    "check {dir}",
                    "check",
                    "nosuch",
                    "check {space}",
                    "check {binary}",
                ]
            ),
        ),
    ),
    "build": Spec(
        ["build"],
        {"--tree": "{repo}", "--rev": "{sha4}", "--target": "{target}"},
        {
            "--tree": TREE,
            "--rev": REV,
            "--target": TARGET,
            "--arch": ARCH,
            "--config": [choice(["base"], ["nosuch", "", "../x", "{file}", "{missing}"])],
            "--base": choice(["tinyconfig", "defconfig"], ["nosuch", "", "{file}"]),
            "--allow-dropped": [choice(["CONFIG_X"], ["X", "", "all"])],
            "-j": count("1", "2"),
            "--json": FLAG,
        },
    ),
    "pg-build": Spec(
        ["pg-build"],
        {},
        {"--patch": [PG_PATCH], "--json": FLAG},
        PG_SOURCE,
        working=["{repo}"],
    ),
    "image": Spec(
        ["image"],
        {},
        {
            "--arch": ARCH,
            "--pg-major": count("15"),
            "--mirror": kind(["http://192.0.2.1/"], ["", "not a url"]),
            "--with-perf": FLAG,
            "--json": FLAG,
        },
    ),
    "run": Spec(
        ["run"],
        {"--kernel": "{image}", **WHERE, "--out": "{out}"},
        {"--kernel": KERNEL, **COMMON_RUN, "--runs": count("1", "2"), "--out": OUT},
    ),
    "compare": Spec(
        ["compare"],
        {
            "--kernel": "{image}",
            "--append-a": "x=1",
            "--append-b": "x=2",
            **WHERE,
            "--boots": "3",
            "--out": "{out}",
        },
        {
            "--tree": TREE,
            "--base": REV,
            "--revert": REV,
            "--rev-b": REV,
            "--kernel": KERNEL,
            "--kernel-a": KERNEL,
            "--kernel-b": KERNEL,
            "--config": [choice(["base"], ["nosuch", ""])],
            "--base-config": choice(["tinyconfig"], ["nosuch", ""]),
            **COMMON_RUN,
            "--append-a": ANY_TEXT,
            "--append-b": ANY_TEXT,
            "--set-a": [SET],
            "--set-b": [SET],
            "--label-a": ANY_TEXT,
            "--label-b": ANY_TEXT,
            "--pg-build": PG_SOURCE,
            "--pg-build-b": PG_SOURCE,
            "--pg-patch-b": [PG_PATCH],
            "--boots": count("2", "3", "4", "auto"),
            "--max-boots": count("2", "3"),
            "--noise-prior": choice(["auto", "off"], ["on", ""]),
            "--order": choice(["abba", "random"], ["x", ""]),
            "--retries": count("0", "1"),
            "--seed": count("1", "7", signed=True),
            "--min-effect": FRACTION,
            "--out": OUT,
            "--resume": RUN_DIR,
        },
    ),
    "report": Spec(
        ["report"],
        {},
        {
            "--format": choice(["markdown", "text", "mbox"], ["html", ""]),
            "--min-effect": FRACTION,
            "--to": [choice(["Dev <dev@example.org>", "a@b.example"], ["", "nobody", "a@b"])],
            "--cc": [choice(["list@example.org"], ["x\ny@example.org", "<>"])],
            "--from": choice(["Me <me@example.org>"], ["me", "@example.org"]),
        },
        RUN_DIR,
        working=["{compare_run}"],
    ),
    "diff": Spec(
        ["diff"],
        {},
        {
            "--format": choice(["text", "json", "markdown"], ["html", ""]),
            "--min-effect": FRACTION,
            "--force": FLAG,
        },
        kind(
            ["{compare_run}:A {compare_run}:B", "{compare_run}:B {compare_run_copy}:A"],
            [
                "{compare_run} {compare_run}:B",
                "{compare_run}:C {compare_run}:A",
                "{bisect_run} {compare_run}:A",
                "{bisect_run}:zz {compare_run}:A",
                "{study_run} {compare_run}:A",
                "{missing} {compare_run}:A",
                "{file}:A {compare_run}:B",
                "{dir} {dir}",
                "{compare_run}:A",
                "",
            ],
            text=False,
        ),
        working=["{compare_run}:A", "{compare_run}:B"],
    ),
    "bisect": Spec(
        ["bisect"],
        {
            "--tree": "{repo}",
            "--good": "{sha1}",
            "--bad": "{sha7}",
            **WHERE,
            **QUICK_BISECT,
        },
        {
            "--tree": TREE,
            "--good": REV,
            "--bad": REV,
            **COMMON_RUN,
            "--config": [choice(["base"], ["nosuch", ""])],
            "--base-config": choice(["tinyconfig"], ["nosuch"]),
            "--lower-is-better": FLAG,
            "--runs-min": count("2", "3"),
            "--runs-max": count("3", "4"),
            "--threshold": number("850", "900"),
            "--recheck-samples": count("2", "3"),
            "--method": choice(["git", "posterior"], ["x"]),
            "--confidence": number("0.9", "0.95"),
            "--max-boots": count("12", "20"),
            "--references": count("0", "1"),
            "--batch": count("1", "2"),
            "--pg-build": PG_SOURCE,
            "--pg-patch": [PG_PATCH],
            "--resume": RUN_DIR,
        },
    ),
    "bisect-step": Spec(
        ["bisect-step"],
        {**WHERE, "--store": "{out}"},
        {
            **COMMON_RUN,
            "--lower-is-better": FLAG,
            "--runs-min": count("2"),
            "--runs-max": count("3"),
            "--threshold": number("850"),
            "--store": OUT,
            "--booted": FLAG,
            "--kernel": KERNEL,
            "--reference-good": REV,
            "--reference-bad": REV,
            "--references": count("0", "1"),
            "--pg-build": PG_SOURCE,
            "--pg-patch": [PG_PATCH],
        },
    ),
    "rc-next": Spec(
        ["rc", "next"],
        {"--tree": "{repo}", "--history": "{rc_history}"},
        RC_NEXT,
    ),
    "rc-next-missed": Spec(
        ["rc", "next"],
        {"--tree": "{repo}", "--history": "{rc_history}", "--missed": None},
        RC_NEXT,
    ),
    "history": Spec(
        ["history"],
        {"--out": "{out}"},
        {
            "--scenario": kind(["smoke"], ["", "no-such"]),
            "--scenario-hash": kind(["0"], ["", "zz"]),
            "--machine": kind(["fake"], [""]),
            "--by": choice(["tag", "time", "axis:pgbench.clients"], ["", "axis:", "colour"]),
            "--baseline": kind(["v6.13-rc2"], [""]),
            "--rc-history": choice(["{rc_history}"], ["{file}", "{binary}", "{missing}", ""]),
            "--format": choice(["text", "markdown", "json"], ["html", ""]),
            "--out": choice(["{out}"], ["{file}", "{binary}"]),
        },
        RUN_DIR,
        working=["{compare_run}"],
    ),
    "rc-record": Spec(
        ["rc", "record"],
        {
            "--history": "{rc_history}",
            "--tag": "v6.13-rc2",
            "--commit": "{sha7}",
            "--result": "{compare_run}",
            "--scenario-hash": "0123abcd",
            "--tps": "1000",
        },
        {
            "--history": choice(
                ["{rc_history}", "{out}"], ["{file}", "{binary}", "", "{compare_run}"]
            ),
            "--tag": kind(["v6.13-rc3"], ["", "-x", "a b"]),
            "--commit": REV,
            "--result": RUN_DIR,
            "--scenario-hash": kind(["abcd0123"], [""]),
            "--tps": number("999.5", "1"),
        },
    ),
    "demo": Spec(
        ["demo"],
        {},
        {"--json": FLAG, "--variant": choice(["default", "steps"], ["", "stairs", "STEPS"])},
    ),
    "study": Spec(
        ["study"],
        {"--target": "{target}", "--yes": None, "--out": "{out}"},
        {
            "--kernels": KERNELS,
            "--tree": TREE,
            "--baseline": REV,
            "--target": TARGET,
            "--scenario": SCENARIO,
            "--axis": [AXIS],
            "--set": [SET],
            "--append": ANY_TEXT,
            "--boots": count("2", "3"),
            "--retries": count("0", "1"),
            "--retakes": count("0"),
            "--disturbed-share": FRACTION,
            "--seed": count("3", signed=True),
            "--min-effect": FRACTION,
            "--budget": number("1", "0.5"),
            "--yes": FLAG,
            "--dry-run": FLAG,
            "--name": kind(["fz2"], ["", "../x", "a/b"]),
            "--share": kind(["1/2"], ["0/0", "3/2", "1/0"]),
            "--out": OUT,
            "--resume": RUN_DIR,
            "--runners": count("2", "3"),
        },
        Kind(
            st.sampled_from(["{study}", "plan {study}", "merge {study_run}"]),
            st.sampled_from(
                [
                    "{file}",
                    "{binary}",
                    "{dir}",
                    "{missing}",
                    "kernel-series",
                    "{bad_study}",
                    "plan",
                    "merge",
                    "{study} {study}",
                ]
            ),
        ),
        working=["{study}"],
    ),
    "emu": Spec(
        ["emu"],
        {},
        {
            "--name": kind(["emu", "fz"], ["../../x", "a/b", ""]),
            "--memory-mb": count("512"),
            "--cpus": count("1"),
            "--fresh": FLAG,
            "--force": FLAG,
            "--mirror": kind(["http://192.0.2.1/"], ["", "not a url"]),
        },
        Kind(
            st.sampled_from(["status", "down", "reset", "up", "image"]),
            st.sampled_from(["nosuch", ""]),
        ),
        working=["up"],
    ),
    "ktest-config": Spec(
        ["ktest-config"],
        {
            "--target": "{machine}",
            "--scenario": "{scenario}",
            "--tree": "{repo}",
            "--good": "{sha1}",
            "--bad": "{sha7}",
            "--out": "{out}/ktest.conf",
        },
        {
            "--target": TARGET,
            "--scenario": SCENARIO,
            "--threshold": number("850"),
            "--min-config": PATH,
            "--no-build": PATH,
            "--initrd": PATH,
            "--tree": TREE,
            "--test-type": choice(["test", "bisect"], [""]),
            "--good": REV,
            "--bad": REV,
            "--output-dir": OUT,
            "-j": count("2"),
            "--out": OUT,
        },
    ),
    "db": Spec(
        ["db"],
        {},
        {
            "--scenario": kind(["smoke"], ["", "../x"]),
            "--scenario-hash": kind(["0123abcd"], ["", "xyz", "0" * 65]),
            "--kind": kind(["compare", "bisect"], [""]),
            "--machine": kind(["0123"], [""]),
            "--run": kind(["{compare_run}"], ["{missing}", ""]),
            "--commit": REV,
            "--tag": kind(["v6.12-user"], ["", "-x"]),
            "--since": kind(["2026-01-01", "2026-01-01T10:00:00Z"], ["yesterday", "", "2026-13"]),
            "--status": choice(["ok", "failed", "disturbed"], ["great", "", "OK"]),
        },
        Kind(
            st.sampled_from(
                ["query", "info", "rebuild", "rebuild {compare_run}", "rebuild {bisect_run}"]
            ),
            st.sampled_from(
                ["", "nosuch", "rebuild {missing}", "rebuild {file}", "rebuild {dir}", "info x"]
            ),
        ),
        working=["query"],
    ),
    "export": Spec(
        ["export"],
        {"--format": "csv"},
        {
            "--format": choice(["csv", "json", "kcidb"], ["xml", "", "CSV"]),
            "--query": FLAG,
            "-o": kind(
                ["{out}/export.csv"], ["{dir}", "{file}/sub", "", "/dev/null/x"], text=False
            ),
            "--scenario": kind(["smoke"], [""]),
            "--commit": REV,
            "--status": choice(["ok", "failed"], ["great", ""]),
            "--since": kind(["2026-01-01"], ["yesterday", ""]),
        },
        RUN_DIR,
        working=["{compare_run}"],
    ),
}
# the words of `emu`, `tree` and `db` come before the options
SUBCOMMAND_FIRST = {"emu", "tree", "db"}


@dataclass(frozen=True)
class Line:
    """A generated command line (with `{token}`s) and, when one of its values must be
    refused (nan for a number, -1 for a count), which."""

    argv: list[str]
    refuse: str = ""


@st.composite
def command_line(draw: st.DrawFn, name: str) -> Line:
    """A command line of subcommand `name`: the working one, with up to four options
    changed, each to a good value (3 in 5) or a bad one (2 in 5); now and then a required
    option dropped or an unknown word added."""
    spec = SPECS[name]
    opts: dict[str, list[str | None]] = {k: [v] for k, v in spec.base.items()}
    refuse: list[str] = []

    def value(key: str, k: Kind) -> str | None:
        v = draw(k.good if draw(st.integers(0, 4)) < 3 else k.bad)
        if v is not None and k.refused(v):
            refuse.append(f"{key} {v}")
        return v

    if spec.options:
        for key in draw(st.lists(st.sampled_from(sorted(spec.options)), max_size=4, unique=True)):
            option = spec.options[key]
            kinds = option if isinstance(option, list) else [option]
            opts[key] = [value(key, kinds[0]) for _ in range(draw(st.integers(1, len(kinds))))]
    if spec.base and draw(st.integers(0, 9)) == 0:
        opts.pop(draw(st.sampled_from(sorted(spec.base))), None)
    words = value("", spec.positional) or ""
    positional = words.split(" ") if words else []
    argv = list(spec.words)
    if name in SUBCOMMAND_FIRST:
        argv += positional
    for key, values in opts.items():
        for v in values:
            argv += [key] if v is None else [key, v]
    if name not in SUBCOMMAND_FIRST:
        argv += positional
    if draw(st.integers(0, 19)) == 0:
        argv.append(draw(st.sampled_from(["--nosuch", "-", "--", "extra"])))
    return Line(argv, "; ".join(refuse))


# --- the places tokens name ---------------------------------------------------------------


class Places(dict[str, str]):
    """{token} -> path, made on first use in the case's sandbox: copies of the seed inputs
    and runs (the case may write its runs, never the inputs)."""

    def __init__(self, world: World, seeds: Seeds, sb: Sandbox) -> None:
        super().__init__()
        self.world, self.seeds, self.sb = world, seeds, sb
        self.runs = sb.root / "runs"
        self.out = sb.root / "out"
        sb.writable += [self.runs, self.out]

    def __missing__(self, key: str) -> str:
        value = self._make(key)
        self[key] = value
        return value

    def _make(self, key: str) -> str:
        s, i = self.seeds, self.sb.inputs
        if key.startswith("sha") and key[3:].isdigit():
            return self.world.shas[int(key[3:])]
        simple = {
            "repo": self.world.repo,
            "missing": i / "missing",
            "out": self.out / "run",
        }
        if key in simple:
            return str(simple[key])
        if key == "dir":
            (i / "empty-dir").mkdir(exist_ok=True)
            return str(i / "empty-dir")
        if key == "file":
            (i / "notes.txt").write_text("not what kbisect wants\n")
            return str(i / "notes.txt")
        if key == "patch":
            (i / "note.diff").write_text("--- /dev/null\n+++ b/PG_NOTE\n@@ -0,0 +1 @@\n+note\n")
            return str(i / "note.diff")
        if key == "binary":
            (i / "blob.bin").write_bytes(b"\xff\xfe\x00\x80kbisect\xc3\x28")
            return str(i / "blob.bin")
        if key == "bad_pool":  # a pool file naming one member twice (targets/pool/)
            member = '[[member]]\nkind = "fake"\nname = "a"\n'
            (i / "bad-pool.toml").write_text('kind = "pool"\n' + member + member)
            return str(i / "bad-pool.toml")
        if key == "space":
            d = i / "with space é"
            d.mkdir(exist_ok=True)
            shutil.copy(s.scenario, d / "smoke.toml")
            return str(d)
        inputs = {
            "scenario": s.scenario,
            "target": s.target,
            "machine": s.machine,
            "study": s.study,
        }
        if key in inputs:
            shutil.copy(inputs[key], i / inputs[key].name)
            return str(i / inputs[key].name)
        if key in ("image", "image1", "image_dir", "image1_dir"):
            n = 1 if key.startswith("image1") else 0
            dest = i / f"k{n}"
            if not dest.exists():
                shutil.copytree(s.images[n].parent, dest)
            return str(dest if key.endswith("_dir") else dest / s.images[n].name)
        bad = {
            "bad_scenario": (s.scenario, b'name = "smoke"\n# \xe9t\xe9\n'),
            "bad_target": (s.target, b'kind = "fake"\ncv = nan\n'),
            "bad_image": (s.images[0], b"fake-kernel\n\xff\n-5\n"),
            "bad_study": (s.study, s.study.read_bytes()[:40]),
        }
        if key in bad:
            path, content = bad[key]
            (i / "bad").mkdir(exist_ok=True)
            (i / "bad" / path.name).write_bytes(content)
            return str(i / "bad" / path.name)
        runs = {
            "compare_run": s.compare,
            "bisect_run": s.bisect,
            "study_run": s.study_run,
            "rc_history": s.rc_history,
            "compare_run_copy": s.compare,
        }
        if key in runs:
            dest = self.runs / key
            shutil.copytree(runs[key], dest, symlinks=True)
            return str(dest)
        raise KeyError(key)


def resolve(argv: list[str], places: Places) -> list[str]:
    """argv with its tokens replaced; a value with a brace that is not a token stays."""
    out = []
    for a in argv:
        try:
            out.append(string.Formatter().vformat(a, (), places))
        except (KeyError, ValueError, IndexError, AttributeError):
            out.append(a)
    return out


# options whose value is the run's own output (a dir, or the file it writes)
OUTPUTS = ("--out", "--output-dir", "--store", "--history", "--resume")


def run_dirs(argv: list[str]) -> list[Path]:
    """The outputs argv names that a run may write: a new path, or a dir (a run dir, an
    empty dir); an existing file named as an output stays watched, so writing it fails."""
    found = [Path(v) for k, v in itertools.pairwise(argv) if k in OUTPUTS and v]
    return [p for p in found if not p.exists() or p.is_dir()]


NOT_NUMBERS = ("nan", "inf", "-inf")


def numeric_cases() -> list[tuple[str, str, str]]:
    """(subcommand, option, value): every numeric option of every subcommand with nan, inf
    and -inf, and every count with -1: each must be refused (exit 2) before any work."""
    out = []
    for name, spec in SPECS.items():
        for key, option in spec.options.items():
            k = option[0] if isinstance(option, list) else option
            for value in (*NOT_NUMBERS, "-1"):
                if k.refused(value):
                    out.append((name, key, value))
    return out


def numeric_line(name: str, key: str, value: str) -> list[str]:
    """The working command line of `name`, with key set to value."""
    spec = SPECS[name]
    opts = {**spec.base, key: value}
    words = [w for k, v in opts.items() for w in ([k] if v is None else [k, v])]
    if name in SUBCOMMAND_FIRST:
        return [*spec.words, *spec.working, *words]
    return [*spec.words, *words, *spec.working]
