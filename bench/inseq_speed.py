"""Integrated gradients against inseq's on the same model and sentences (issue 41, item 9: the
anchor the gradient methods are measured against, ours at most 0.5x inseq's time).

    INSEQ_PYTHON=/work/inseq-venv/bin/python .venv/bin/python bench/inseq_speed.py \\
        [--steps 32] [--repeats 3]

The Marian fixture (tests/fixtures/marian) and the sentence pairs the inseq recording uses
(tests/fixtures/make_inseq_attributions.py PAIRS), each target typed (teacher forcing). Each side
in its own process (ours: OpenedModel.contributions(method="integrated_gradients", steps=N); inseq:
attribute(method "integrated_gradients", n_steps=N, attribute_target=True), the decoder's
embedding scale patched as the recording does), a first call per side untimed (ours traces, inseq
loads), then the median of --repeats runs of every pair in turn; ratios ours / inseq, measured in
one run. Skipped (exit 0, the reason printed) where no inseq interpreter is named."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "tests" / "fixtures" / "marian"

PRELUDE = r"""
import json, statistics, time
PAIRS = %(pairs)r
def timed(fn):
    t = time.perf_counter(); fn(); return time.perf_counter() - t
"""

OURS = PRELUDE + r"""
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from transformer import load_checkpoint
model = load_checkpoint(%(folder)r)
run = lambda s, t: model.contributions(s, t, method="integrated_gradients", steps=%(steps)d)
first = timed(lambda: run(*PAIRS[0]))
times = {s: statistics.median(timed(lambda: run(s, t)) for _ in range(%(repeats)d))
         for s, t in PAIRS}
print("RESULT " + json.dumps({"first": first, "times": times}))
"""

THEIRS = PRELUDE + r"""
import inseq
model = inseq.load_model(%(folder)r, "integrated_gradients")
model.model.get_decoder().embed_scale = 1.0  # as the recording (its docstring says why)
run = lambda s, t: model.attribute(s, t, method="integrated_gradients", attribute_target=True,
                                   n_steps=%(steps)d, show_progress=False)
first = timed(lambda: run(*PAIRS[0]))
times = {s: statistics.median(timed(lambda: run(s, t)) for _ in range(%(repeats)d))
         for s, t in PAIRS}
print("RESULT " + json.dumps({"first": first, "times": times}))
"""


def _pairs() -> list[tuple[str, str]]:
    """The inseq recording's sentence pairs (tests/fixtures/make_inseq_attributions.py PAIRS),
    read from that file as a module without putting its folder on sys.path."""
    import importlib.util

    path = ROOT / "tests" / "fixtures" / "make_inseq_attributions.py"
    spec = importlib.util.spec_from_file_location("make_inseq_attributions", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [tuple(pair) for pair in module.PAIRS]


def _run(python: str, script: str, **values) -> dict:
    values = {"pairs": _pairs(), "folder": str(FOLDER), **values}
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([python, "-c", script % values], capture_output=True, text=True,
                          env=env, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{python} failed: {done.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    inseq_python = os.environ.get("INSEQ_PYTHON")
    if not inseq_python:
        print("skipped: set INSEQ_PYTHON to a Python that imports inseq "
              "(tests/fixtures/make_inseq_attributions.py says how to make one)")
        return 0
    ours = _run(sys.executable, OURS, steps=args.steps, repeats=args.repeats)
    theirs = _run(inseq_python, THEIRS, steps=args.steps, repeats=args.repeats)
    print(f"integrated gradients, {args.steps} steps, Marian fixture, each target typed; "
          f"median of {args.repeats}; seconds")
    print(f"{'source':40s} {'ours':>8s} {'inseq':>8s} {'ratio':>6s}")
    ratios = []
    for source, ours_s in ours["times"].items():
        theirs_s = theirs["times"][source]
        ratios.append(ours_s / theirs_s)
        print(f"{source[:40]:40s} {ours_s:8.3f} {theirs_s:8.3f} {ours_s / theirs_s:6.2f}")
    print(f"first call (ours traces, inseq's first attribute): {ours['first']:.2f} s, "
          f"{theirs['first']:.2f} s")
    worst = max(ratios)
    print(f"goal: ours at most 0.5x inseq's time: {'met' if worst <= 0.5 else 'NOT met'} "
          f"(largest ratio {worst:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
