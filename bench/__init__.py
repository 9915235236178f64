"""The benchmarks: each module a script (`.venv/bin/python bench/NAME.py`, or `python -m
bench.NAME` from the project root), installed with the project so that they import each other,
testkit and the package without editing sys.path; their figures are ratios measured in one run."""
