"""flowmem's benchmark suite: a module per benchmark, beside the package, never in its wheel.

`make bench` (= `python -m bench --quick`) measures the performance figures side by side
(bench/run.py); `python -m bench NAME [ARGS]` or `python bench/NAME.py [ARGS]` runs one benchmark
(`python -m bench --list` names them); `make docs-check` (bench/docs_check.py) compares the
figures README.md and docs/ quote with what the commands measure. Run from a checkout: the
results of runs are in results/ (latest.json, the recorded run the docs quote; local.json, the
last run here, git-ignored).
"""
