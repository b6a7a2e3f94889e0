"""The results database: an SQLite index of every run and every sample (docs/results-db.md).

The JSON files stay the record; `<results dir>/kbisect.sqlite` only indexes them, so that
a question over many runs (one scenario on one machine across kernels) is one query. It is
written through as each sample and summary is written (index.py) and can always be built
again from the files (rebuild.py).
"""
