"""What the load limits let a file cost in time (issue 25, item 2): models of narrow width and as
many layers as the limits accept, and beyond, from a checkpoint's data to a first translation
and its maps, each in a fresh process.

    .venv/bin/python bench/open_budget.py [--layers 6,8,12] [--width 8]

For each layer count L it builds an L + L post-LN model of width --width (1 head, random
weights of scale 0.1, the bundled model's tokenizers) and times, in one fresh process: opening
it (OpenedModel.open: the size and bound checks, the build, the probe), the first translation
without maps (translate_plain: the decode loop that keeps none, traced and compiled on first
use), the first translation with every step's attention (translate: the other decode loop) and
the first maps of it (attention(output_ids=...): the pages' pass). Width barely matters: what
grows is the trace and compile of each function, per layer. Layer counts past
limits.MAX_TOTAL_LAYERS are opened without the check (check_size is the refusal being
measured against) to show what the limit avoids. Reports seconds per phase and per layer.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
SENTENCE = "friday, march 5, 2021"


def child(layers: int, width: int) -> dict:
    import numpy as np

    from transformer import DEFAULT_CHECKPOINT, load_checkpoint
    from transformer.checkpoint import format as checkpoint_format
    from transformer.checkpoint.format import CheckpointData
    from transformer.core import limits
    from transformer.inference.session import OpenedModel
    from transformer.model.config import TransformerConfig
    from transformer.model.weights import weight_shapes

    base = load_checkpoint(DEFAULT_CHECKPOINT)
    c = TransformerConfig(src_vocab_size=base.config.src_vocab_size,
                          tgt_vocab_size=base.config.tgt_vocab_size, d_model=width, num_heads=1,
                          dff=width, num_encoder_layers=layers, num_decoder_layers=layers,
                          max_len=64)
    rng = np.random.default_rng(0)
    weights = {name: (0.1 * rng.standard_normal(shape)).astype(np.float32)
               for name, shape in weight_shapes(c).items()}
    within = 2 * layers <= limits.MAX_TOTAL_LAYERS
    if not within:  # measure what the limit refuses: skip only the refusal
        checkpoint_format.check_size = lambda config, weights: None
    data = CheckpointData(c, weights, base.source_tokenizer, base.target_tokenizer, {})
    times = {}
    started = time.perf_counter()
    ckpt = OpenedModel.open(data)
    times["open"] = time.perf_counter() - started
    started = time.perf_counter()
    ckpt.translate_plain(SENTENCE)
    times["first plain translation"] = time.perf_counter() - started
    started = time.perf_counter()
    result = ckpt.translate(SENTENCE)
    times["first translation with attention"] = time.perf_counter() - started
    started = time.perf_counter()
    ckpt.attention(SENTENCE, output_ids=result.token_ids)
    times["first maps"] = time.perf_counter() - started
    return {"layers": layers, "width": width, "within_limits": within, "seconds": times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="6,8,12", help="per stack, comma-separated")
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.layers), args.width)))
        return
    print(f"{'layers':>8} {'limits':>8} {'open':>6} {'plain':>6} {'attend':>7} {'maps':>6} "
          f"{'first page':>11} {'per layer':>10}")
    for layers in (int(n) for n in args.layers.split(",")):
        out = subprocess.run([sys.executable, __file__, "--child", "--layers", str(layers),
                              "--width", str(args.width)], capture_output=True, text=True,
                             cwd=ROOT, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        s = row["seconds"]
        page = s["open"] + s["first translation with attention"] + s["first maps"]
        print(f"{layers:>4}+{layers:<3} {'within' if row['within_limits'] else 'beyond':>8} "
              f"{s['open']:6.1f} {s['first plain translation']:6.1f} "
              f"{s['first translation with attention']:7.1f} {s['first maps']:6.1f} "
              f"{page:11.1f} {page / (2 * layers):10.2f}")


if __name__ == "__main__":
    main()
