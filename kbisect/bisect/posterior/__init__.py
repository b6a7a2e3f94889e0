"""The posterior method: the commit graph, the likelihood, the posterior and its search,
which reaches builds and boots through a bench (bench.py: the driver's, or the simulator's)."""
