"""The fuzz session's world, made once: stubs for the programs a fuzz case must never
really run (QEMU, mmdebstrap, vng, ssh, the default tree's tar import), the user's
repository in the middle of their own work, and seed inputs: a scenario, a study file,
fake and machine target files, kernel images with manifests, and real runs made on the
fake target (a compare, a bisection, a study, an rc history) whose files the file fuzz
corrupts.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.fakes import fake_image, fake_target, repo_snapshot, users_repo_at_work
from tests.fuzz import sandbox
from tests.fuzz.sandbox import World

# Programs a case would otherwise really start: a VM, a Debian bootstrap, the 150 MB
# default tree's import, a network login. Each stub fails at once, like a broken tool.
STUBS = (
    "vng",
    "qemu-system-x86_64",
    "qemu-system-aarch64",
    "qemu-img",
    "mmdebstrap",
    "ssh",
    "scp",
    "ssh-keygen",
    "mkfs.ext4",
    "tar",
)
HISTORY = [{"subject": f"commit {i}", "tps": 1000 if i < 5 else 700} for i in range(1, 8)]
# a bisection of a few boots: git's method, no reference boots, 2-3 samples per commit
QUICK_BISECT = {
    "--method": "git",
    "--references": "0",
    "--runs-min": "2",
    "--runs-max": "3",
    "--recheck-samples": "3",
}
SMOKE = sandbox.ROOT / "harness" / "scenarios" / "smoke.toml"


@dataclass(repr=False)
class Seeds:
    """The seed inputs (under world.base/seeds) and runs (world.base/seeds/results/...)."""

    scenario: Path
    study: Path
    target: Path
    machine: Path
    images: list[Path]
    compare: Path
    bisect: Path
    study_run: Path
    rc_history: Path

    def __repr__(self) -> str:
        return f"Seeds({self.scenario.parent})"


def make_world(base: Path) -> tuple[World, Seeds]:
    stubs = base / "stubs"
    stubs.mkdir(parents=True)
    for name in STUBS:
        stub = stubs / name
        stub.write_text(f"#!/bin/sh\necho '{name}: not run in the fuzz tier' >&2\nexit 1\n")
        stub.chmod(0o755)
    (base / "mpl").mkdir()
    repo, shas = users_repo_at_work(base / "user", HISTORY)
    pristine = base / "pristine"
    shutil.copytree(repo, pristine, symlinks=True)
    world = World(
        base=base,
        stubs=stubs,
        mpl=base / "mpl",
        cache=base / "cache",
        repo=repo,
        pristine=pristine,
        shas=shas,
        repo_state=repo_snapshot(repo),
    )
    world.status = sandbox.checkout_status()
    return world, _seeds(world)


def _seeds(world: World) -> Seeds:
    d = world.base / "seeds"
    d.mkdir()
    scenario = d / "smoke.toml"
    scenario.write_bytes(SMOKE.read_bytes())
    target = fake_target(d, "fake", cv=0.01, seed=3, state=str(world.base / "fake-state"))
    machine = d / "machine.toml"
    machine.write_text('kind = "ssh"\nhost = "192.0.2.1"\narch = "x86_64"\nboot_timeout_s = 5\n')
    images = []
    for i, tps in enumerate((1000.0, 700.0)):
        image = fake_image(d / f"k{i}", tps)
        manifest = {"arch": "x86_64", "commit": world.shas[1 + 4 * i], "config_hash": "0" * 64}
        (image.parent / "manifest.json").write_text(json.dumps(manifest))
        images.append(image)
    study = d / "study.toml"
    study.write_text(
        'name = "fz"\nscenario = "smoke"\nboots = 2\nbudget_hours = 1\nseed = 7\n'
        f"[kernels]\nimages = {json.dumps([str(i.parent) for i in images])}\n"
        '[[axes]]\nkey = "pgbench.clients"\nvalues = [2, 4]\n'
        '[[axes]]\nname = "size"\nlevels = [{ label = "s1", set = ["pgbench.scale=1"] }, '
        '{ label = "s2", set = ["pgbench.scale=2"] }]\n'
    )
    sb = sandbox.Sandbox(d / "run", world.cache).make()
    runs = d / "results"
    sb.writable.append(runs)

    def seed_run(*argv: str) -> None:
        out = sandbox.in_process(list(argv), sb.env(world.stubs, world.mpl), sb)
        assert out.code in (0, 1) and not out.escaped, f"seed run failed: {out.shell()}\n{out}"

    seed_run(
        "compare",
        "--target",
        str(target),
        "--kernel",
        str(images[0]),
        "--append-a",
        "x=1",
        "--append-b",
        "x=2",
        "--scenario",
        str(scenario),
        "--boots",
        "3",
        "--out",
        str(runs / "compare"),
    )
    seed_run(
        "bisect",
        *("--tree", str(world.repo), "--good", world.shas[1], "--bad", world.shas[-1]),
        *("--scenario", str(scenario), "--target", str(target)),
        *flat(QUICK_BISECT),
    )
    (bisect_run,) = [p.parent for p in sb.results.glob("*/state.json")]
    seed_run("study", str(study), "--target", str(target), "--yes", "--out", str(runs / "study"))
    history = runs / "rc"
    seed_run(
        "rc",
        "record",
        "--history",
        str(history),
        "--tag",
        "v6.13-rc1",
        "--commit",
        world.shas[-1],
        "--result",
        str(runs / "compare"),
        "--scenario-hash",
        "0123abcd",
        "--tps",
        "1000",
    )
    return Seeds(
        scenario=scenario,
        study=study,
        target=target,
        machine=machine,
        images=images,
        compare=runs / "compare",
        bisect=bisect_run,
        study_run=runs / "study",
        rc_history=history,
    )


def flat(options: dict[str, str]) -> list[str]:
    """Options as command-line words."""
    return [word for pair in options.items() for word in pair]
