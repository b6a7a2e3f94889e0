"""Bisection on a tps figure: the driver, its checks, git glue, state, steps, samples, report.

driver.py     `kbisect bisect`: phases, --resume, one driver per repository
check.py      the endpoint check and threshold before; a revision built in the worktree
recheck.py    the one re-check of the answer (git's fixed, the posterior's adaptive rule)
gitbisect.py  `git bisect start/replay/run` in kbisect's scratch worktree
samples.py    the per-commit sample store; one more sample of a revision
state.py      a bisection's options and state.json; the parsed `git bisect log`
step.py       `kbisect bisect-step` and bisect/run: one step in git's exit codes
report/       summary.json, report.md, the plots and the text of a finished bisection
"""
