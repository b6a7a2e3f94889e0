# kbisect recipes: `just --list` is the map. CI calls only these.

set shell := ["bash", "-euo", "pipefail", "-c"]

venv := justfile_directory() / ".venv/bin"
export PATH := venv + ":" + env_var("PATH")

# list the recipes
default:
    @just --list

# install Debian packages and the virtualenv (idempotent)
[group('setup')]
setup:
    scripts/setup

# check this host: tools, disk, and whether KVM is really usable
[group('setup')]
doctor:
    kbisect doctor

# ruff, ruff format, mypy, shellcheck, actionlint
[group('check')]
lint:
    ruff check .
    ruff format --check .
    mypy
    shellcheck $(git ls-files -co --exclude-standard | xargs grep -lE '^#!.*(ba)?sh' 2>/dev/null | grep -v '^\.venv/')
    if ls .github/workflows/*.yml >/dev/null 2>&1; then actionlint; fi

# lint, then the test suite (unit tests, plus the real kernel build/boot/compare smoke), then the fault-injection and input fuzz suites
[group('check')]
test: lint
    pytest -q
    just faults 3
    just fuzz 0.35

# unit tests only (fake kernel tree, generated histories): seconds
[group('check')]
unit:
    pytest -q -m 'not e2e and not real and not faults and not fuzz'

# fault injection: kill -9/SIGINT/SIGTERM/SIGHUP, per_kind+ each (50; `just test`: 4), into fake compares and bisections (~4 min at 4-5 on 2 cores, ~6 at 10, ~18 at 50)
[group('check')]
faults per_kind="50":
    KBISECT_FAULTS_PER_KIND={{per_kind}} pytest -q -m faults

# input fuzz: generated command lines for every subcommand and corrupted files of every kind, on the fake target (~3.5 min at scale 1, 2.5 at 0.7; `just test`: 0.5; seeded: KBISECT_FUZZ_SEED)
[group('check')]
fuzz scale="1":
    KBISECT_FUZZ_EXAMPLES={{scale}} pytest -q -m fuzz

# slow real-kernel tests: the arm64 cross build (and its boot to the root-fs mount)
[group('check')]
e2e:
    pytest -q -m e2e

# reformat the code
[group('check')]
fmt:
    ruff format .
    ruff check --fix .

# the main job: revert-check the heavy demo history's synthetic regression (README line 1)
[group('demo')]
demo:
    @echo "kbisect demo: the heavy demo history (a 1000 us busy wait per unix-socket send), 2 kernel builds + interleaved boots of ~2.3 min under TCG until the ratio is settled (--boots auto: from 3 a side, 2 with a noise prior); measured on a slow 2-core host: 39.8 min from cold, 12.2 min warm (docs/examples/demo-heavy)"
    kbisect compare --base "$(kbisect demo --variant heavy --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["head"])')" \
        --revert "$(kbisect demo --variant heavy --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["changes"][0]["commit"])')" \
        --scenario simple-update-2vcpu --boots auto

# preempt=none vs preempt=full on one 6.12 kernel, huge pages off (the mechanism behind 7dadeaa6e851)
[group('demo')]
demo-preempt:
    @echo "kbisect demo-preempt: 1 kernel + interleaved boots of ~2.5 min under TCG until the ratio is settled (--boots auto, 3 to 10 a side): ~15-50 min on 2 cores (estimate)"
    kbisect compare --base v6.12-debian --append-a preempt=none --append-b preempt=full \
        --label-a "preempt=none" --label-b "preempt=full" --scenario simple-update-2vcpu --boots auto

# the founding case on a real kernel: Linux 7.2 as Debian ships it (PREEMPT_LAZY) against 7.2 with
# 7dadeaa6e851 reverted, booted with preempt=none (docs/examples/founding)
[group('demo')]
founding scenario="contention-2vcpu":
    @echo "kbisect founding: debian:7.2 imported once (~1 min), 2 kernel builds (~10 + ~5 min cold), interleaved boots of ~2.4 min under TCG until the ratio is settled (--boots auto, 3 to 10 a side; 10 fixed boots took 24 min measured with the kernels built)"
    kbisect tree add debian:7.2
    kbisect compare --tree debian:7.2 --base HEAD --patch-b kernel-patches/7.2/0001-Revert-sched-Further-restrict-the-preemption-modes.patch \
        --append-b preempt=none --label-a "7.2 (as shipped)" --label-b "7.2 + revert, preempt=none" \
        --scenario {{scenario}} --boots auto

# bisect the demo history (base good, head bad) and find the synthetic regression
[group('demo')]
demo-bisect:
    @echo "kbisect demo-bisect: the posterior method, boots of ~2.5 min under TCG (endpoints, ~5-8 in the search, ~4-6 for the revert check) plus builds (43 min measured with the re-check the revert check replaced)"
    kbisect demo
    kbisect bisect --good v6.12-debian --bad kbisect-demo --scenario simple-update-2vcpu

# bisect the steps demo history (regression 1 at commit 10, fixed at 15, regression 2 at 19 of 24)
[group('demo')]
demo-bisect-steps scenario="simple-update-2vcpu":
    @echo "kbisect demo-bisect-steps: the default search over 24 commits with two planted steps and a fix, up to 100 boots of ~2 min plus incremental builds: with simple-update-2vcpu not yet measured to its end (interrupted after 1 h 38 min, 29 search boots and 12 of the revert check: regression 1 named, its revert restoring 8%, the rest bisected with it reverted); the whole story (then the default, now --story full) with smoke took 84 min (docs/examples/demo-bisect-steps)"
    kbisect demo --variant steps
    kbisect bisect --method posterior --good v6.12-debian --bad kbisect-demo-steps --scenario {{scenario}}

# bisect the two demo history (two 500 us regressions at commits 8 and 17 of 24, both to the head)
[group('demo')]
demo-bisect-two scenario="simple-update-2vcpu":
    @echo "kbisect demo-bisect-two: the posterior method over 24 commits with two regressions that both persist; each answer verified by its revert, the rest bisected with it reverted: 29 boots of ~2 min under TCG plus 11 incremental builds, 61 min measured (docs/examples/demo-bisect-two)"
    kbisect demo --variant two
    kbisect bisect --good v6.12-debian --bad kbisect-demo-two --scenario {{scenario}}

# bisect the heavy demo history over a pool of two 1-vCPU vng slots on this host (docs/pool.md)
[group('demo')]
demo-pool-bisect:
    @echo "kbisect demo-pool-bisect: the heavy demo history (a 1000 us delay), two vng guests of 1 vCPU at once, the smoke scenario: 35 min measured, the planted commit named and confirmed (docs/examples/pool-vng-bisect)"
    kbisect demo --variant heavy
    kbisect bisect --target docs/examples/pool-vng-bisect/pool.toml --good v6.12-debian --bad kbisect-demo-heavy \
        --scenario smoke --set guest.vcpus=1 --set pgbench.duration_s=10

# a study: 3 kernels of the demo history x clients 4 and 16, 3 boots each (~50 min on 2 cores)
[group('demo')]
demo-study:
    @echo "kbisect demo-study: 3 kernels x 2 cells x 3 boots = 18 boots of ~2.6 min under TCG, plus 3 cached or incremental builds: ~50 min on 2 cores"
    kbisect demo
    kbisect study --name demo-study --kernels v6.12-debian,kbisect-demo~7,kbisect-demo \
        --scenario simple-update-2vcpu --axis pgbench.clients=4,16 --boots 3

# split a study into shares of whole cells, one per machine (env: KBISECT_STUDY, KBISECT_RUNNERS)
[group('workflows')]
study-plan:
    workflows/study-plan

# run one share of a study on this machine, holding the machine lock (env: KBISECT_STUDY, KBISECT_SHARE)
[group('workflows')]
study-share:
    workflows/machine-lock workflows/study-share

# join the shares of a study and report (env: KBISECT_SHARES_DIR)
[group('workflows')]
study-merge:
    workflows/study-merge

# measure the missed -rc tags (oldest first, KBISECT_MAX_TAGS) against their baselines and record them, holding the machine lock (env: KBISECT_TREE, ...)
[group('workflows')]
rc-watch:
    workflows/machine-lock workflows/rc-watch

# find the rc-watch run whose rc-history artifact is the newest (env: GH_TOKEN, GH_REPO)
[group('workflows')]
rc-last:
    workflows/rc-last

# keep a scheduled workflow enabled through the API (env: KBISECT_WORKFLOW, GH_TOKEN, GH_REPO)
[group('workflows')]
keepalive:
    workflows/keepalive

# compare a base with and without one commit, holding the machine lock (env: KBISECT_TREE_URL, KBISECT_BASE, KBISECT_REVERT)
[group('workflows')]
revert-check:
    workflows/machine-lock workflows/revert-check

# open or update the GitHub issue for each tag rc-watch flagged, with the trend (env: KBISECT_REPORT, KBISECT_TAGS, KBISECT_TREND)
[group('workflows')]
rc-issue:
    workflows/rc-issue

# add `kbisect doctor` (KVM or TCG, tools) to the CI job summary
[group('workflows')]
ci-summary:
    { echo '### kbisect doctor'; echo '```'; kbisect doctor 2>&1 || true; echo '```'; } >>"${GITHUB_STEP_SUMMARY:-/dev/stdout}"
