"""Greedy decoding: the compiled loop (cached) against the naive reference and the memory-stream
limit, in one run.

    .venv/bin/python bench/decode.py [--xla]

A paper-base model with random weights (6 + 6 layers, d_model 512, 8 heads, dff 2048, vocabulary
8000, max_len 256), a 32-token source, 64 and 256 generated tokens with stop_at_end=False.
Prints the best of several runs (the machine is shared: the least disturbed run), each with
its median and the load average (1 min) when it was measured:
- the cached path's tokens/s and time per step (whole decode / steps, and the marginal step
  (t256 - t64) / 192, which leaves out the encoder and the call), and the naive path's per step;
  the cache's speed-up at 64 and 256 tokens (goal: >= 5x at 256);
- the time NumPy takes to stream the weight matrices a decoder step reads, once: one
  (1, d_in) @ (d_in, d_out) matmul per matrix (self-attention q, k, v, output; cross-attention
  q and output (its keys and values are cached); both FFN matrices; the output projection);
  and the cached step / stream ratio (goal: <= 1.3);
- the bundled model's "Friday, March 5, 2021" translation with all attention (goal: <= 10 ms),
  and the first call's cost (trace, or with --xla trace + compile per bucket).
--xla sets transformer.inference.compiled.JIT_COMPILE (XLA compiles the loop once per bucket).
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402

from transformer import (
    DEFAULT_CHECKPOINT,
    Transformer,
    TransformerConfig,
    greedy_decode,
    load_checkpoint,
)
from transformer.inference import compiled

SOURCE_LEN, REPEATS = 32, 3
FRIDAY = "Friday, March 5, 2021"


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def timed(fn, repeats=REPEATS):
    """(best seconds, "median ...; load ...") of repeats calls. The machine is shared: the best
    run is the least disturbed one, and every ratio is taken between best runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), f"median {np.median(times) * 1000:.1f} ms; {load()}"


def decode(model, source_ids, new_tokens, use_cache):
    return greedy_decode(model, source_ids, max_len=new_tokens, use_cache=use_cache,
                         stop_at_end=False)


def step_weights(model) -> list[np.ndarray]:
    """Every weight matrix one cached decoder step multiplies by (biases and LayerNorm left out):
    per decoder layer self q, k, v, output, cross q, output, FFN in and out; the output
    projection."""
    mats = []
    for layer in model.decoder_layers:
        for attention, names in ((layer.self_attention, ("query", "key", "value", "output_dense")),
                                 (layer.cross_attention, ("query", "output_dense"))):
            mats += [getattr(attention, name).kernel.numpy() for name in names]
        mats += [layer.feedforward.intermediate.kernel.numpy(),
                 layer.feedforward.output_dense.kernel.numpy()]
    mats.append(model.output_projection.kernel.numpy())
    return mats


def stream_time(mats, repeats=20) -> tuple[float, str]:
    vectors = [np.random.default_rng(0).standard_normal((1, m.shape[0])).astype(np.float32)
               for m in mats]

    def once():
        for x, m in zip(vectors, mats):
            x @ m
    once()
    return timed(once, repeats)


def main():
    xla = "--xla" in sys.argv
    compiled.JIT_COMPILE = xla
    print(f"mode: {'XLA (jit_compile)' if xla else 'TF graph (no XLA)'}; "
          f"buckets: {compiled.SMALLEST_BUCKET}, {2 * compiled.SMALLEST_BUCKET}, ... "
          "for source and cache lengths")
    config = TransformerConfig(src_vocab_size=8000, tgt_vocab_size=8000, max_len=256)
    model = Transformer(config).build_weights()
    source_ids = np.random.default_rng(0).integers(3, 8000, SOURCE_LEN)
    print(f"paper-base model, random weights; source {SOURCE_LEN} tokens; stop_at_end=False; "
          f"best of {REPEATS} (naive 256: 1 run)")
    cached, naive = {}, {}
    for new_tokens in (64, 256):
        start = time.perf_counter()
        decode(model, source_ids, new_tokens, True)  # trace (and compile this bucket)
        first = time.perf_counter() - start
        cached[new_tokens] = timed(lambda: decode(model, source_ids, new_tokens, True))
        seconds, when = cached[new_tokens]
        print(f"cached {new_tokens:3d} tokens: {new_tokens / seconds:7.1f} tokens/s, "
              f"{seconds / new_tokens * 1000:6.2f} ms/step ({when}); first call "
              f"{first:.2f} s ({first - seconds:.2f} s more than a warm one: trace/compile of "
              f"cache bucket {compiled.bucket(new_tokens, config.max_len)})")
    marginal = (cached[256][0] - cached[64][0]) / (256 - 64)
    print(f"cached marginal step (t256 - t64) / 192: {marginal * 1000:.2f} ms ({load()})")
    for new_tokens in (64, 256):
        decode(model, source_ids, 2, False)  # trace
        naive[new_tokens] = timed(lambda: decode(model, source_ids, new_tokens, False),
                                  REPEATS if new_tokens == 64 else 1)
        seconds, when = naive[new_tokens]
        print(f"naive  {new_tokens:3d} tokens: {new_tokens / seconds:7.1f} tokens/s, "
              f"{seconds / new_tokens * 1000:6.2f} ms/step ({when}); "
              f"cache speed-up {seconds / cached[new_tokens][0]:.1f}x"
              + (f" (goal >= 5x: {_verdict(seconds / cached[new_tokens][0] >= 5)})"
                 if new_tokens == 256 else ""))
    mats = step_weights(model)
    megabytes = sum(m.nbytes for m in mats) / 1e6
    stream, when = stream_time(mats)
    step = cached[256][0] / 256
    print(f"NumPy streams the step's {len(mats)} weight matrices ({megabytes:.0f} MB, one "
          f"(1, d) @ W each) in {stream * 1000:.2f} ms ({when})")
    print(f"cached step / stream: {step / stream:.2f} (whole decode / 256), "
          f"{marginal / stream:.2f} (marginal step) (goal <= 1.3: "
          f"{_verdict(marginal / stream <= 1.3)}; bench/profile_decode.py --model paper-base "
          "shows where the step's time goes)")

    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    start = time.perf_counter()
    ckpt.translate(FRIDAY)  # first call: trace (and compile)
    first = time.perf_counter() - start
    seconds, when = timed(lambda: ckpt.translate(FRIDAY), 20)
    result = ckpt.translate(FRIDAY)
    print(f"bundled model: {FRIDAY!r} -> {result.text!r} with every step's attention in "
          f"{seconds * 1000:.1f} ms, best of 20 ({len(result.steps)} steps, {when}; goal <= "
          f"10 ms: {_verdict(seconds <= 0.010)}); first call {first:.2f} s (trace/compile)")


if __name__ == "__main__":
    main()
