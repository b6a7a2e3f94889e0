"""Simulated bisections (scripts/simulate-bisect --matrix): generated histories, a noisy
world, and kbisect's methods run on them, tallied per setting.

histories.py  linear and merge-heavy commit graphs, culprits, a fix inside the range,
              unbuildable commits
world.py      the noise: normal, t(3) or resampled real residuals, per-side CV, outlier
              boots, a drifting host, stale endpoint samples, the boot clock; a pool of
              machines with a machine effect, and its rounds; the bad endpoint with
              commits reverted (the revert check)
residuals.py  the real residuals (residuals.json, written by scripts/residuals)
gitmodel.py   `git bisect`'s choice of revision and its answer, on the commit graph
methods.py    sequential (today), posterior, each with or without drift-aware references
matrix.py     the settings (quick, full, story, pool), each run with every method, and
              the tallies saved and merged back
tally.py      what is counted of each setting and method, and when an answer is right
tables.py     the tables of the tallies and the reliability table
"""
