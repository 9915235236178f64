"""How the benchmarks time a call: one run's seconds, a median of repeats, and several cases
interleaved so that machine noise hits each alike; and the same helpers as the text that starts
a measured child process's script (CHILD_PRELUDE: bench/open_real.py, bench/real_models.py)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

# Timers, the process's peak RSS, a median of %(repeats)d runs, r = {} for the results and
# done(), which prints them as "RESULT {json}" and exits: the start of a child's script.
CHILD_PRELUDE = r"""
import json, math, resource, statistics, sys, time
def now(): return time.perf_counter()
def vm(key):  # a /proc/self/status figure in bytes ("VmRSS": resident now)
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) * 1024 for x in f if x.startswith(key + ":"))
def rss():  # VmHWM (Linux's ru_maxrss survives fork + exec: a big parent's mark would show)
    return vm("VmHWM")
def timed(fn):
    t = now(); fn(); return now() - t
def median(fn): return statistics.median(timed(fn) for _ in range(%(repeats)d))
r = {}
def done():
    print("RESULT " + json.dumps(r)); sys.exit(0)
"""


def seconds(fn: Callable[[], object]) -> float:
    """The wall-clock seconds of one call of fn."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_time(fn: Callable[[], object], repeats: int, warm: bool = False) -> float:
    """The median seconds of `repeats` calls of fn (after one untimed call when warm)."""
    if warm:
        fn()
    return statistics.median(seconds(fn) for _ in range(repeats))


def interleaved(cases: dict[str, Callable[[], object]], repeats: int
                ) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Each case's first call (it may trace), then `repeats` rounds of every case in turn:
    ({case: first seconds}, {case: median}, {case: least})."""
    first = {case: seconds(fn) for case, fn in cases.items()}
    times = {case: [] for case in cases}
    for _ in range(repeats):
        for case, fn in cases.items():
            times[case].append(seconds(fn))
    return (first, {case: statistics.median(ts) for case, ts in times.items()},
            {case: min(ts) for case, ts in times.items()})
