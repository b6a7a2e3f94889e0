"""A posterior bisection over a pool of k machines: the batch of revisions a round
samples (choice.batch), each sample's machine in the likelihood, the search in rounds
(search.py), and a driver's round cut short and resumed."""

from __future__ import annotations

import math
import random
import re
from typing import Any

import pytest

from kbisect.bisect import state as bisect_state
from kbisect.bisect.posterior import choice, likelihood
from kbisect.bisect.posterior.graph import Graph
from kbisect.bisect.posterior.likelihood import Model
from kbisect.bisect.posterior.posterior import Posterior
from kbisect.bisect.posterior.story_search import StorySearch
from kbisect.simulate import histories
from tests.bisect.test_bisect import history, kbisect, run_dirs, summary
from tests.bisect.test_posterior_method import (  # noqa: F401 (a fixture)
    args,
    env,
    killed_at,
    verify_boots,
)
from tests.bisect.test_search import search
from tests.bisect.test_step import fake
from tests.fakes import fake_calls


def posterior(n: int, culprit: int, tested: int, seed: int = 1) -> Posterior:
    """n linear commits, the endpoints sampled three times each and `tested` revisions
    at random once, CV 10%, a 25% step at culprit."""
    g = Graph.from_parents(histories.linear(n), f"c{n - 1}", ["good"])
    rng = random.Random(seed)
    p = Posterior(g)
    level = {c: 750.0 if i >= culprit else 1000.0 for i, c in enumerate(g.commits)}
    level["good"] = 1000.0
    picks = ["good", g.bad] * 3 + [rng.choice(g.commits) for _ in range(tested)]
    for c in picks:
        p.update(c, level[c] * (1 + 0.1 * rng.gauss(0, 1)))
    return p


def test_a_batch_of_one_is_todays_single_choice():
    for n, culprit, tested, seed in ((24, 9, 0, 1), (24, 9, 4, 2), (300, 120, 6, 3)):
        p = posterior(n, culprit, tested, seed)
        assert p.batch(1) == [p.next()]
        assert p.batch(4)[0] == p.next()  # the first of a batch is the single choice


def test_a_batch_spreads_and_brings_more_than_k_copies_of_the_best():
    p = posterior(32, 13, 0)
    now = p.standing()
    assert now.last is not None
    t, load = now.last[0] + 1.0, now.last[1]
    for k in (2, 4, 8):
        picks = p.batch(k)
        assert len(picks) == k and len(set(picks)) == k, picks
        copies = choice.joint(now, [picks[0]] * k, t, load)
        spread = choice.joint(now, picks, t, load)
        # k copies of one split tell at most one bit (ln 2); k splits tell up to log(k+1)
        assert copies <= math.log(2) + 0.02
        assert spread > copies + 0.15 * (k - 1), (k, spread, copies)
        assert spread <= math.log(k + 1) + 0.02
    indices = sorted(p.graph.index[c] for c in p.batch(4))
    assert indices[0] < 10 and indices[-1] > 20  # quantiles of the range, not neighbours


def _pool_samples(seed: int, speeds: tuple[float, ...], confounded: bool):
    """Good and bad samples at 1000 and 800 tps (CV 5%) on machines of those speeds; with
    `confounded` half the bad ones on the fastest machine and half the good ones on the
    slowest (a machine effect that looks like a smaller step), the other half spread so
    that every machine has both kinds."""
    rng = random.Random(seed)
    x, z, machine = [], [], []
    fast = max(range(len(speeds)), key=lambda m: speeds[m])
    slow = min(range(len(speeds)), key=lambda m: speeds[m])
    for j in range(48):
        bad = j % 2 == 1
        m = (fast if bad else slow) if confounded and j % 4 < 2 else j // 4 % len(speeds)
        tps = (800.0 if bad else 1000.0) * speeds[m] * (1 + 0.05 * rng.gauss(0, 1))
        x.append(math.log(tps))
        z.append(bad)
        machine.append(f"m{m}")
    return x, z, machine


def test_a_machine_offset_is_recovered_not_read_as_a_level_change():
    speeds = (1.05, 1.0, 0.95)
    errors_with, errors_without, offsets = [], [], []
    for seed in range(6):
        x, z, machine = _pool_samples(seed, speeds, confounded=True)
        t = [float(j) for j in range(len(x))]
        with_m = likelihood.fit(x, z, Model(machines=True), t, None, None, machine)
        plain = likelihood.fit(x, z, Model(), t, None, None, machine)
        truth = math.log(0.8)
        errors_with.append(abs(with_m.coef[1] - with_m.coef[0] - truth))
        errors_without.append(abs(plain.coef[1] - plain.coef[0] - truth))
        # the offsets: each machine's level against the others', as drawn (log scale)
        fitted = [with_m.level(False, 0.0, 0.0, f"m{m}") for m in range(3)]
        for a, b in ((0, 1), (1, 2), (0, 2)):
            want = math.log(speeds[a] / speeds[b])
            offsets.append(abs((fitted[a] - fitted[b]) - want))
    # each offset about its standard error (16 samples a machine at CV 5%: 0.018)
    assert max(offsets) < 0.05 and sum(offsets) / len(offsets) < 0.025
    # without the machine the step is off by about the machines' spread; with it, not
    assert max(errors_with) < 0.03 < min(errors_without)


