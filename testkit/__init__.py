"""What the tests and the benchmarks share to drive the app: AppTest fragment reruns
(fragments.py). Installed with the project, so neither edits sys.path to reach it."""
