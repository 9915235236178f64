"""Greedy decoding with and without the KV cache, in one run.

    .venv/bin/python bench/decode.py

A paper-base model with random weights (6 + 6 layers, d_model 512, 8 heads, dff 2048, vocabulary
8000), a 32-token source, 64 generated tokens with stop_at_end=False. Prints tokens per second for
each path, their ratio (goal: cached >= 5x naive) and the per-step time at steps 8 and 64 (goal:
flat for the cached path). Then the time to decode one sentence of the bundled model with all its
attention captured.
"""

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from transformer import (DEFAULT_CHECKPOINT, Transformer, TransformerConfig,  # noqa: E402
                         greedy_decode, load_checkpoint)

SOURCE_LEN, NEW_TOKENS, REPEATS = 32, 64, 3


def timed_decode(model, source_ids, use_cache):
    """(total seconds, per-step seconds) of one decode."""
    stamps = [time.perf_counter()]
    greedy_decode(model, source_ids, max_len=NEW_TOKENS, use_cache=use_cache, stop_at_end=False,
                  on_step=lambda t: stamps.append(time.perf_counter()))
    return stamps[-1] - stamps[0], np.diff(stamps)


def main():
    config = TransformerConfig(src_vocab_size=8000, tgt_vocab_size=8000, max_len=128)
    model = Transformer(config).build_weights()
    source_ids = np.random.default_rng(0).integers(3, 8000, SOURCE_LEN)
    results = {}
    for use_cache in (True, False):
        timed_decode(model, source_ids, use_cache)  # trace and warm up
        runs = [timed_decode(model, source_ids, use_cache) for _ in range(REPEATS)]
        total = float(np.median([r[0] for r in runs]))
        steps = np.median(np.stack([r[1] for r in runs]), axis=0)
        results[use_cache] = (total, steps)
    print(f"paper-base model, random weights; source {SOURCE_LEN} tokens, {NEW_TOKENS} generated "
          f"(median of {REPEATS})")
    for use_cache, name in ((True, "cached"), (False, "naive ")):
        total, steps = results[use_cache]
        print(f"{name}: {NEW_TOKENS / total:7.1f} tokens/s   step 8: {steps[7] * 1000:7.1f} ms   "
              f"step 64: {steps[63] * 1000:7.1f} ms   (64/8: {steps[63] / steps[7]:.2f})")
    print(f"speed-up of the cache at {NEW_TOKENS} tokens: {results[False][0] / results[True][0]:.1f}x "
          "(goal >= 5x)")

    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    sentence = "Friday, March 5, 2021"
    ckpt.translate(sentence)  # warm up
    start = time.perf_counter()
    result = ckpt.translate(sentence)
    print(f"bundled model: {sentence!r} -> {result.text!r} with every step's attention in "
          f"{(time.perf_counter() - start) * 1000:.0f} ms ({len(result.steps)} steps)")


if __name__ == "__main__":
    main()
