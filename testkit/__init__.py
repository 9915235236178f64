"""What the tests and the benchmarks share: the real server and browser (browser.py), AppTest
fragment reruns (fragments.py), a tiny real checkpoint (tiny.py) and small random variants of a
model for oracle tests (variants.py). Installed with the project, so neither edits sys.path to
reach it."""
