"""Bisection on a tps figure: the driver, its checks, git glue, state, steps, samples, report.

driver.py      `kbisect bisect`: phases, --resume, one driver per repository
state.py       a bisection's options and its state (Run), saved to state.json
check.py       the endpoint check and threshold before bisecting
samples.py     the per-commit sample store; one more sample of a revision
references.py  when a drift-aware reference boot is due
recheck.py     the one re-check of the answer (git's fixed, the posterior's adaptive rule)
verify.py      the revert check that ends every bisection: bad with the answer reverted
wallclock.py   the drift check of a bisection's samples against time
git/           the git method: `git bisect` in the scratch worktree (run.py), one step in
               git's exit codes (step.py, judge.py), the parsed log, the ktest.pl bridge
posterior/     the posterior method: the commit graph, the likelihood, the posterior, the
               next revision, the search loop and the port it builds and boots through
report/        summary.json, report.md, the plots and the text of a finished bisection
"""
