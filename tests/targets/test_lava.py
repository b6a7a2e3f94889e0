"""The LAVA target (kbisect/targets/lava/): a job's text, its log, and `kbisect run` through
tests/targets/fakelava.py's lava-run script and lava-server API (the real lavacli talks to
it), which replay a real lava-run's log."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from kbisect.commands import cli
from kbisect.core import arch, paths
from kbisect.core.exceptions import EXIT_BENCHMARK, EXIT_BOOT, EXIT_INFRA, EXIT_OK, EXIT_USER
from kbisect.scenario import server
from kbisect.targets.lava import config, job, lab
from tests.targets import fakelava, images

TOKEN = "s3cret-Token-4711"
X86 = arch.get("x86_64")
RECORDED_TPS = 133.065458


def spec(**changes: Any) -> job.Spec:
    base = job.Spec(
        name="kbisect smoke",
        device_type="qemu",
        tags=("kbisect", "fast"),
        arch=X86,
        kernel="file:///k/bzImage",
        ramdisk="https://files/x-ramdisk.cpio.gz",
        rootfs="https://files/y.ext4",
        append=("mitigations=off",),
        memory_mb=1024,
        cpus=2,
        boot_s=300,
        total_s=900,
        idle_s=120,
    )
    return job.Spec(**{**base.__dict__, **changes})


def test_the_job_is_the_yaml_lava_reads() -> None:
    data = yaml.safe_load(job.job_text(spec()))
    assert data["device_type"] == "qemu" and data["tags"] == ["kbisect", "fast"]
    assert data["context"] == {"arch": "x86_64", "memory": 1024, "cpus": 2}
    deploy, boot, test = (next(iter(a.values())) for a in data["actions"])
    assert deploy["images"]["ramdisk"]["overlays"] == {"lava": True}  # no guestfs
    assert "mitigations=off" in deploy["images"]["kernel"]["image_arg"]
    assert boot["prompts"] == [job.PROMPT] and boot["timeout"] == {"minutes": 5}
    assert test["definitions"][0]["repository"]["run"]["steps"] == ["sh /kbisect/run.sh"]
    assert "tags" not in yaml.safe_load(job.job_text(spec(tags=())))


def test_the_local_device_is_a_qemu_device_of_the_guest_size() -> None:
    data = yaml.safe_load(job.device_text(X86, ["-accel", "tcg", "-cpu", "max"], 2048, 1))
    options = data["actions"]["boot"]["methods"]["qemu"]["parameters"]["options"]
    assert "-m 2048" in options and "-smp 1" in options and "-accel tcg -cpu max" in options
    assert data["available_architectures"] == ["x86_64"]


def test_the_recorded_log_reads_as_one_good_boot() -> None:
    out = job.read(fakelava.RECORDED.read_text().splitlines())
    assert out.result == "pass" and out.reached and out.tps == "pass"
    assert out.measurement == pytest.approx(RECORDED_TPS)
    harness = out.harness
    assert harness is not None and harness["status"] == "ok" and harness["runs"]
    assert out.job_s is not None and 30 < out.job_s < 600
    assert not out.lab_fault()
    assert job.read(["- " + line for line in fakelava.RECORDED.read_text().splitlines()]) == out
    assert job.target_line(f'{{"dt": "x", "lvl": "target", "msg": "{job.READY}"}}') == job.READY


def write_lab(where: Path, **keys: Any) -> Path:
    """A lab file; a server's URL is the fake's when there is one (the fixture's)."""
    if keys.get("server") == SERVER["server"] and (url := where / "fake/state/url.txt").exists():
        keys["server"] = url.read_text()
    path = where / "lab.toml"
    settings = {"kind": "lava", "arch": "x86_64", "device_type": "qemu", **keys}
    path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))
    return path


