"""generate (transformers' beam search from generation_config.json) against transformers' own
generate on the same files, in one run.

    .venv/bin/python bench/generate.py [--new-tokens 32] [--beams 4] [--repeats 5] [--no-opus]

Two models: the tiny Marian fixture (tests/fixtures/marian) and a random opus-mt-en-fr-shaped
folder (6 + 6 layers, d_model 512, 8 heads, vocabulary 59,514; built with transformers as
bench/open_real.py builds it, in a temporary folder; about a minute). Each model's own
generation_config.json is read (opus-mt's: num_beams 4, pad banned, </s> forced at the limit),
with num_beams set to --beams and max_new_tokens to --new-tokens on both sides (the fixture's
file names no num_beams, and a random model that never ends then decodes a known length).
Ours: marian.FAMILY.convert(folder) + generate (one compiled loop, traced once before timing);
theirs: MarianMTModel.from_pretrained (eager attention) + generate under torch.no_grad, at
torch's default threads and at one thread. Medians of --repeats over three
sentences each, per sentence; the generated ids of both sides must be equal (said if not).
Then the opus-mt-shaped model's default translation (load_checkpoint + OpenedModel.generate with
its own generation_config.json, what the app shows) against what transformers' translation
pipeline gives (--end-bias makes the random model end, as a trained one does).
Skips (exit 0) where torch or transformers is not installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
from bench.timing import median_time  # noqa: E402

SENTENCES = ["the black cat sleeps", "I would like a coffee, please.",
             "the old man walks slowly to the station with my friend"]


def measure(folder: Path, new_tokens: int, repeats: int, beams: int) -> dict:
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    from transformer.importers.hf.marian import FAMILY
    from transformer.inference.search_transformers import generate, generation_settings

    values = json.loads((folder / "generation_config.json").read_text())
    values["max_new_tokens"] = new_tokens
    values["num_beams"] = beams  # the fixture's file names none (greedy); opus-mt's says 4
    started = time.perf_counter()
    ckpt = FAMILY.convert(folder)
    settings = generation_settings(values, ckpt.config)
    opened = time.perf_counter() - started
    model = MarianMTModel.from_pretrained(folder, attn_implementation="eager").eval()
    tokenizer = MarianTokenizer.from_pretrained(folder)
    kwargs = {"num_beams": settings.num_beams, "max_new_tokens": new_tokens}
    started = time.perf_counter()
    generate(ckpt.model, ckpt.encode_source(SENTENCES[0]), settings)  # the one trace
    first = time.perf_counter() - started
    rows = []
    threads = torch.get_num_threads()
    for sentence in SENTENCES:
        source = ckpt.encode_source(sentence)
        ids = tokenizer(sentence, return_tensors="pt").input_ids
        result = generate(ckpt.model, source, settings)
        with torch.no_grad():
            theirs_ids = model.generate(ids, **kwargs)[0, 1:].tolist()
        ours_t = median_time(lambda: generate(ckpt.model, source, settings), repeats)

        def theirs():
            with torch.no_grad():
                model.generate(ids, **kwargs)
        torch.set_num_threads(threads)
        theirs_default = median_time(theirs, repeats)
        torch.set_num_threads(1)
        theirs_one = median_time(theirs, repeats)
        torch.set_num_threads(threads)
        rows.append({"sentence": sentence, "tokens": len(result.token_ids),
                     "equal": result.token_ids == theirs_ids, "ours": ours_t,
                     "theirs": theirs_default, "theirs_1": theirs_one})
    return {"settings": settings.describe(), "open": opened, "first": first, "rows": rows,
            "threads": threads}


def build_opus(folder: Path, end_bias: float = 0.0) -> None:
    spec = importlib.util.spec_from_file_location("open_real", ROOT / "bench" / "open_real.py")
    open_real = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(open_real)
    open_real.build_folder(folder, end_bias=end_bias)


def default_translation(folder: Path) -> list[dict]:
    """The app's default translation against transformers' translation pipeline, on the files
    as they are: ours load_checkpoint(folder) + OpenedModel.generate(sentence) (the model's
    generation_config.json, nothing given); theirs what the pipeline ran (transformers 5 dropped
    it): generate with the model's own generation config, decode(skip_special_tokens=True)
    (tests/fixtures/make_marian_generation.py pipeline_translations). One run each."""
    spec = importlib.util.spec_from_file_location(
        "make_marian_generation", ROOT / "tests" / "fixtures" / "make_marian_generation.py")
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    from transformer import load_checkpoint

    ckpt = load_checkpoint(folder)
    ckpt.generate(SENTENCES[0])  # the one trace
    rows = []
    for sentence in SENTENCES:
        started = time.perf_counter()
        ours = ckpt.generate(sentence)
        ours_t = time.perf_counter() - started
        started = time.perf_counter()
        (theirs,) = recipe.pipeline_translations(folder, [sentence])
        theirs_t = time.perf_counter() - started
        rows.append({"sentence": sentence, "tokens": len(ours.token_ids), "ours": ours_t,
                     "theirs": theirs_t, "ids": ours.token_ids == theirs["ids"],
                     "text": ours.text == theirs["text"]})
    print(f"\ndefault translation (the model's generation_config.json: "
          f"{', '.join(ckpt.generation.describe())}) against the translation pipeline's steps")
    for row in rows:
        print(f"  {row['sentence'][:56]:<56} {row['tokens']:>4} tokens  ours {row['ours']:6.2f}s "
              f"theirs {row['theirs']:6.2f}s  equal ids {row['ids']}, text {row['text']}")
    return rows


def report(name: str, result: dict) -> None:
    print(f"\n{name}: {', '.join(result['settings'])}")
    print(f"  open (FAMILY.convert) {result['open']:.2f} s; first generate (trace) "
          f"{result['first']:.2f} s; torch threads {result['threads']}")
    print(f"  {'sentence':<56} {'tokens':>6} {'ours':>8} {'theirs':>8} {'theirs@1':>9} "
          f"{'ratio':>6} equal")
    for row in result["rows"]:
        best = min(row["theirs"], row["theirs_1"])
        print(f"  {row['sentence'][:56]:<56} {row['tokens']:>6} {row['ours']:>7.3f}s "
              f"{row['theirs']:>7.3f}s {row['theirs_1']:>8.3f}s {row['ours'] / best:>5.2f}x "
              f"{row['equal']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--beams", type=int, default=4, help="num_beams on both sides")
    parser.add_argument("--no-opus", action="store_true", help="the tiny fixture only")
    parser.add_argument("--end-bias", type=float, default=6.0,
                        help="added to </s>'s final_logits_bias of the random opus-mt-shaped "
                             "model, so that its translations end and the default translation "
                             "(max_length 512) is compared whole; 0: no comparison")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("skipped: torch and transformers are not installed")
        return 0
    print("ratio: ours / transformers' faster thread setting; 'equal': the same generated ids")
    report("tiny Marian fixture", measure(ROOT / "tests" / "fixtures" / "marian",
                                          args.new_tokens, args.repeats, args.beams))
    if not args.no_opus:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "opus-mt-en-fr-random"
            started = time.perf_counter()
            build_opus(folder, end_bias=args.end_bias)
            print(f"\n(built the opus-mt-shaped folder in {time.perf_counter() - started:.0f} s)")
            report("random opus-mt-en-fr-shaped model",
                   measure(folder, args.new_tokens, args.repeats, args.beams))
            if args.end_bias:
                default_translation(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
