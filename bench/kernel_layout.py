"""What a decode step's matmuls cost by the layout of their matrices: one row against each of a
decoder's matrices, chained (each product feeds the next input) in one compiled call, as a
greedy step runs them.

    .venv/bin/python bench/kernel_layout.py [--d-model 512] [--dff 2048] [--layers 6]

- (in, out): our kernels as Keras stores them, x W (transformer.model.attention.dense);
- (out, in): the same matrices stored transposed, Hugging Face's layout, computed as W x^T
  (how the tied output projection already runs: transformer.model.transformer.project);
- NumPy: x W with NumPy's matmul, one call per matrix from Python.

Prints each one's median seconds (of 15, after a first call) and the bandwidth it reads the
matrices at, against NumPy streaming the same bytes (np.add.reduce over them). The default
shapes are t5-small's decoder (6 layers x 4 attention matrices of 512 x 512 and the feed-forward
pair, 72 MB): larger than the caches, so every matrix is read from memory, as in a step.
"""

import argparse
import statistics
import time

import numpy as np

import transformer  # noqa: F401  (TensorFlow's options, set before it loads, as for a user)
from transformer.inference.compiled import unrewritten

# isort: split
import tensorflow as tf  # noqa: E402

REPEATS = 15


def chained(matrices):
    """A compiled function multiplying one row against each of `matrices` in order, each
    product feeding the next one's input (as a decode step's layers wait on each other): a
    (variable, transposed) pair is x W for False, W x^T for True (a matrix stored (out, in))."""

    @tf.function(autograph=False)
    def run():
        s = tf.zeros([], tf.float32)
        for w, transposed in matrices:
            if transposed:
                y = tf.matmul(w, tf.fill([1, w.shape[1]], 1.0 + s), transpose_b=True)
            else:
                y = tf.matmul(tf.fill([1, w.shape[0]], 1.0 + s), w)
            s = y[0, 0] * 0.0  # the next input waits for this product
        return s

    return run


def median_seconds(fn) -> float:
    fn()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        np.asarray(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--dff", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=6)
    args = parser.parse_args()
    d, f = args.d_model, args.dff
    shapes = ([(d, d)] * 4 + [(d, f), (f, d)]) * args.layers  # (in, out), a layer's in order
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s, np.float32) for s in shapes]
    kernels = [tf.Variable(a) for a in arrays]  # (in, out)
    stored = [tf.Variable(np.ascontiguousarray(a.T)) for a in arrays]  # (out, in)

    in_out = chained([(w, False) for w in kernels])
    out_in = chained([(w, True) for w in stored])

    def numpy_matmul():
        s = np.float32(0.0)
        for a in arrays:
            s = (np.full((1, a.shape[0]), 1.0 + s, np.float32) @ a)[0, 0] * 0.0
        return s

    nbytes = sum(a.nbytes for a in arrays)
    block = np.concatenate([a.ravel() for a in arrays])
    stream = median_seconds(lambda: np.add.reduce(block))
    print(f"{len(arrays)} matrices, {nbytes / 2**20:.0f} MiB; NumPy streams them in "
          f"{stream * 1e3:.2f} ms ({nbytes / stream / 2**30:.1f} GiB/s)")
    with unrewritten():  # as the decode loop runs
        for label, fn in (("(in, out): x W, ours", in_out),
                          ("(out, in): W x^T, Hugging Face's layout", out_in),
                          ("NumPy's matmul, x W", numpy_matmul)):
            seconds = median_seconds(fn)
            print(f"  {label:42s} {seconds * 1e3:6.2f} ms  {nbytes / seconds / 2**30:5.1f} GiB/s  "
                  f"{seconds / stream:.2f}x the stream")


if __name__ == "__main__":
    main()
