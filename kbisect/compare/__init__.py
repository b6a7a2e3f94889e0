"""`kbisect compare`: two sides measured fairly, a ratio with its uncertainty, a verdict.

A side is a kernel (a revision to build, or a prebuilt image) plus kernel command-line
extras plus scenario overrides, so "base vs base+revert", "preempt=none vs preempt=full
on one kernel" and "huge pages off vs on" are the same command. Boots are interleaved in
ABBA blocks so that drift (thermal, page cache, the host) hits both sides alike.

    run.py       a run: the plan, the boots in order, resume, the verdict and report
    sides.py     the two sides from the options: kernels, revisions, builds, checks
    schedule.py  the boot order, plan.json, and where an interrupted run stands
    sequential.py  --boots auto: a pair at a time until the ratio is settled
    summary.py   summary.json, the table printed at the end, a partial run's summary
    report.py    a run as `kbisect report` sees it: the samples, the verdict recomputed
    markdown.py  its report.md and plots (report.py computes the Warnings section)
    text.py      its mailing-list text

The subcommand's parser is kbisect/commands/compare.py.
"""
