"""Cost of returning every attention map: plain forward pass vs return_attention=True.

    .venv/bin/python bench/forward.py [--small]

Prints both median times and their ratio, measured in the same run (goal: ratio <= 1.30).
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from transformer import Transformer, TransformerConfig  # noqa: E402  (before TensorFlow)

# isort: split
import tensorflow as tf  # noqa: E402


def median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true", help="a 2 + 2 layer d_model 128 model")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    if args.small:
        config = TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, d_model=128,
                                   num_heads=4, dff=512, num_encoder_layers=2,
                                   num_decoder_layers=2, max_len=256)
    else:  # the paper's base model
        config = TransformerConfig()
    model = Transformer(config).build_weights()
    rng = np.random.default_rng(0)
    src = tf.constant(rng.integers(3, config.src_vocab_size, (args.batch, args.length)), tf.int32)
    tgt = tf.constant(rng.integers(3, config.tgt_vocab_size, (args.batch, args.length)), tf.int32)

    plain = tf.function(lambda s, t: model((s, t)))
    with_attention = tf.function(lambda s, t: model((s, t), return_attention=True))
    for fn in (plain, with_attention):  # trace and warm up
        fn(src, tgt)
        fn(src, tgt)

    def run_plain():
        plain(src, tgt).numpy()

    def run_attention():
        out = with_attention(src, tgt)
        for key in ("logits", "encoder_attention", "decoder_attention", "cross_attention"):
            out[key].numpy()

    # Interleave the two so machine noise hits both alike.
    plain_times, attention_times = [], []
    for _ in range(args.repeats):
        plain_times.append(median_seconds(run_plain, 1))
        attention_times.append(median_seconds(run_attention, 1))
    t_plain, t_attention = float(np.median(plain_times)), float(np.median(attention_times))
    print(f"model: {config.num_encoder_layers}+{config.num_decoder_layers} layers, d_model "
          f"{config.d_model}, {config.num_heads} heads; batch {args.batch}, length {args.length}")
    print(f"plain forward pass          {t_plain * 1000:8.1f} ms (median of {args.repeats})")
    print(f"with every attention map    {t_attention * 1000:8.1f} ms")
    print(f"ratio                       {t_attention / t_plain:8.3f}  (goal <= 1.30)")


if __name__ == "__main__":
    main()