SERVER = {
    "dispatcher": "server",
    "server": "http://127.0.0.1:9",
    "user": "kbisect",
    "artifacts": "https://files.invalid/kbisect",
    "upload": "test -f {path} && echo {name} >/dev/null",
    "queue_timeout_s": 1,
}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The lava-run stand-in first on PATH, a lava-server's API on 127.0.0.1 (its URL in
    url.txt: write_lab puts it in), a root fs for smoke, a kernel; the state dir."""
    state = fakelava.install(tmp_path / "fake", token=TOKEN)
    monkeypatch.setenv("FAKELAVA_DIR", str(state))
    monkeypatch.setenv("PATH", f"{tmp_path / 'fake' / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(lab, "POLL_S", 0.01)
    root = images.installed(X86, server.Pin(15))
    image = paths.cache_dir() / "lava" / f"{root.parent.name}.ext4"  # as files.rootfs makes
    image.parent.mkdir(parents=True)
    image.write_bytes(b"")  # made: no mkfs.ext4 (test_a_local_boot makes one)
    (tmp_path / "kernel").mkdir()
    (tmp_path / "kernel" / "bzImage").write_bytes(b"\0" * 4096)
    with fakelava.Server(state, str(SERVER["user"])) as lava:
        (state / "url.txt").write_text(lava.url)
        yield state


def run(tmp_path: Path, target: Path, *extra: str) -> int:
    kernel = tmp_path / "kernel"
    argv = ["run", "--kernel", str(kernel), "--scenario", "smoke", "--target", str(target)]
    argv += ["--runs", "1", "--out", str(tmp_path / "out")]
    # a local job's QEMU runs here: never wait for the busy test host to be quiet
    return cli.main([*argv, "--retakes", "0", "--count-disturbed", *extra])


def sample(tmp_path: Path) -> dict[str, Any]:
    (path,) = (tmp_path / "out" / "samples").glob("*.json")
    found: dict[str, Any] = json.loads(path.read_text())
    return found


def test_a_local_boot_is_one_lava_run_job(tmp_path: Path, fake: Path) -> None:
    (image,) = (paths.cache_dir() / "lava").glob("*.ext4")
    image.unlink()
    assert run(tmp_path, write_lab(tmp_path, dispatcher="local")) == EXIT_OK
    s = sample(tmp_path)
    assert s["tps"] == pytest.approx(RECORDED_TPS) and s["target"]["machine"] == "qemu-local"
    assert s["target"]["lava"]["job"] and s["target"]["lava"]["job_s"] > 0
    (boot,) = (tmp_path / "out" / "boots").iterdir()
    argv = json.loads((fake / "argv.txt").read_text().splitlines()[0])
    assert argv[-1] == str(boot / "lava" / "job.yaml")
    assert yaml.safe_load((boot / "lava" / "qemu-local.yaml").read_text())["actions"]
    assert image.stat().st_size > 0
    assert f"file://{image}" in (boot / "lava" / "job.yaml").read_text()


def recording(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], dict[str, str]]]:
    """The argv and environment of every process kbisect starts (what ps would show)."""
    started: list[tuple[list[str], dict[str, str]]] = []
    real = subprocess.Popen

    def popen(args: Any, *a: Any, **kw: Any) -> Any:
        started.append(([str(x) for x in args], dict(kw.get("env") or os.environ)))
        return real(args, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", popen)
    return started


def every_file(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


@pytest.mark.parametrize("where", ["token_file", "token_env"])
def test_a_server_job_and_the_token_shows_nowhere(
    tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    if where == "token_file":
        (tmp_path / "token").write_text(TOKEN + "\n")
        keys = {"token_file": str(tmp_path / "token")}
    else:
        monkeypatch.setenv("LAB_TOKEN", TOKEN)
        keys = {"token_env": "LAB_TOKEN"}
    started = recording(monkeypatch)
    assert run(tmp_path, write_lab(tmp_path, **SERVER, **keys)) == EXIT_OK
    s = sample(tmp_path)
    assert s["target"]["machine"] == "qemu02" and s["target"]["lava"]["job"] == "17"
    assert s["tps"] == pytest.approx(RECORDED_TPS)
    assert (fake / "auth.txt").read_text() == f"kbisect:{TOKEN}"  # the server had it
    assert started and all(TOKEN not in " ".join(argv) for argv, _ in started)
    if where == "token_file":  # else the user's own variable, inherited
        assert all(TOKEN not in " ".join(env.values()) for _, env in started)
    for path in every_file(tmp_path / "out") + every_file(tmp_path / "results"):
        assert TOKEN.encode() not in path.read_bytes(), path
    homes = [env["XDG_CONFIG_HOME"] for argv, env in started if argv[0] == "lavacli"]
    assert homes and not any(Path(h).exists() for h in homes)  # the config is gone


BAD_FILES = [
    ({"colour": "red"}, "unknown key 'colour'"),
    ({"device_type": None}, "missing key 'device_type'"),
    ({"dispatcher": "cloud"}, "dispatcher must be server or local"),
    ({"tags": "kbisect"}, "tags must be a list of strings"),
    ({**SERVER, "token_file": "t", "token_env": "T"}, "token_file or token_env"),
    ({**SERVER}, "token_file or token_env"),
    ({**SERVER, "token_env": "T", "server": "lava.example"}, "server must be an http(s) URL"),
    ({**SERVER, "token_env": "T", "upload": None}, "give an upload command"),
    ({"dispatcher": "local", "devices": ["/nonexistent/dev.yaml"]}, "no such file"),
    ({**SERVER, "token_env": "T", "devices": ["d.yaml"]}, 'devices go with dispatcher = "local"'),
    ({"queue_timeout_s": 0}, "queue_timeout_s must be at least 1"),
]


@pytest.mark.parametrize(("keys", "says"), BAD_FILES)
def test_a_bad_lab_file_is_one_line_before_anything(
    tmp_path: Path, fake: Path, capsys: pytest.CaptureFixture[str], keys: Any, says: str
) -> None:
    keys = {"dispatcher": "local", **keys}
    target = write_lab(tmp_path, **{k: v for k, v in keys.items() if v is not None})
    if keys.get("device_type", "") is None:
        target.write_text(target.read_text().replace('device_type = "qemu"\n', ""))
    assert run(tmp_path, target) == EXIT_USER
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_no_token_in_the_file_or_a_refused_one(
    tmp_path: Path, fake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "token").write_text("\n")
    target = write_lab(tmp_path, **SERVER, token_file=str(tmp_path / "token"))
    assert run(tmp_path, target) == EXIT_USER
    assert "no token in" in capsys.readouterr().err and not (tmp_path / "out").exists()
    (tmp_path / "token").write_text("wrong\n")
    assert run(tmp_path, target) == EXIT_USER
    err = capsys.readouterr().err
    assert "refused the token in" in err and "wrong" not in err


def test_no_lava_run_or_lavacli(
    tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for keys, tool in (({"dispatcher": "local"}, "lava-run"), (SERVER, "lavacli")):
        assert run(tmp_path, write_lab(tmp_path, **keys, token_env="T")) == EXIT_USER
        err = capsys.readouterr().err.strip()
        assert f"{tool}: not installed" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("mode", "keys", "code", "says"),
    [
        ("unknown-type", SERVER, EXIT_USER, "device_type: the server says"),
        ("queued", SERVER, EXIT_INFRA, "did not start within 1s (no free qemu device): cancelled"),
        ("infra", {"dispatcher": "local"}, EXIT_INFRA, "Infrastructure: Unable to download"),
        ("infra", SERVER, EXIT_INFRA, "Infrastructure: Unable to download"),
        ("cancelled", SERVER, EXIT_INFRA, "LAVA job 17 on qemu02: Canceled: Canceled"),
        (
            "",
            {**SERVER, "server": "http://127.0.0.1:1"},  # nothing listens there
            EXIT_INFRA,
            "lavacli jobs submit failed: Unable to connect",
        ),
        ("no-measurement", {"dispatcher": "local"}, EXIT_BENCHMARK, "have no tps measurement"),
        ("hang", {"dispatcher": "local"}, EXIT_BOOT, "ran longer than"),
        ("hang", SERVER, EXIT_BOOT, "ran longer than"),
    ],
)
def test_a_job_that_goes_wrong(
    tmp_path: Path,
    fake: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mode: str,
    keys: dict[str, Any],
    code: int,
    says: str,
) -> None:
    (fake / "mode.txt").write_text(mode)
    monkeypatch.setenv("LAB_TOKEN", TOKEN)
    quick = ["pgbench.duration_s=1", "pgbench.warmup_s=1", "timeouts.boot_s=1"]
    quick.append("timeouts.total_s=3")
    short = [x for s in quick for x in ("--set", s)] if mode == "hang" else []
    assert run(tmp_path, write_lab(tmp_path, **keys, token_env="LAB_TOKEN"), *short) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and "Traceback" not in "\n".join(err)
    if keys is SERVER and mode in ("queued", "hang"):
        assert (fake / "cancelled.txt").read_text() == "17"


def test_the_lab_file_reads_into_a_lab(tmp_path: Path) -> None:
    lab_ = config.load("lab", {"kind": "lava", "device_type": "qemu", **SERVER, "token_env": "X"})
    assert lab_.server == "http://127.0.0.1:9" and not lab_.local and lab_.tags == ()


def two_devices(where: Path) -> list[str]:
    """Two device dictionaries (the stand-in reads none): qemu01.yaml, qemu02.yaml."""
    for name in ("qemu01", "qemu02"):
        (where / f"{name}.yaml").write_text("{}\n")
    return [str(where / "qemu01.yaml"), str(where / "qemu02.yaml")]


def test_local_jobs_go_to_the_devices_in_turn(tmp_path: Path, fake: Path) -> None:
    devices = two_devices(tmp_path)
    target = write_lab(tmp_path, dispatcher="local", devices=devices)
    assert run(tmp_path, target, "--runs", "3") == EXIT_OK
    samples = sorted((tmp_path / "out" / "samples").glob("*.json"))
    machines = [json.loads(p.read_text())["target"]["machine"] for p in samples]
    assert machines == ["qemu01", "qemu02", "qemu01"]
    argv = [json.loads(x) for x in (fake / "argv.txt").read_text().splitlines()]
    assert [a[a.index("--device") + 1] for a in argv] == [*devices, devices[0]]


def test_a_compare_over_two_devices_is_blocked_by_device(tmp_path: Path, fake: Path) -> None:
    devices = two_devices(tmp_path)
    target = write_lab(tmp_path, dispatcher="local", devices=devices)
    argv = ["compare", "--kernel", str(tmp_path / "kernel"), "--append-b", "quiet"]
    argv += ["--scenario", "smoke", "--boots", "2", "--target", str(target)]
    argv += ["--retakes", "0", "--count-disturbed", "--out", str(tmp_path / "cmp")]
    assert cli.main(argv) == EXIT_OK
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "| machine | boots A | mean A | boots B | mean B | B/A |" in report
    assert "| qemu01 | 1 |" in report and "| qemu02 | 1 |" in report
    assert "| device | LAVA job |" in report and "with a machine fixed effect" in report


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20))
TREES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(TREES)
def test_the_yaml_writer_writes_what_yaml_reads_back(value: Any) -> None:
    assert yaml.safe_load(job.yaml_text(value)) == value


VALUES = st.one_of(SCALARS, st.lists(st.text(max_size=10), max_size=3), st.floats())


@given(st.dictionaries(st.sampled_from([*config.SCHEMA, "other"]), VALUES, max_size=8))
def test_any_lab_table_is_a_lab_or_one_line(settings: dict[str, Any]) -> None:
    try:
        config.load("lab", settings)
    except config.BadLab as exc:
        assert "\n" not in str(exc) and str(exc).startswith("target lab: ")


def test_an_interrupted_wait_cancels_the_job(
    tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (fake / "mode.txt").write_text("queued")
    monkeypatch.setenv("LAB_TOKEN", TOKEN)
    keys = {**SERVER, "server": (fake / "url.txt").read_text(), "token_env": "LAB_TOKEN"}
    lab_ = config.load("lab", {"kind": "lava", "device_type": "qemu", **keys})
    lab_ = dataclasses.replace(lab_, queue_timeout_s=3600)

    real_sleep = time.sleep

    def ctrl_c(seconds: float) -> None:  # Ctrl-C in the poll's wait, and only there
        if seconds == lab.POLL_S:
            raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", ctrl_c)
    (tmp_path / "job.yaml").write_text("{}\n")
    with pytest.raises(KeyboardInterrupt):
        lab.run(lab_, tmp_path / "job.yaml", None, tmp_path / "log", lambda line: None, 60.0)
    assert (fake / "cancelled.txt").read_text() == "17"


def test_doctor_says_what_the_lab_needs(
    tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LAB_TOKEN", TOKEN)
    good = write_lab(tmp_path, **SERVER, token_env="LAB_TOKEN")
    assert cli.main(["doctor", "--target", str(good)]) in (EXIT_OK, 1)
    out = capsys.readouterr().out
    assert "read from $LAB_TOKEN" in out and TOKEN not in out
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("LAB_TOKEN")
    assert cli.main(["doctor", "--target", str(good)]) == 1
    out = capsys.readouterr().out
    assert "lavacli: not installed" in out and "no token in $LAB_TOKEN" in out


@given(st.text(max_size=40))
@example("é\x1b[6n\x85\u2028\U0001f600 \\x41\x00\x07")  # each of YAML's own escapes
def test_a_log_line_reads_back_as_lavacli_writes_it(msg: str) -> None:
    """`lavacli jobs logs --raw` writes each entry in YAML's double-quoted style, whose
    escapes (\\e, \\xE9, \\N, ...) are not all JSON's."""
    e = {"dt": "2026-12-05T18:19:01.9", "lvl": "target", "msg": msg}
    dumped = yaml.dump(e, default_flow_style=True, default_style='"', width=10**6)
    assert job.entry("- " + dumped[:-1]) == e
