"""`kbisect study`: many kernels × workload settings in one command (docs/study.md).

A study is a list of kernels × the product of named axes (scenario keys, the kernel
command line, or bundles of both); each combination of axis levels is a cell. Every
kernel boots in every cell, in randomized complete blocks; the analysis flags steps
between consecutive kernels and prints the bisect line for each.

    axes.py      axes, levels, cells (the product, expanded in one place)
    spec.py      study files (harness/studies/*.toml) and the command line
    kernels.py   kernel lists, tag patterns in version order, builds
    budget.py    cells, builds, boots and the estimated time; the budget
    schedule.py  blocks, the saved plan, resume, retries
    store.py     the run directory: study.json, schedule.json, samples per cell
    definition.py  study.json and schedule.json checked whole when read back
    analysis.py  CIs, ratios, steps with Holm's correction, bisect lines, interactions
    report.py    Markdown; figures.py its PNGs; text.py the mailing-list text
    fanout.py    `study plan` (a job matrix of whole cells) and `study merge`
    run.py       running one: checks, the plan, builds, boots in blocks, resume
    machine.py   the machine a share ran on
"""
