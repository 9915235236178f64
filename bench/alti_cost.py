"""Cost of ALTI+ (issue 27, item 8: a 30-token sentence on the bundled model in at most 1 s):
OpenedModel.contributions(source, method="alti") against OpenedModel.attention(source), the maps
the pages show, on the same sentence and the same output ids.

    .venv/bin/python bench/alti_cost.py [--models bundled,bundled64,opus] [--repeats 20]

Models and sentences:
- bundled: the bundled dates model (2 + 2 layers, d_model 128, 4 heads), a source of exactly 30
  ids ("on the 5th day of march, 2021, a friday" and " march 5" until 30) and its greedy
  translation;
- bundled64: the same model, a source and target repeated until max_len (64) cuts them;
- opus: opus-mt-en-fr's shapes with random weights (bench/forward_cost.py's; 6 + 6 layers,
  d_model 512, 8 heads), 30 source and 30 target words.

Per model: the first call of each (it traces the compiled pass), then warm medians (and
minima), interleaved so that machine noise hits each alike; ALTI+'s time split into its pass and
its NumPy arithmetic; the ratio alti / maps, and for bundled the goal of 1 s.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parent.parent

from bench.timing import interleaved  # noqa: E402

GOAL_SECONDS = 1.0


def thirty_id_source(ckpt) -> str:
    """A dates sentence of exactly 30 source ids (the start and end ids included)."""
    text = "on the 5th day of march, 2021, a friday"
    while len(ckpt.encode_source(text)) < 30:
        text += " march 5"
    while len(ckpt.encode_source(text)) > 30:
        text = text[:-1]
    if len(ckpt.encode_source(text)) != 30:
        raise SystemExit(f"could not make a 30-id source ({text!r})")
    return text


def model_and_sentence(name: str):
    """(checkpoint, source, output ids) of a model of the docstring's list."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    if name in ("bundled", "bundled64"):
        ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
        if name == "bundled":
            source = thirty_id_source(ckpt)
            return ckpt, source, ckpt.translate(source).token_ids
        source = "Friday, March 5, 2021 " * 10
        return ckpt, source, ckpt.encode_target("2021-03-05 " * 10)
    if name == "opus":
        from bench.value_norm_cost import model_and_sentence as opus_model

        ckpt, _, _ = opus_model("opus")
        source = " ".join(f"w{37 * i + 5}" for i in range(30))
        return ckpt, source, ckpt.encode_target(" ".join(f"w{53 * i + 7}" for i in range(30)))
    raise SystemExit(f"unknown model {name!r}: bundled, bundled64 or opus")


def bench(name: str, repeats: int) -> dict:
    from transformer.inference.maps import attention_maps

    ckpt, source, ids = model_and_sentence(name)
    source_ids = ckpt.encode_source(source)
    cases = {
        "maps": lambda: ckpt.attention(source, output_ids=ids),
        "alti": lambda: ckpt.contributions(source, method="alti", output_ids=ids),
        "alti's pass": lambda: attention_maps(ckpt, [source_ids], [ids], values=True,
                                              hidden_states=True),
    }
    first, median, least = interleaved(cases, repeats)
    c = ckpt.config
    print(f"{name}: {c.num_encoder_layers} + {c.num_decoder_layers} layers, d_model "
          f"{c.d_model}, {c.num_heads} heads; source {len(source_ids)} ids, output {len(ids)} ids")
    for case in cases:
        print(f"  {case:<12} {median[case] * 1000:8.2f} ms (median of {repeats}; least "
              f"{least[case] * 1000:.2f} ms; first call {first[case] * 1000:.0f} ms)")
    arithmetic = median["alti"] - median["alti's pass"]
    ratio = median["alti"] / median["maps"]
    print(f"  alti's NumPy arithmetic {arithmetic * 1000:.2f} ms; alti / maps {ratio:.2f}")
    if name == "bundled":
        verdict = "met" if median["alti"] <= GOAL_SECONDS else "NOT met"
        print(f"  goal: ALTI+ of a 30-id sentence <= {GOAL_SECONDS:.0f} s: "
              f"{median['alti']:.3f} s warm, {first['alti']:.3f} s first call: {verdict}")
    return {"median": median["alti"], "ratio": ratio}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="bundled,bundled64,opus")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    results = {name: bench(name, args.repeats) for name in args.models.split(",")}
    print("alti: " + ", ".join(f"{name} {r['median'] * 1000:.1f} ms ({r['ratio']:.2f}x maps)"
                               for name, r in results.items()))


if __name__ == "__main__":
    main()
