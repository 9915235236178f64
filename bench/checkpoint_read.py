"""read_checkpoint on a real-sized model: version 1 (weights.npz, deflated) against version 2
(weights.safetensors, stored), time and memory.

    .venv/bin/python bench/checkpoint_read.py [--layers 6] [--d-model 512] [--vocab 59514]
                                              [--runs 3]

The model is the shape of an opus-mt model (6 + 6 layers, d_model 512, dff 2048, 8 heads, one
shared vocabulary of 59,514 words, tied output: ~75M weights, ~300 MB of float32) with random
weights and a word-level tokenizer; nothing is trained or built (the checkpoint is written from
CheckpointData). Each version is written once, then read in a fresh child process: the child
imports everything first, then reads the file --runs times. Reported per version: the file's size,
the best and median read_checkpoint time, and the growth of the child's peak RSS during the first
read (VmHWM reset through /proc/self/clear_refs before it, minus VmRSS then), against W, the
bytes of float32 weights.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, re, sys, time, pathlib
from transformer.checkpoint.format import read_checkpoint

def status(name):
    text = pathlib.Path("/proc/self/status").read_text()
    return int(re.search(name + r":\s+(\d+)", text).group(1)) * 1024

path, runs = %(path)r, %(runs)d
pathlib.Path("/proc/self/clear_refs").write_text("5")  # peak RSS := RSS now
before = status("VmRSS")
times = []
for run in range(runs):
    started = time.perf_counter()
    data = read_checkpoint(path)
    times.append(time.perf_counter() - started)
    if run == 0:
        grew = status("VmHWM") - before
        weights = sum(w.nbytes for w in data.weights.values())
    del data
print(json.dumps({"times": times, "grew": grew, "weights": weights}))
"""


def make_data(layers: int, d_model: int, vocab: int):
    import numpy as np

    from transformer.checkpoint.format import CheckpointData
    from transformer.model.config import TransformerConfig
    from transformer.model.weights import weight_shapes
    from transformer.tokenizers.word import WordTokenizer

    words = ["", "[UNK]", "[start]", "[end]"] + [f"w{i}" for i in range(4, vocab)]
    tokenizer = WordTokenizer(words, start_token="[start]", end_token="[end]")
    config = TransformerConfig(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, num_heads=8,
        dff=4 * d_model, num_encoder_layers=layers, num_decoder_layers=layers, max_len=512,
        pad_id=0, start_id=2, end_id=3, share_embeddings=True, tie_output=True)
    rng = np.random.default_rng(0)
    weights = {name: rng.standard_normal(shape, np.float32) * np.float32(0.02)
               for name, shape in weight_shapes(config).items()}
    return CheckpointData(config, weights, tokenizer, tokenizer, {"name": "bench"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=59_514)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from transformer.checkpoint.format import write_checkpoint

    data = make_data(args.layers, args.d_model, args.vocab)
    weight_bytes = sum(w.nbytes for w in data.weights.values())
    print(f"model: {args.layers} + {args.layers} layers, d_model {args.d_model}, vocabulary "
          f"{args.vocab:,} (shared, tied): {weight_bytes // 4:,} weights, "
          f"W = {weight_bytes / 2**20:.1f} MB", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        paths = {}
        for version in (1, 2):
            started = time.perf_counter()
            paths[version] = write_checkpoint(Path(folder) / f"v{version}.ckpt", data, version)
            print(f"wrote version {version} in {time.perf_counter() - started:.1f} s: "
                  f"{paths[version].stat().st_size / 2**20:.1f} MB", flush=True)
        del data
        for version, path in paths.items():
            out = subprocess.run(
                [sys.executable, "-c", CHILD % dict(root=str(ROOT), path=str(path),
                                                    runs=args.runs)],
                capture_output=True, text=True, check=True)
            measured = json.loads(out.stdout.strip().splitlines()[-1])
            times = sorted(measured["times"])
            results[version] = dict(
                file_mb=round(path.stat().st_size / 2**20, 1),
                best_s=round(times[0], 3), median_s=round(times[len(times) // 2], 3),
                peak_growth_mb=round(measured["grew"] / 2**20, 1),
                peak_growth_over_w=round(measured["grew"] / weight_bytes, 2))
            print(f"version {version}: {json.dumps(results[version])}", flush=True)
    print(f"version 2 reads {results[1]['best_s'] / results[2]['best_s']:.1f}x faster than "
          f"version 1 (best of {args.runs}); its first read grew the peak RSS by "
          f"{results[2]['peak_growth_mb']} MB (W = {weight_bytes / 2**20:.1f} MB), version 1's "
          f"by {results[1]['peak_growth_mb']} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
