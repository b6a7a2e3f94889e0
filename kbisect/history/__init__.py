"""`kbisect history`: results over time, with change points and drift (docs/history.md).

source.py   where the samples come from (run dirs today; the sample index later)
series.py   samples -> ordered points (by tag, time or a study axis), and analysis
output.py   text, markdown, JSON, and the --out files (history.png, history.html)
"""
