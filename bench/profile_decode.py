"""Where a cached decode spends its time: TensorFlow's profiler around real decodes, summed
per kernel, next to the host's share and the size of the compiled step.

    .venv/bin/python bench/profile_decode.py [--model bundled|paper-base] [--folder DIR]
                                             [--runs N]

- bundled: the bundled dates model translating "Friday, March 5, 2021" with every step's
  attention (12 steps), as the app does;
- paper-base: random weights (6 + 6 layers, d_model 512, 8 heads, dff 2048, vocabulary 8000),
  a 32-token source, 64 tokens with stop_at_end=False (as bench/decode.py);
- --folder DIR: a Hugging Face model folder (bench/real_models.py's, in /work/models) greedy
  decoding 48 tokens of real_models' sentence with its generation config's search
  (OpenedModel.generate, exactly 48 new tokens), as that bench's decode step is measured.

Prints, per decode step: the wall time of the whole decode and of the one compiled call (the
rest is the host: tokenizing, padding, turning the arrays into steps), the kernels' time and
count by type (both executor threads together, so it can exceed the wall time), and the
graph nodes of the loop's body by type (constants left out); for paper-base, the weight
matmuls' kernel time against NumPy streaming the same matrices (bench/decode.py). The profiler
itself slows every kernel a little: compare the shares, and take times from bench/decode.py.
"""

import argparse
import collections
import glob
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from transformer import (
    DEFAULT_CHECKPOINT,
    Transformer,
    TransformerConfig,
    greedy_decode,
    load_checkpoint,
)
from transformer.inference import search_ours

# isort: split
import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

FRIDAY = "Friday, March 5, 2021"


FOLDER_TOKENS = 48


def decoder(name, folder=None):
    """(decode(), the model, steps per decode)."""
    if folder is not None:
        import dataclasses
        import math

        from real_models import SOURCE  # bench/real_models.py

        from transformer.inference.generation_config import read_generation_config

        ckpt = load_checkpoint(folder)
        base = ckpt.generation or read_generation_config(None, ckpt.config)
        settings = dataclasses.replace(base.greedy(), max_length=FOLDER_TOKENS + 1,
                                       min_length=FOLDER_TOKENS + 1)
        return ((lambda: ckpt.generate(SOURCE, settings, seconds=math.inf)), ckpt.model,
                FOLDER_TOKENS)
    if name == "bundled":
        ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
        return (lambda: ckpt.translate(FRIDAY)), ckpt.model, len(ckpt.translate(FRIDAY).steps)
    config = TransformerConfig(src_vocab_size=8000, tgt_vocab_size=8000, max_len=256)
    model = Transformer(config).build_weights()
    source = np.random.default_rng(0).integers(3, 8000, 32)
    return (lambda: greedy_decode(model, source, max_len=64, stop_at_end=False)), model, 64


def kernel_times(logdir):
    """{kernel type: (total microseconds, count)} from the profiler's trace, and the total
    microseconds of the compiled calls (the function's "__inference_run" events)."""
    path = sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))[-1]
    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(path).read_bytes())
    kernels = collections.defaultdict(lambda: [0.0, 0])
    calls = 0.0
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if line.name == "python" and "__inference_run" in name:
                    calls += event.duration_ps / 1e6
                elif line.name.startswith("tf_Compute") and ":" in name:
                    kind = name.rsplit(":", 1)[1]
                    if kind != "Process":  # the executor's wrapper around each kernel
                        kernels[kind][0] += event.duration_ps / 1e6
                        kernels[kind][1] += 1
    return kernels, calls


def body_nodes(model, folder: bool = False):
    """Node types of the decode loop's body graph (constants left out): search_ours' greedy
    loop, or for a folder transformers' greedy search (search_transformers), which it decodes
    with."""
    if folder:
        from transformer.inference.search_transformers import _compiled

        loop = _compiled(model, "greedy")
    else:
        loop = search_ours.compiled_greedy(model, True)
    graph = loop.trace(model).graph.as_graph_def()
    bodies = [f for f in graph.library.function if f.signature.name.startswith("while_body")]
    return collections.Counter(node.op for f in bodies for node in f.node_def
                               if node.op != "Const")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("bundled", "paper-base"), default="bundled")
    parser.add_argument("--folder", help="a Hugging Face model folder instead of --model")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    decode, model, steps = decoder(args.model, args.folder)
    decode()  # trace
    decode()
    per_step = args.runs * steps
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        start = time.perf_counter()
        for _ in range(args.runs):
            decode()
        wall = (time.perf_counter() - start) * 1e6
        tf.profiler.experimental.stop()
        kernels, calls = kernel_times(logdir)
    nodes = body_nodes(model, folder=args.folder is not None)
    label = args.folder or args.model
    print(f"{label}: {args.runs} decodes of {steps} steps under the profiler (load "
          f"{os.getloadavg()[0]:.2f}), per step:")
    print(f"  wall {wall / per_step:8.1f} us: compiled call {calls / per_step:8.1f} us, host "
          f"{(wall - calls) / per_step:8.1f} us ({(wall - calls) / wall:.0%})")
    total = sum(t for t, _ in kernels.values())
    print(f"  kernels {total / per_step:8.1f} us in all ({sum(n for _, n in kernels.values()) / per_step:.0f}"
          " kernels), by type:")
    for kind, (micros, count) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:15]:
        print(f"    {kind:28s} {micros / per_step:8.1f} us  {count / per_step:6.1f} per step  "
              f"{micros / total:6.1%}")
    print(f"  the loop body's graph: {sum(nodes.values())} nodes besides constants; "
          + ", ".join(f"{op} {n}" for op, n in nodes.most_common(12)))
    if args.model == "paper-base" and args.folder is None:  # its matmuls against the stream
        from decode import step_weights, stream_time  # bench/decode.py

        matmuls = sum(t for kind, (t, _) in kernels.items()
                      if kind.endswith("MatMul") and "Batch" not in kind) / per_step
        stream, _ = stream_time(step_weights(model))
        print(f"  the weight matmuls' kernels take {matmuls / 1000:.2f} ms per step; NumPy "
              f"streams the same matrices in {stream * 1000:.2f} ms ({matmuls / 1e6 / stream:.2f}x)")


if __name__ == "__main__":
    main()
