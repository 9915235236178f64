"""What the tests and the benchmarks share: the real server and browser (browser.py), AppTest
fragment reruns (fragments.py), a tiny real checkpoint (tiny.py), small random variants of a
model for oracle tests (variants.py) and a Hugging Face hub cache laid out on disk, in which a
model is found by its name offline (hub_cache.py), and the recorded fixtures' builders, which
the benchmarks reuse (fixtures.py). Installed with the project, so neither edits
sys.path to reach it."""
