"""Cost of the value-weighted maps (issue 27, item 8): OpenedModel.contributions(source, target,
method="value_norm") against OpenedModel.attention(source, target), the maps the pages show.

    .venv/bin/python bench/value_norm_cost.py [--models bundled,bundled64,tiny512] [--repeats 40]
                                         [--details]

Models and sentences, each with a typed target (teacher forcing: no decoding in either):
- bundled: the bundled dates model (2 + 2 layers, d_model 128, 4 heads), "Friday, March 5, 2021"
  and "2021-03-05";
- bundled64: the same model, source and target repeated until its max_len (64) cuts them;
- tiny512: testkit.tiny's untrained model (1 + 1 layers, d_model 16, 2 heads) reading 512
  positions, as bench/long_pages.py builds it: a long source and a 400-token target;
- opus (not in the default list): opus-mt-en-fr's shapes with random weights and a word
  tokenizer (bench/forward_cost.py's, 6 + 6 layers, d_model 512, 8 heads), 13 and 15 words.

Per model: the first call of each (traces), then warm, interleaved so that machine noise hits
each alike, medians (and minima): the maps and the value-weighted maps (one compiled pass that
hands out V besides the maps, then NumPy), and with --details the maps with Q, K, V and the
scores (what a page holding those pays for value_norm_maps alone); the ratio value_norm / maps
against the goal of 1.5.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parent.parent

from bench.timing import interleaved  # noqa: E402

SOURCE, TARGET = "Friday, March 5, 2021", "2021-03-05"
GOAL = 1.5


def model_and_sentence(name: str):
    """(checkpoint, source, target) of a model of the docstring's list."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    if name == "bundled":
        return load_checkpoint(DEFAULT_CHECKPOINT), SOURCE, TARGET
    if name == "bundled64":
        return load_checkpoint(DEFAULT_CHECKPOINT), (SOURCE + " ") * 40, (TARGET + " ") * 40
    if name == "tiny512":
        from testkit.tiny import tiny_checkpoint_bytes

        ckpt = load_checkpoint(tiny_checkpoint_bytes("tiny512", max_len=512))
        target = TARGET + " "
        while len(ckpt.encode_target(target)) - 1 < 400:
            target += TARGET + " "
        return ckpt, (SOURCE.lower() + " ") * 40, target
    if name == "opus":
        from bench.forward_cost import OPUS_VOCAB, opus_config
        from transformer import Transformer
        from transformer.inference.session import OpenedModel
        from transformer.tokenizers.word import WordTokenizer

        config = opus_config()
        words = ["", "[UNK]", "[end]"] + [f"w{i}" for i in range(OPUS_VOCAB - 3)]
        tokenizer = WordTokenizer(words, end_token="[end]", standardize=None)
        ckpt = OpenedModel(config, Transformer(config).build_weights(), tokenizer, tokenizer)
        return (ckpt, " ".join(f"w{37 * i + 5}" for i in range(13)),
                " ".join(f"w{53 * i + 7}" for i in range(15)))
    raise SystemExit(f"unknown model {name!r}: bundled, bundled64, tiny512 or opus")


def bench(name: str, repeats: int, details: bool) -> float:
    ckpt, source, target = model_and_sentence(name)
    cases = {
        "maps": lambda: ckpt.attention(source, target),
        "value_norm": lambda: ckpt.contributions(source, target, method="value_norm"),
    }
    if details:
        cases["maps, details"] = lambda: ckpt.attention(source, target, details=True)
    first, median, least = interleaved(cases, repeats)
    c = ckpt.config
    n, t = len(ckpt.encode_source(source)), len(ckpt.encode_target(target))
    print(f"{name}: {c.num_encoder_layers} + {c.num_decoder_layers} layers, d_model {c.d_model}, "
          f"{c.num_heads} heads; source {n} ids, target {t} ids")
    for case in cases:
        print(f"  {case:<16} {median[case] * 1000:8.2f} ms (median of {repeats}; least "
              f"{least[case] * 1000:.2f} ms; first call {first[case] * 1000:.0f} ms)")
    ratio = median["value_norm"] / median["maps"]
    print(f"  value_norm / maps {ratio:7.2f}  (goal <= {GOAL}; of the least times "
          f"{least['value_norm'] / least['maps']:.2f})")
    return ratio


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="bundled,bundled64,tiny512")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--details", action="store_true",
                        help="also time the maps with details=True")
    args = parser.parse_args()
    ratios = {name: bench(name, args.repeats, args.details) for name in args.models.split(",")}
    print("ratios: " + ", ".join(f"{name} {ratio:.2f}" for name, ratio in ratios.items()))


if __name__ == "__main__":
    main()
