"""Opening a model: load + first translation, in the library and in the app, in one run.

    .venv/bin/python bench/open_model.py [--repeats 3]

1. The library, in a fresh process per repeat (so nothing is traced or cached yet): the bundled
   checkpoint's load_checkpoint and its first translation of "Friday, March 5, 2021" with every
   step's attention (the first decode of an architecture traces the compiled loop), then each
   bundled epoch opened after it: load + first translation + the attention maps. Goal: bundled
   checkpoint load + first translation <= 1 s. Then where a cold open's time goes, phase by
   phase (fresh processes again).
2. The app (Streamlit's AppTest runs the real app.py, in a fresh process per repeat): the home
   page, then the sidebar's "Active model" switched to each bundled epoch in turn; the server
   time of each switch's rerun (loading the model, translating, the page). Goal: switching
   between the bundled epochs <= 1 s server time.
Prints the median over the repeats (and the load average, since the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
SENTENCE = "Friday, March 5, 2021"

LIBRARY = r"""
import json, os, sys, time
from transformer import load_checkpoint
from transformer.inference.session import ASSETS
out = []
for name in %(names)r:
    t0 = time.perf_counter()
    ckpt = load_checkpoint(ASSETS / name)
    t1 = time.perf_counter()
    text = ckpt.translate(%(sentence)r).text
    t2 = time.perf_counter()
    ckpt.attention(%(sentence)r)
    t3 = time.perf_counter()
    out.append(dict(name=name, load=t1 - t0, translate=t2 - t1, attention=t3 - t2, text=text))
print("RESULT " + json.dumps(out))
"""

# Where a cold open's time goes: the load's own steps (timed by wrapping transformer.checkpoint.format's
# functions, which load_checkpoint looks up as it runs), then the first translation split into
# tracing the decode loop (the loop's tf.function traced on its own), and the rest (the first
# run, without Grappler's rewrites since compiled.unrewritten, and the host's work).
PHASES = r"""
import json, os, sys, time
t0 = time.perf_counter()
import transformer
import tensorflow as tf
from transformer.checkpoint import format as checkpoint
from transformer.inference import search_ours
phases = {"import TensorFlow": time.perf_counter() - t0}
for name, label in (("_load_tokenizer", "load: the two tokenizers (with their checks)"),
                    ("_read_weights", "load: read and check the weights"),
                    ("_build_model", "load: build the model (create its variables)"),
                    ("_assign_weights", "load: assign the weights"),
                    ("_check_finite", "load: the finiteness probe (an eager forward pass)")):
    def timed(*args, _f=getattr(checkpoint, name), _label=label, **kwargs):
        start = time.perf_counter()
        try:
            return _f(*args, **kwargs)
        finally:
            phases[_label] = phases.get(_label, 0) + time.perf_counter() - start
    setattr(checkpoint, name, timed)
t0 = time.perf_counter()
ckpt = checkpoint.load_checkpoint(checkpoint.DEFAULT_CHECKPOINT)
phases["load: everything else"] = time.perf_counter() - t0 - sum(
    v for k, v in phases.items() if k.startswith("load:"))
loop = search_ours.compiled_greedy(ckpt.model, True)
t0 = time.perf_counter()
graph = loop.trace(ckpt.model).graph.as_graph_def()
ops = len(graph.node) + sum(len(f.node_def) for f in graph.library.function)
phases["first translation: trace the decode loop (%%d graph ops)" %% ops] = (
    time.perf_counter() - t0)
t0 = time.perf_counter()
ckpt.translate(%(sentence)r)
phases["first translation: first run, host"] = time.perf_counter() - t0
print("RESULT " + json.dumps(phases))
"""


def bundled_names() -> list[str]:
    from transformer.inference.session import ASSETS, DEFAULT_CHECKPOINT

    epochs = sorted(p.name for p in ASSETS.glob("*.ckpt") if p.name != DEFAULT_CHECKPOINT.name)
    return [DEFAULT_CHECKPOINT.name] + epochs


def library_run(names) -> list[dict]:
    code = LIBRARY % dict(root=str(ROOT), names=names, sentence=SENTENCE)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def phases_run() -> dict:
    code = PHASES % dict(root=str(ROOT), sentence=SENTENCE)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def app_run(names) -> list[tuple[str, float]]:
    from streamlit.testing.v1 import AppTest

    from explorer import state

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    t = time.perf_counter()
    at.run()
    times = [("home page, default model (first run of the app)", time.perf_counter() - t)]
    for name in names[1:] + names[:1]:
        at.selectbox(key=state.MODEL).set_value(f"{state.BUNDLED}:{name}")
        t = time.perf_counter()
        at.run()
        times.append((f"switch to {name}", time.perf_counter() - t))
        if at.exception:
            raise SystemExit(f"the app raised: {at.exception[0].value}")
    return times


def app_in_a_fresh_process() -> list[tuple[str, float]]:
    """app_run in a new Python process: nothing loaded, cached or traced yet."""
    done = subprocess.run([sys.executable, __file__, "--app-once"], capture_output=True,
                          text=True, check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return [tuple(item) for item in json.loads(line[len("RESULT "):])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--app-once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = bundled_names()
    if args.app_once:
        print("RESULT " + json.dumps(app_run(names)))
        return
    print(f"load average {os.getloadavg()[0]:.2f}")

    runs = [library_run(names) for _ in range(args.repeats)]
    print("\n1. The library, a fresh process per repeat (median of "
          f"{args.repeats}; seconds):")
    for i, name in enumerate(names):
        load = statistics.median(r[i]["load"] for r in runs)
        first = statistics.median(r[i]["translate"] for r in runs)
        attention = statistics.median(r[i]["attention"] for r in runs)
        what = "first of its architecture" if i == 0 else "same architecture"
        print(f"   {name:22s} ({what}): load {load:.3f} + first translation {first:.3f} "
              f"= {load + first:.3f}; attention maps {attention:.3f} -> {runs[0][i]['text']!r}")
    cold = statistics.median(r[0]["load"] + r[0]["translate"] for r in runs)
    print(f"   bundled checkpoint load + first translation: {cold:.3f} s (goal <= 1 s: "
          f"{'met' if cold <= 1 else 'NOT met'})")

    phases = [phases_run() for _ in range(args.repeats)]
    print(f"   where it goes (a fresh process each, median of {args.repeats}; seconds):")
    for what in phases[0]:
        print(f"     {statistics.median(p[what] for p in phases):6.3f}  {what}")

    app = [app_in_a_fresh_process() for _ in range(args.repeats)]
    print(f"\n2. The app (AppTest, server time of one rerun; median of {args.repeats}):")
    for i, (what, _) in enumerate(app[0]):
        print(f"   {what}: {statistics.median(r[i][1] for r in app):.3f} s")
    switches = [statistics.median(r[i][1] for r in app) for i in range(1, len(app[0]))]
    print(f"   slowest switch between bundled epochs: {max(switches):.3f} s (goal <= 1 s: "
          f"{'met' if max(switches) <= 1 else 'NOT met'})")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
