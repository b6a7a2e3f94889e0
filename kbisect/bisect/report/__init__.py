"""A finished bisection's report, either method, in every format: summary.json from the
state, then report.md, the PNGs, git-bisect.log and the mailing-list text from it.

files.py     the pipeline: summary.json built, then everything rendered from it
summary.py   the keys of either method's summary.json (run, drift check, exit)
git.py       the git method's summary and sections (steps, second pass, re-check)
posterior.py the posterior's summary (probabilities, re-checks, first stop, every
             sample) and its replayable log
answer.py    the posterior's sections of report.md, its plots, the answer printed
markdown.py  report.md: one page in one order, the method's sections put in; drift
table.py     the revisions tested: the summary's rows, their Markdown table and text
figures.py   bisect.png, tps-time.png, posterior.png
text.py      the mailing-list text (`kbisect report --format text`)
"""
