"""Simulated bisections (scripts/simulate-bisect --matrix): generated histories, a noisy
world, and kbisect's methods run on them, tallied per setting.

histories.py  linear and merge-heavy commit graphs, culprits, unbuildable commits
world.py      the noise: boot-to-boot CV, heavy tails, a drifting host, the boot clock
gitmodel.py   `git bisect`'s choice of revision and its answer, on the commit graph
methods.py    sequential (today), posterior, each with or without drift-aware references
matrix.py     the settings, the tallies, the tables and the reliability table
"""
