"""A scenario's [profile]: its fields' checks, the hash that changes only when it is on,
the kernel fragment and the root fs key that come with it (scenario/profile.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core import arch
from kbisect.core.exceptions import EXIT_USER
from kbisect.scenario import profile, scenario
from kbisect.scenario.fields import ScenarioError
from kbisect.targets.vng import rootfs
from tests.fakes import fake_calls, fake_image, fake_target

# The hashes of the shipped scenarios before [profile] existed (and the roots' keys):
# profiling off must leave every one of them as it was.
HASHES = {
    "contention-2vcpu": "4ad40b43ca7226b458015a6e71f7760dfd4ca90b92e6f825bc6d75c7f8475c62",
    "io-bound-2vcpu": "0af48f9b776f0a6335c2e1d65cd56ecb315c542eea08340501a209d7d3aaf9d8",
    "m8g-7dadeaa6e851": "f408a23136e7dd8b8a2b34add2a785bd80b0294d7fd9d34592329854ec728ead",
    "m8g-io-bound": "202183ec9083db5091adb8e790d01b43bdd773f069c19153d3c9ca95806aa2c8",
    # both changed on purpose: a 10 s warm-up
    # (docs/benchmarks-history.md "Where a boot's time goes")
    "simple-update-2vcpu": "a7b9d41364a9a3f7f6118f7aefc5c18a941b42a404186c59ccf2f071c61e0b03",
    "simple-update-2vcpu-hugepages": (
        "479d787d863080c78308600bbda112a092567308e60ec8986bf665a4a05b212b"
    ),
    "smoke": "02925e9bad223776ed5f237d831b21f9ca8330a85b6ddde2d3bf0f3afd5d3303",
}
KEYS = {15: "x86_64-bookworm-pg15-a911e39e78", 17: "x86_64-trixie-pg17-9efb1133d1"}


def smoke(*sets: str) -> scenario.Scenario:
    return scenario.load("smoke").with_overrides(list(sets))


def test_defaults_are_off() -> None:
    assert smoke().data["profile"] == profile.DEFAULTS
    assert profile.DEFAULTS["enabled"] is False


@pytest.mark.parametrize("name", sorted(HASHES))
def test_hash_unchanged_while_profile_is_off(name: str) -> None:
    scen = scenario.load(name)
    assert scen.hash == HASHES[name]
    assert scen.with_overrides(["profile.seconds=3"]).hash == HASHES[name]  # still off


def test_hash_changes_when_profile_is_on() -> None:
    on = smoke("profile.enabled=true")
    assert on.hash != HASHES["smoke"]
    assert smoke("profile.enabled=true", "profile.frequency=99").hash != on.hash


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("profile.seconds=0", "profile.seconds must be 1 to 3600"),
        ("profile.frequency=0", "profile.frequency must be 1 to 10000"),
        ("profile.boots_per_side=0", "profile.boots_per_side must be 1 to 1000"),
        ('profile.event="cpu clock"', "profile.event must be a perf event name"),
        ('profile.call_graph="lbr"', "profile.call_graph must be one of fp, dwarf"),
        ('profile.enabled="yes"', "profile.enabled must be a boolean"),
        ("profile.nosuch=1", "unknown field profile.nosuch"),
    ],
)
def test_bad_profile_fields_are_one_line(override: str, says: str) -> None:
    with pytest.raises(ScenarioError, match=r"^smoke.toml with .*") as err:
        smoke("profile.enabled=true", override)
    assert says in str(err.value)
    assert "\n" not in str(err.value)


def test_bad_seconds_exit_2_before_any_boot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    target = fake_target(tmp_path)
    argv = ["run", "--kernel", str(fake_image(tmp_path / "k")), "--scenario", "smoke"]
    argv += ["--target", str(target), "--out", str(tmp_path / "out")]
    argv += ["--set", "profile.enabled=true", "--set", "profile.seconds=0"]
    assert cli.main(argv) == EXIT_USER
    assert fake_calls(target) == []  # nothing booted
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "profile.seconds" in err[0]


def test_total_timeout_default_makes_room_for_the_extra_run() -> None:
    raw = scenario.load("smoke").raw
    del raw["timeouts"]["total_s"]  # the default is computed
    off = scenario._make(raw, "smoke.toml", None).data["timeouts"]["total_s"]
    raw["profile"] = {"enabled": True}
    on = scenario._make(raw, "smoke.toml", None).data["timeouts"]["total_s"]
    assert on - off == (10 + 2 * 2) + 60 + profile.SCRIPT_S  # a 5 s run made 14 s


def test_perf_fragment_only_with_profile() -> None:
    assert scenario.kernel_fragments(smoke()) == []
    assert scenario.kernel_fragments(smoke("profile.enabled=true")) == ["perf"]
    assert profile.with_fragments(("debug-sched",), smoke().data) == ("debug-sched",)
    on = smoke("profile.enabled=true").data
    assert profile.with_fragments(("debug-sched",), on) == ("debug-sched", "perf")
    assert profile.with_fragments(("perf",), on) == ("perf",)


@pytest.mark.parametrize("major", sorted(KEYS))
def test_root_key_unchanged_without_profile_changed_with(major: int) -> None:
    x86 = arch.get("x86_64")
    plain = scenario.load("smoke").with_overrides([f"postgres.major={major}"])
    pin = rootfs.pin_for(plain.data)
    assert pin.extras == ()
    assert rootfs.key(x86, pin) == KEYS[major]
    perf = rootfs.pin_for(plain.with_overrides(["profile.enabled=true"]).data)
    assert perf.extras == ("linux-perf",)
    assert "linux-perf" in rootfs.packages(perf)
    assert rootfs.key(x86, perf) != KEYS[major]
    assert rootfs.key(x86, perf).startswith(f"x86_64-{pin.suite}-pg{major}-")
