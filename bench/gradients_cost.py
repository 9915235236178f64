"""Gradient attributions' cost: integrated gradients (--steps, batched) against one saliency
pass, in one run (issue 27's goal: 32 steps at most 4x saliency).

    .venv/bin/python bench/gradients_cost.py [--steps 32] [--repeats 20]

Both on the bundled model, the sentence's own translation attributed. First one output token:
its one gradient row (saliency) against its steps and the two ends (alpha 1 and 0) in one
batched pass (gradient_attributions' by-token batching, _log_probs_and_grads). Then every
output token, as the Contributions and Decoding pages ask (OpenedModel.contributions with method
"saliency" and "integrated_gradients": the by-point batching, one forward per point and its
backward vectorized over the output tokens); on 2 CPU cores the compute of a pass is about
linear in its points, so this ratio is near their count. Each pair is timed interleaved
(bench.timing.interleaved: machine noise hits both alike) after an untimed call; medians.
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
from bench.timing import interleaved  # noqa: E402

SOURCE = "Friday, the twenty-first of March, two thousand and twenty-one"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint
    from transformer.inference.gradients import _embedded, _log_probs_and_grads

    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    ids = ckpt.translate(SOURCE).token_ids
    source_ids = ckpt.encode_source(SOURCE)
    target_ids = [ckpt.config.start_id] + ids[:-1]
    e_src = _embedded(ckpt.model, source_ids, "source")
    e_tgt = _embedded(ckpt.model, target_ids, "target")
    t = len(ids) // 2

    def rows(count):  # output token t's rows, batched (the decoder cut after step t)
        return _log_probs_and_grads(ckpt.model, source_ids, target_ids, ids, [t] * count,
                                    np.repeat(e_src[None], count, 0),
                                    np.repeat(e_tgt[None], count, 0))

    _, one, _ = interleaved({"saliency": lambda: rows(1),
                             "integrated": lambda: rows(args.steps + 2)}, args.repeats)
    print(f"bundled model, {len(source_ids)} source pieces, {len(ids)} output tokens; output "
          f"token {t}: its gradient {one['saliency'] * 1000:.1f} ms, its {args.steps} steps + "
          f"the two ends batched {one['integrated'] * 1000:.1f} ms: ratio "
          f"{one['integrated'] / one['saliency']:.2f}x (goal <= 4x)")
    _, every, _ = interleaved({
        "saliency": lambda: ckpt.contributions(SOURCE, method="saliency", output_ids=ids),
        "integrated": lambda: ckpt.contributions(SOURCE, method="integrated_gradients",
                                                 steps=args.steps, output_ids=ids)},
        max(3, args.repeats // 4))
    print(f"every output token: saliency {every['saliency'] * 1000:.0f} ms, integrated "
          f"gradients ({args.steps} steps) {every['integrated'] * 1000:.0f} ms: ratio "
          f"{every['integrated'] / every['saliency']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