def test_one_machine_is_todays_likelihood():
    x, z, machine = _pool_samples(3, (1.0,), confounded=False)
    assert len(set(machine)) == 1
    a = likelihood.fit(x, z, Model(machines=True), None, None, None, machine)
    b = likelihood.fit(x, z, Model(), None, None, None, None)
    assert a == b


def test_a_pool_searches_in_rounds_and_names_the_culprit_despite_its_machines():
    s, bench, _ = search(32, "c19", speeds=(1.05, 1.0, 0.96, 1.02))
    assert s.k == 4 and s.post.model.machines
    bench.unrevertable = {"c19"}  # the re-check, the fallback, takes the pool's rounds
    answer = s.find()
    assert answer.kind == "culprit" and answer.candidates[0][0] == "c19"
    assert s.run.verification is not None and s.run.verification.kind == "no-revert"
    assert bench.rounds and all(len(r) <= 4 for r in bench.rounds)
    # the first round: four distinct revisions, not four copies of the best split
    assert len(set(bench.rounds[0])) == 4
    # rounds, not boots: the search's boots took far fewer rounds
    assert len(bench.rounds) < len(bench.booted) / 2
    assert {x.machine for x in s.post.samples if x.t > 0} == {"m0", "m1", "m2", "m3"}
    # the re-check drew two pairs a round and looked once per round: its error is split
    # over those looks (every 2 pairs from 3 to most), not over a look per pair
    (rc,) = [r for r in s.run.rechecks.values() if r.kind != "running"]
    most = s.opts.recheck_samples
    assert most > 4 and rc.level is not None and rc.n is not None
    assert rc.level == pytest.approx(1 - 2 * 0.05 / (-(-(most - 3) // 2) + 1))
    assert rc.level < 1 - 2 * 0.05 / (most - 3 + 1) or most == 3
    assert rc.n % 2 == 0


def test_resume_mid_round_counts_the_samples_written_and_takes_the_rest(env, tmp_path):  # noqa: F811
    shas = history(env["repo"], 12, 8)
    argv = args(env, shas[1], shas[-1], "--references", "0", "--batch", "3")
    # the endpoints take 4 to 8 boots, then rounds of 3: the 10th boot is inside a round
    run, saved = killed_at(env, tmp_path, argv, 10)
    # the round was saved before its boots: its revisions are visited, without samples
    assert saved.phase == "bisecting" and saved.options.batch == 3
    assert saved.posterior is not None
    sampled = {row[0] for row in saved.posterior["samples"]}
    assert [c for c in saved.visited if c not in sampled]
    fake(tmp_path, cv=0.05)
    assert kbisect("--resume") == 0
    s = summary(env["results"])
    assert s["first_bad"]["commit"] == shas[8] and s["confirmed"]
    # the round's one written sample is evidence; only the killed boot was taken again
    assert len(fake_calls(env["log"])) == len(s["samples"]) + verify_boots(run) + 1
    assert bisect_state.load(run).phase == "done"


def test_a_round_on_a_pool_takes_its_boots_on_the_machines_at_once(tmp_path, monkeypatch) -> None:
    import threading
    import time

    from kbisect.bisect import round as pool_round
    from kbisect.core.exceptions import BootError
    from kbisect.targets import registry
    from tests.fakes import fake_pool

    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    pool = registry.get(str(fake_pool(tmp_path, {"m1": {"seed": 1}, "m2": {"seed": 2}})))
    assert pool_round.width(pool) == 2 and pool_round.width(pool, 5) == 5
    lock, busy, most = threading.Lock(), [0], [0]

    def boot(i: int) -> Any:
        def run(machine: Any) -> tuple[int, str]:
            with lock:
                busy[0] += 1
                most[0] = max(most[0], busy[0])
            time.sleep(0.05)
            with lock:
                busy[0] -= 1
            if i == 2:
                raise BootError("the kernel never reached the harness")
            return (i, machine.name)

        return run

    got = pool_round.take_round(pool, [boot(i) for i in range(4)])
    assert [g[0] for g in got if not isinstance(g, BaseException)] == [0, 1, 3]
    assert isinstance(got[2], BootError)  # a kernel failure is that boot's result
    assert {g[1] for g in got if not isinstance(g, BaseException)} == {"m1", "m2"}
    assert most[0] == 2  # the two machines worked at once


def test_a_bisection_over_a_pool_takes_its_endpoints_on_both_machines_at_once(
    env,  # noqa: F811
    tmp_path,
) -> None:
    """The driver over a pool of two fake machines, one 10% slower: the endpoint check's
    first look (runs-min a side) is taken at once on both machines, interleaved, and the
    culprit is named despite the machines' offset."""
    from tests.fakes import fake_pool

    shas = history(env["repo"], 12, 8)
    pool = fake_pool(
        tmp_path / "pool",
        {
            "m1": {"seed": 1, "cv": 0.03, "delay_s": 0.3},
            "m2": {"seed": 2, "cv": 0.03, "delay_s": 0.3, "scale": 0.9},
        },
    )
    argv = args(env, shas[1], shas[-1], "--references", "0")
    argv[argv.index("--target") + 1] = str(pool)
    assert kbisect(*argv) == 0
    s = summary(env["results"])
    assert s["first_bad"]["commit"] == shas[8]
    # each machine's boots in order (its own call log): the first round is runs-min (2)
    # a side, two boots a machine, and each machine's two are one good and one bad (not
    # good on one and bad on the other, where the machines' offset would pass for the step)
    ends = {shas[1], shas[-1]}
    first = []
    for m in ("m1", "m2"):
        calls = [c["commit"] for c in fake_calls(pool.parent / f"{m}.toml")]
        assert set(calls) > ends  # the machine also took the search's boots
        first += [(None, c, m) for c in calls[:2]]
        assert set(calls[:2]) == ends
    pairs = {(c, m) for c in (shas[1], shas[-1]) for m in ("m1", "m2")}
    assert {(c, m) for _, c, m in first} == pairs


def test_the_idle_machines_of_a_round_of_checks_start_the_recheck():
    for n, culprit in ((32, "c19"), (60, "c40"), (24, "c5")):
        s, bench, _ = search(n, culprit, speeds=(1.05, 1.0, 0.96, 1.02), kind=StorySearch)
        assert isinstance(s, StorySearch)
        answer = s.find()
        assert answer.candidates[0][0] == culprit and s.confirmed()
        parent = f"c{int(culprit[1:]) - 1}"
        # a round that checks revisions and starts the re-check on its idle machines
        mixed = [
            (commits, whose)
            for commits, whose in zip(bench.rounds, bench.whose, strict=True)
            if any(whose) and not all(whose)
        ]
        assert mixed, bench.rounds
        commits, whose = mixed[0]
        early = [c for c, w in zip(commits, whose, strict=True) if w]
        assert set(whose) - {None} == {culprit} and set(early) <= {parent, culprit}
        # never past the rule's first look (3 pairs) before the checks are done
        assert max(early.count(parent), early.count(culprit)) <= 3
        # they are the re-check's fresh samples: it went on from them
        boots = [c for c, w in bench.booted if w == culprit]
        assert len(boots) == len(bench.fresh(culprit, parent)) + len(bench.fresh(culprit, culprit))
        rc = s.run.rechecks[culprit]
        assert rc.confirmed and rc.n is not None and rc.n >= 3
        assert rc.n == min(len(bench.fresh(culprit, c)) for c in (parent, culprit))


def test_the_driver_starts_the_recheck_in_a_round_of_checks_and_goes_on_from_it(
    env,  # noqa: F811
    tmp_path,
    capsys,
) -> None:
    """The driver over a pool of three fake machines: a round that checks revisions
    takes the re-check's first fresh samples on its idle machines, into the re-check's
    own folder; the re-check goes on from them, and its pairs are the folder's samples."""
    from tests.fakes import fake_pool

    shas = history(env["repo"], 24, 15)
    pool = fake_pool(
        tmp_path / "pool",
        {f"m{i}": {"seed": i, "cv": 0.03, "delay_s": 0.05} for i in range(3)},
    )
    argv = args(env, shas[1], shas[-1], "--references", "0", "--story", "full")
    argv[argv.index("--target") + 1] = str(pool)
    assert kbisect(*argv) == 0
    s = summary(env["results"])
    assert s["first_bad"]["commit"] == shas[15] and s["confirmed"]
    out = capsys.readouterr()
    rounds = [
        line for line in (out.out + out.err).splitlines() if re.search(r"\] boot \d+ of", line)
    ]
    mixed = [r for r in rounds if "(recheck)" in r and ("(check)" in r or "(probe)" in r)]
    assert mixed, rounds
    (run,) = run_dirs(env["results"])
    folder = run / "recheck" / shas[15]
    taken = {p.name: len(list((p / "samples").glob("*.json"))) for p in folder.iterdir()}
    rc = s["recheck"]
    assert set(taken) == {shas[14], shas[15]}
    assert rc["n"] == min(taken.values()) and rc["n"] >= 3
