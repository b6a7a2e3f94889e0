"""Scenario files: loading, validation messages, hashing, overrides, the shipped ones."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kbisect.core import paths
from kbisect.core.exceptions import EXIT_USER
from kbisect.scenario import scenario
from kbisect.scenario.fields import ScenarioError

SHIPPED = [
    "contention-2vcpu",
    "io-bound-2vcpu",
    "m8g-7dadeaa6e851",
    "m8g-io-bound",
    "simple-update-2vcpu",
    "simple-update-2vcpu-hugepages",
    "smoke",
]


def smoke_text() -> str:
    return (paths.scenarios_dir() / "smoke.toml").read_text()


def write(tmp_path: Path, text: str, name: str = "smoke") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def edited(tmp_path: Path, old: str, new: str, name: str = "smoke") -> Path:
    text = smoke_text()
    assert old in text, old
    return write(tmp_path, text.replace(old, new), name)


def error_of(path: Path) -> str:
    with pytest.raises(ScenarioError) as info:
        scenario.load(str(path))
    assert info.value.exit_code == EXIT_USER
    return str(info.value)


def test_every_shipped_scenario_loads():
    assert scenario.names() == SHIPPED
    for name in SHIPPED:
        s = scenario.load(name)
        assert s.name == name
        assert re.fullmatch(r"[0-9a-f]{64}", s.hash)
        assert json.loads(s.to_json()) == s.data
        assert s.get("timeouts.total_s") > 0


def test_smoke_is_the_ci_sized_one():
    s = scenario.load("smoke")
    assert (s.get("postgres.major"), s.get("postgres.source")) == (15, "image")
    assert (s.get("pgbench.scale"), s.get("pgbench.clients"), s.get("pgbench.threads")) == (1, 4, 2)
    assert (s.get("pgbench.duration_s"), s.get("pgbench.warmup_runs"), s.get("pgbench.runs")) == (
        5,
        1,
        1,
    )
    assert (s.get("guest.vcpus"), s.get("guest.memory_mb")) == (2, 1024)
    assert (s.get("pgbench.builtin"), s.get("pgbench.protocol")) == ("simple-update", "prepared")


def test_lkml_scenario_is_the_reported_configuration():
    s = scenario.load("m8g-7dadeaa6e851")
    bench = s.get("pgbench")
    assert s.get("postgres.major") == 17
    assert bench["builtin"] == "simple-update" and bench["protocol"] == "prepared"
    assert (bench["clients"], bench["threads"], bench["scale"], bench["fillfactor"]) == (
        1024,
        96,
        8470,
        90,
    )
    assert (bench["duration_s"], bench["runs"]) == (1200, 3)
    settings = s.get("postgres.settings")
    assert settings["huge_pages"] == "off" and settings["shared_buffers"] == "120GB"
    assert settings["max_connections"] >= 1100
    assert s.get("guest.vcpus") == 96
    assert "hardware" in s.data["description"]


def test_hugepages_variant_differs_only_in_huge_pages():
    plain, huge = (
        scenario.load("simple-update-2vcpu"),
        scenario.load("simple-update-2vcpu-hugepages"),
    )
    assert huge.get("postgres.settings.huge_pages") == "on" and huge.get("guest.hugepages") > 0
    assert plain.get("pgbench") == huge.get("pgbench")
    assert plain.hash != huge.hash


def test_contention_scenario_keeps_the_sweep_busy_and_a_boot_short():
    s, plain = scenario.load("contention-2vcpu"), scenario.load("simple-update-2vcpu")
    bench, settings = s.get("pgbench"), s.get("postgres.settings")
    assert bench["builtin"] == "simple-update" and bench["protocol"] == "prepared"
    assert settings["huge_pages"] == "off" and s.get("guest.hugepages") == 0
    assert bench["clients"] >= 16 * s.get("guest.vcpus")  # far more backends than vCPUs
    # scale 10 is about 160 MB: a buffer pool a tenth of it replaces on nearly every access
    assert int(settings["shared_buffers"].removesuffix("MB")) * 10 <= 16 * bench["scale"]
    assert bench["scale"] == plain.get("pgbench.scale")  # the same template, no longer init
    # simple-update-2vcpu's boot takes about 2 min 40 s with 4 x 30 s of pgbench: no longer
    runtime = (bench["warmup_runs"] + bench["runs"]) * bench["duration_s"]
    assert runtime <= (plain.get("pgbench.warmup_runs") + plain.get("pgbench.runs")) * 30
    assert "hypothesis until measured" in " ".join(s.data["description"].split())


def test_wrong_type_names_file_and_field(tmp_path):
    path = edited(tmp_path, "clients = 4", 'clients = "4"')
    assert error_of(path) == 'smoke.toml: pgbench.clients must be an integer, got "4"'


def test_boolean_is_not_an_integer(tmp_path):
    path = edited(tmp_path, "\nruns = 1", "\nruns = true")
    assert error_of(path) == "smoke.toml: pgbench.runs must be an integer, got true"


def test_missing_field(tmp_path):
    path = edited(tmp_path, "duration_s = 5\n", "")
    assert error_of(path) == "smoke.toml: pgbench.duration_s is missing"


def test_unknown_field_lists_the_known_ones(tmp_path):
    path = edited(tmp_path, "clients = 4", "client = 4")
    message = error_of(path)
    assert message.startswith("smoke.toml: unknown field pgbench.client (known here: builtin,")
    assert "clients" in message


def test_enum_and_range(tmp_path):
    assert error_of(edited(tmp_path, 'protocol = "prepared"', 'protocol = "fast"')) == (
        'smoke.toml: pgbench.protocol must be one of simple, extended, prepared, got "fast"'
    )
    assert error_of(edited(tmp_path, "fillfactor = 100", "fillfactor = 5")) == (
        "smoke.toml: pgbench.fillfactor must be 10 to 100, got 5"
    )


def test_the_server_pin_source_and_exact_version(tmp_path):
    major = "major = 15"
    assert error_of(edited(tmp_path, major, f'{major}\nsource = "apt"')) == (
        'smoke.toml: postgres.source must be one of image, host, got "apt"'
    )
    assert error_of(edited(tmp_path, major, f'{major}\nversion = "17 beta"')) == (
        "smoke.toml: postgres.version must be a Debian package version (e.g. 17.12-1), "
        'got "17 beta"'
    )
    assert error_of(edited(tmp_path, major, f'{major}\nversion = "16.4-1"')) == (
        "smoke.toml: postgres.version (16.4-1) is not a version of postgres.major (15)"
    )
    host = f'{major}\nsource = "host"\nversion = "15.12-1"'
    assert error_of(edited(tmp_path, major, host)) == (
        'smoke.toml: postgres.version pins an image\'s server: it goes with source = "image"'
    )
    exact = scenario.load(str(edited(tmp_path, major, f'{major}\nversion = "15.16-0+deb12u1"')))
    assert exact.data["postgres"]["version"] == "15.16-0+deb12u1"
    assert exact.hash != scenario.load("smoke").hash
    host_one = scenario.load("smoke").with_overrides(["postgres.source=host"])
    assert host_one.hash != scenario.load("smoke").hash


def test_section_must_be_a_table(tmp_path):
    path = write(tmp_path, "compare = 3\n" + smoke_text().replace("[compare]\nboots = 3\n", ""))
    assert error_of(path) == "smoke.toml: [compare] must be a table, got 3"


def test_cross_field_rules(tmp_path):
    assert "pgbench.threads (8) exceeds pgbench.clients (4)" in error_of(
        edited(tmp_path, "threads = 2", "threads = 8")
    )
    assert "must be below postgres.settings.max_connections (3)" in error_of(
        edited(tmp_path, "max_connections = 20", "max_connections = 3")
    )
    assert "huge_pages is on but guest.hugepages is 0" in error_of(
        edited(tmp_path, 'huge_pages = "off"', 'huge_pages = "on"')
    )
    both = 'builtin = "simple-update"\nscript = "x.sql"'
    assert "exactly one of builtin or script" in error_of(
        edited(tmp_path, 'builtin = "simple-update"', both)
    )


def test_harness_owned_setting_is_refused(tmp_path):
    path = edited(tmp_path, 'fsync = "on"', 'fsync = "on"\nport = 6000')
    assert error_of(path) == (
        "smoke.toml: postgres.settings.port is set by the harness (use postgres.port)"
    )


def test_invalid_toml_and_name_mismatch(tmp_path):
    assert error_of(write(tmp_path, "name = ")).startswith(f"{tmp_path}/smoke.toml: invalid TOML:")
    other = write(tmp_path, smoke_text(), name="other")
    assert error_of(other) == 'other.toml: name must match the file name ("other"), got "smoke"'


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(ScenarioError) as info:
        scenario.load("nope")
    assert str(info.value) == f'unknown scenario "nope"; available: {", ".join(SHIPPED)}'
    assert info.value.exit_code == EXIT_USER


def test_hash_ignores_description_but_not_defaults_or_settings(tmp_path):
    base = scenario.load("smoke").hash
    text = re.sub(r'description = """.*?"""', 'description = "x"', smoke_text(), flags=re.S)
    assert scenario.load(str(write(tmp_path, text))).hash == base
    # an omitted field equals its default written out
    assert scenario.load(str(edited(tmp_path, "fillfactor = 100\n", ""))).hash == base
    bigger = edited(tmp_path, 'shared_buffers = "32MB"', 'shared_buffers = "33MB"')
    assert scenario.load(str(bigger)).hash != base


def test_script_is_resolved_and_hashed_by_content(tmp_path):
    (tmp_path / "bench.sql").write_text("SELECT 1;\n")
    path = edited(tmp_path, 'builtin = "simple-update"', 'script = "bench.sql"')
    first = scenario.load(str(path))
    assert first.get("pgbench.script") == str((tmp_path / "bench.sql").resolve())
    (tmp_path / "bench.sql").write_text("SELECT 2;\n")
    assert scenario.load(str(path)).hash != first.hash
    assert "pgbench.script: no such file" in error_of(
        edited(tmp_path, 'builtin = "simple-update"', 'script = "missing.sql"')
    )


def test_overrides_are_type_checked_and_rehashed():
    smoke = scenario.load("smoke")
    changed = smoke.with_overrides(["pgbench.clients=8", "postgres.settings.work_mem=64MB"])
    assert changed.get("pgbench.clients") == 8
    assert changed.get("postgres.settings.work_mem") == "64MB"
    assert changed.hash != smoke.hash
    assert smoke.get("pgbench.clients") == 4  # the original is untouched
    assert smoke.with_overrides([]).hash == smoke.hash
    with pytest.raises(ScenarioError, match=r'pgbench.clients must be an integer, got "abc"'):
        smoke.with_overrides(["pgbench.clients=abc"])
    with pytest.raises(ScenarioError, match=r"unknown field pgbench\.nope"):
        smoke.with_overrides(["pgbench.nope=1"])
    with pytest.raises(ScenarioError, match=r"override must look like section\.field=value"):
        smoke.with_overrides(["clients"])


def test_override_recomputes_defaulted_total_timeout(tmp_path):
    path = edited(tmp_path, "total_s = 900\n", "")
    short = scenario.load(str(path))
    long = short.with_overrides(["pgbench.duration_s=600"])
    assert long.get("timeouts.total_s") - short.get("timeouts.total_s") == 2 * (600 - 5)


def test_a_warm_up_shorter_than_a_run_shortens_the_runs_own_length(tmp_path):
    path = edited(tmp_path, "total_s = 900\n", "")
    plain = scenario.load(str(path))
    short = plain.with_overrides(["pgbench.warmup_s=2", "pgbench.duration_s=20"])
    longer = plain.with_overrides(["pgbench.duration_s=20"])
    # one warm-up of 2 s instead of 20 s: 18 s less in the default total
    assert longer.get("timeouts.total_s") - short.get("timeouts.total_s") == 18
    assert short.hash != longer.hash


def test_parse_override_value_types():
    assert scenario.parse_override("a.b=32") == ("a.b", 32)
    assert scenario.parse_override("a.b=true") == ("a.b", True)
    assert scenario.parse_override("a.b=on") == ("a.b", "on")
    assert scenario.parse_override('a.b="4"') == ("a.b", "4")
    assert scenario.parse_override("a.b = 1GB") == ("a.b", "1GB")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("guest.memory_mb=99999999", "guest.memory_mb must be 256 to 4194304, got 99999999"),
        ("guest.vcpus=100000", "guest.vcpus must be 1 to 1024, got 100000"),
        ("guest.vcpus=0", "guest.vcpus must be 1 to 1024, got 0"),
        (
            "pgbench.duration_s=99999999999",
            "pgbench.duration_s must be 1 to 86400, got 99999999999",
        ),
        ("timeouts.boot_s=99999999", "timeouts.boot_s must be 1 to 86400, got 99999999"),
        ("timeouts.total_s=99999999", "timeouts.total_s must be 1 to 604800, got 99999999"),
        ("pgbench.runs=100000", "pgbench.runs must be 1 to 1000, got 100000"),
        ("compare.boots=0", "compare.boots must be 1 to 1000, got 0"),
        ("guest.hugepages=600", "guest.hugepages (600 x 2 MB) must fit in guest.memory_mb (1024)"),
        (
            "timeouts.total_s=1",
            "timeouts.total_s (1) must exceed the runs' own length, "
            "pgbench.warmup_runs x pgbench.warmup_s + pgbench.runs x pgbench.duration_s = 10 s",
        ),
        ("pgbench.warmup_s=0", "pgbench.warmup_s must be 1 to 86400, got 0"),
    ],
)
def test_absurd_values_are_refused_naming_the_key_and_range(override, message):
    """Values that used to reach QEMU (a 99 TB guest, 100000 vCPUs, a 1 s total timeout)."""
    with pytest.raises(ScenarioError) as info:
        scenario.load("smoke").with_overrides([override])
    assert str(info.value) == f"smoke.toml with {override}: {message}"
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "pgbench.clients.x=1",
            "--set pgbench.clients.x: pgbench.clients is a value (4), not a section with fields",
        ),
        ("pgbench.clients=nan", "--set pgbench.clients: must be a finite value, got NaN"),
        ("postgres.settings.work_mem=inf", "must be a finite value, got Infinity"),
        ("pgbench.clients=-4", "pgbench.clients must be 1 to 262142, got -4"),
        ("pgbench.clients=4.0", "pgbench.clients must be an integer, got 4.0"),
        ("pgbench.clients=true", "pgbench.clients must be an integer, got true"),
        ("pgbench..clients=4", "override must look like section.field=value"),
        ("guest=4", "[guest] must be a table, got 4"),
    ],
)
def test_bad_overrides_are_one_line(override, message):
    """A dotted key through a plain value used to be a TypeError traceback."""
    with pytest.raises(ScenarioError) as info:
        scenario.load("smoke").with_overrides([override])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_setting_name_with_dots_is_one_setting():
    s = scenario.load("smoke").with_overrides(["postgres.settings.auto_explain.log_min_duration=5"])
    assert s.data["postgres"]["settings"]["auto_explain.log_min_duration"] == 5


def test_unreadable_scenario_files_are_one_line(tmp_path):
    bad = tmp_path / "smoke.toml"
    bad.write_bytes(b'name = "smoke"\ndescription = "\xff\xfe"\n')
    assert error_of(bad) == f"{bad}: not UTF-8 text (byte 30)"
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    assert error_of(folder) == f"{folder}: is a directory, not a file"
    assert error_of(tmp_path / "none.toml") == f"{tmp_path}/none.toml: no such file"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("clients = 4\n", "clients = nan\n", "pgbench.clients must be an integer, got NaN"),
        ("clients = 4\n", "clients = -4\n", "pgbench.clients must be 1 to 262142, got -4"),
        ("\nruns = 1\n", "\nruns = inf\n", "pgbench.runs must be an integer, got Infinity"),
        (
            "[postgres.settings]\n",
            "[postgres.settings]\nrandom_page_cost = nan\n",
            "postgres.settings.random_page_cost must be a finite number, got NaN",
        ),
    ],
)
def test_nan_inf_and_negative_counts_in_a_file(tmp_path, old, new, message):
    assert error_of(edited(tmp_path, old, new)) == f"smoke.toml: {message}"
