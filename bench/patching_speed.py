"""Activation patching's cost (issue 41, item 9), ratios in one run.

    .venv/bin/python bench/patching_speed.py [--folder /work/models/opus-mt-en-de] [--repeats 10]

1. The bundled model, a clean/corrupted pair of 30 source ids each (one word changed) and a typed
   target of 30 ids, scored at its last step: every encoder and decoder layer-position site
   (OpenedModel.patch with sites encoder_layers + decoder_layers: (2 + 1) x 30 + (2 + 1) x 30 =
   180 sites) against one teacher-forced forward pass of the clean pair (the pages' compiled
   pass, transformer.inference.forward), interleaved (bench.timing.interleaved) after an
   untimed call; medians. Goal: patching at most 5x one forward pass per 100 sites, i.e.
   patch seconds / (forward seconds x sites / 100) <= 5.
2. An opus-mt-shaped model (--folder: a real-size Hugging Face Marian folder with random
   weights; bench/real_models.py builds /work/models/opus-mt-en-de), a pair of sentences of as
   many ids, scored at the step the corruption changes first: every head site (6 layers x 8
   heads x 3 kinds = 144) in seconds, the first call (its trace included) and the median of
   --repeats warm ones. Goal: within 10 s. Skipped, with the reason, where the folder is
   missing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
from bench.timing import interleaved, seconds  # noqa: E402

WORDS = ("on the fifth of march in the year two thousand and twenty one we met at the old "
         "station near the river").split()
TARGET = "2021-03-05 2021-03-05 2021-03-05"
HEAD_SITES = ("encoder_heads", "decoder_heads", "cross_heads")
PAIR = ("the old man walks slowly to the station with his friend",
        "the old man walks slowly to the station with his brother")


def fitted(ckpt, ids: int) -> str:
    """WORDS cut to the longest start whose source has at most `ids` ids."""
    words = []
    for word in WORDS:
        if len(ckpt.encode_source(" ".join(words + [word]))) > ids:
            break
        words.append(word)
    return " ".join(words)


def bundled_sites(repeats: int) -> dict:
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint
    from transformer.inference.forward import forward

    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    clean = fitted(ckpt, 30)
    corrupted = clean.replace("fifth", "sixth")
    n = len(ckpt.encode_source(clean))
    assert n == len(ckpt.encode_source(corrupted)), "the pair must have as many ids"
    out = ckpt.encode_target(TARGET)[:30]
    target_ids = [ckpt.config.start_id] + out[:-1]
    step = len(out) - 1
    src = np.array([ckpt.encode_source(clean)], np.int32)
    tgt, scored = np.array([target_ids], np.int32), np.array([out], np.int32)
    sites = ("encoder_layers", "decoder_layers")
    count = ((ckpt.config.num_encoder_layers + 1) * n
             + (ckpt.config.num_decoder_layers + 1) * (step + 1))
    first, median, _ = interleaved({
        "forward": lambda: forward(ckpt.model, src, tgt, scored),
        "patch": lambda: ckpt.patch(clean, corrupted, output_ids=out, step=step, sites=sites),
    }, repeats)
    ratio = median["patch"] / (median["forward"] * count / 100)
    print(f"bundled model, {n} source ids x {len(out)} output ids, step {step}: {count} layer-"
          f"position sites in {median['patch'] * 1e3:.1f} ms (first call {first['patch']:.2f} s);"
          f" one forward pass {median['forward'] * 1e3:.2f} ms")
    print(f"  per 100 sites: {ratio:.2f}x one forward pass (goal <= 5: "
          f"{'met' if ratio <= 5 else 'NOT met'})")
    return {"sites": count, "patch_s": median["patch"], "forward_s": median["forward"],
            "ratio_per_100": ratio}


def head_sites(folder: Path, repeats: int) -> dict | None:
    if not (folder / "config.json").exists():
        print(f"{folder}: no model folder here (bench/real_models.py --models opus-mt-en-de "
              "builds one); skipped")
        return None
    from transformer import load_checkpoint

    t = time.perf_counter()
    ckpt = load_checkpoint(folder)
    print(f"{folder.name}: opened in {time.perf_counter() - t:.1f} s "
          f"({ckpt.config.num_encoder_layers}+{ckpt.config.num_decoder_layers} layers, "
          f"{ckpt.config.num_heads} heads, d_model {ckpt.config.d_model})")
    clean, corrupted = PAIR
    lengths = len(ckpt.encode_source(clean)), len(ckpt.encode_source(corrupted))
    assert lengths[0] == lengths[1], f"the pair must have as many ids: {lengths}"
    out = ckpt.translate_plain(clean).token_ids[:30]
    first = seconds(lambda: ckpt.patch(clean, corrupted, output_ids=out, sites=HEAD_SITES))
    warm = statistics.median(
        seconds(lambda: ckpt.patch(clean, corrupted, output_ids=out, sites=HEAD_SITES))
        for _ in range(repeats))
    got = ckpt.patch(clean, corrupted, output_ids=out, sites=HEAD_SITES)
    count = sum(got[kind].size for kind in HEAD_SITES)
    print(f"  {count} head sites, {lengths[0]} source ids, step {got['step']}: first call "
          f"{first:.2f} s, warm {warm:.2f} s (goal <= 10 s: {'met' if first <= 10 else 'NOT met'})")
    return {"sites": count, "first_s": first, "warm_s": warm}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=Path("/work/models/opus-mt-en-de"))
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(f"load average {open('/proc/loadavg').read().split()[:3]}")
    bundled_sites(args.repeats)
    head_sites(args.folder, max(1, args.repeats // 3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
