"""Gradient attributions' cost: integrated gradients (--steps, batched) against one saliency
pass, in one run (issue 27's goal: 32 steps at most 4x saliency).

    .venv/bin/python bench/gradients.py [--steps 32] [--repeats 5]

Both on the bundled model, the sentence's own translation attributed (Checkpoint.contributions
with method "saliency" and "integrated_gradients"), each after one untimed call; medians. Every
output token's (the rows grow with the steps: on 2 CPU cores the compute is about linear in
them), then one output token's: its one gradient row against its steps + 2 rows in one pass.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, str(ROOT))
from bench.timing import median_time  # noqa: E402

SOURCE = "Friday, the twenty-first of March, two thousand and twenty-one"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    ids = ckpt.translate(SOURCE).token_ids
    saliency = median_time(lambda: ckpt.contributions(SOURCE, method="saliency",
                                                      output_ids=ids), args.repeats, warm=True)
    integrated = median_time(lambda: ckpt.contributions(
        SOURCE, method="integrated_gradients", steps=args.steps, output_ids=ids), args.repeats,
        warm=True)
    print(f"bundled model, {len(ckpt.encode_source(SOURCE))} source pieces, {len(ids)} output "
          f"tokens, every output token: saliency {saliency * 1000:.0f} ms, integrated gradients "
          f"({args.steps} steps) {integrated * 1000:.0f} ms: ratio {integrated / saliency:.2f}x")
    # One output token: one gradient row against its steps + 2 rows, batched in one pass.
    from transformer.inference.gradients import _embedded, _log_probs_and_grads

    source_ids = ckpt.encode_source(SOURCE)
    target_ids = [ckpt.config.start_id] + ids[:-1]
    e_src = _embedded(ckpt.model, source_ids, "source")
    e_tgt = _embedded(ckpt.model, target_ids, "target")
    t = len(ids) // 2

    def rows(count):
        return _log_probs_and_grads(ckpt.model, source_ids, target_ids, ids, [t] * count,
                                    np.repeat(e_src[None], count, 0),
                                    np.repeat(e_tgt[None], count, 0))

    one = median_time(lambda: rows(1), args.repeats, warm=True)
    steps = median_time(lambda: rows(args.steps + 2), args.repeats, warm=True)
    print(f"one output token: its gradient {one * 1000:.1f} ms, its {args.steps} steps + the "
          f"two ends batched {steps * 1000:.1f} ms: ratio {steps / one:.2f}x (goal <= 4x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
