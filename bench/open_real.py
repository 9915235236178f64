"""Opening a real-sized Marian model (opus-mt-en-fr's shapes) from its Hugging Face files: ours
against transformers on the same files, in one run.

    .venv/bin/python bench/open_real.py [--profile]

Builds with transformers (random weights, seed 0) the folder an opus-mt download holds: 6 + 6
layers, d_model 512, 8 heads, ffn 2048, vocabulary 59,514, 512 positions, swish; config.json,
model.safetensors, generation_config.json, source.spm / target.spm (small SentencePiece models
trained here with tests/fixtures/make_marian_fixture.py's helpers), a 59,514-entry vocab.json.
Each side then runs in a fresh process: files to the first translation of 21 tokens (import,
load, first translation; ours: load_checkpoint(folder), the Hugging Face files as they are;
theirs:
from_pretrained + MarianTokenizer + greedy generate with min = max = 21 new tokens); the warm
translation and the maps of one sentence with a typed target (ckpt.attention(source, target)
against a forward pass with output_attentions=True, eager attention), medians of 5; and the
growth of the RSS high-water mark (VmHWM) during the load against model.safetensors' size; and
the export to our one-file checkpoint (`python -m transformer.convert marian --out`).
Goals: files to first translation <= 1.2x transformers'; maps <= 2x their forward; warm
translation <= theirs; load's peak memory <= 1.5x the weights; the export <= 5 s.
--profile: cProfile of our load + first translation, the top 25 by cumulative time.
Skips (exit 0) where torch or transformers is not installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from bench.timing import CHILD_PRELUDE  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
SOURCE = "the old man walks slowly to the station with my friend"
TARGET = "le vieil homme marche lentement vers la gare avec mon ami"
NEW_TOKENS, REPEATS, VOCAB = 21, 5, 59_514
PAD = VOCAB - 1

COMMON = CHILD_PRELUDE  # shared by both sides' scripts: timers, RSS, median, the result

OURS = COMMON + r"""
import subprocess
t = now(); from transformer import load_checkpoint; r["import"] = now() - t
r["rss_import"] = rss()
def export():
    t = now()
    subprocess.run([sys.executable, "-m", "transformer.convert", "marian", "--model-dir",
                    %(folder)r, "--out", %(ckpt)r], check=True, capture_output=True, cwd=%(root)r)
    r["export"] = now() - t
    r["export_rss"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
def load():
    t = now()
    try:
        ckpt = load_checkpoint(%(folder)r)  # the folder as it is: no conversion
        r["load"] = now() - t
        return ckpt
    except Exception as err:
        r["direct"] = f"refused: {type(err).__name__}: {str(err)[:70]}"
    export()
    r["convert"] = r["export"]
    t = now(); ckpt = load_checkpoint(%(ckpt)r); r["load"] = now() - t
    return ckpt
def first():
    global ckpt
    ckpt = load()
    r["rss_load"] = rss()
    t = now()
    out = ckpt.translate(%(source)r, max_len=%(new)d, stop_at_end=False)
    r["first"], r["tokens"], r["rss_first"] = now() - t, len(out.token_ids), rss()
if %(profile)r:
    import cProfile, pstats
    profile = cProfile.Profile(); profile.runcall(first)
    pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
else:
    first()
r["warm"] = median(lambda: ckpt.translate(%(source)r, max_len=%(new)d, stop_at_end=False))
r["maps_first"] = timed(lambda: ckpt.attention(%(source)r, %(target)r))
r["maps"] = median(lambda: ckpt.attention(%(source)r, %(target)r))
if "export" not in r:
    export()  # the export, timed on its own (the first translation needed none)
print("RESULT " + json.dumps(r))
"""

THEIRS = COMMON + r"""
t = now(); import torch; from transformers import MarianMTModel, MarianTokenizer
r["import"] = now() - t
r["rss_import"] = rss()
torch.set_grad_enabled(False)
t = now()
model = MarianMTModel.from_pretrained(%(folder)r).eval()
tok = MarianTokenizer.from_pretrained(%(folder)r)
r["load"] = now() - t
r["rss_load"] = rss()
def translate():
    ids = tok(%(source)r, return_tensors="pt")["input_ids"]
    out = model.generate(ids, max_new_tokens=%(new)d, min_new_tokens=%(new)d, num_beams=1,
                         do_sample=False)
    tok.decode(out[0], skip_special_tokens=True)
    return out.shape[1] - 1  # the start id is not an output
t = now(); r["tokens"] = translate(); r["first"], r["rss_first"] = now() - t, rss()
r["warm"] = median(translate)
model.set_attn_implementation("eager")  # sdpa returns no attention weights
def maps():
    src = tok(%(source)r)["input_ids"]
    labels = tok(text_target=%(target)r)["input_ids"]
    out = model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([[%(pad)d] + labels[:-1]]),
                output_attentions=True)
    [a.numpy() for a in out.encoder_attentions + out.decoder_attentions + out.cross_attentions]
r["maps_first"] = timed(maps)
r["maps"] = median(maps)
print("RESULT " + json.dumps(r))
"""


def build_folder(folder: Path, end_bias: float = 0.0) -> None:
    """A Hugging Face opus-mt-en-fr-shaped folder with random weights and real tokenizer files.
    end_bias: added to </s>'s final_logits_bias, so that a random model's translations end
    (at 5-6, after some 20-60 tokens) as a trained model's do."""
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer

    from testkit.fixtures import fixture_module

    fixture = fixture_module("make_marian_fixture")
    PAIRS, build_vocab, train_spm = fixture.PAIRS, fixture.build_vocab, fixture.train_spm

    rng = random.Random(0)
    english = " ".join(s for s, _ in PAIRS).split()
    french = " ".join(t for _, t in PAIRS).split()

    def text(words):  # sentences of 4-14 words, some with a number or a capital
        lines = []
        for _ in range(3000):
            line = [rng.choice(words) for _ in range(rng.randint(4, 14))]
            if rng.random() < 0.3:
                line.insert(rng.randrange(len(line)), str(rng.randint(1, 2100)))
            lines.append(" ".join(line).capitalize() + rng.choice([".", "?", "!", ""]))
        return lines

    source_spm = train_spm(text(english), 1000, "nmt_nfkc")
    target_spm = train_spm(text(french), 1000, "nmt_nfkc")
    vocab = build_vocab(source_spm, target_spm)
    del vocab["<pad>"]
    for i in range(len(vocab), PAD):
        vocab[f"▁w{i}"] = i
    vocab["<pad>"] = PAD
    assert len(vocab) == VOCAB
    folder.mkdir(parents=True)
    (folder / "source.spm").write_bytes(source_spm)
    (folder / "target.spm").write_bytes(target_spm)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text('{"source_lang": "en", "target_lang": "fr"}')
    config = MarianConfig(
        vocab_size=VOCAB, decoder_vocab_size=VOCAB, d_model=512, encoder_layers=6,
        decoder_layers=6, encoder_attention_heads=8, decoder_attention_heads=8,
        encoder_ffn_dim=2048, decoder_ffn_dim=2048, max_position_embeddings=512,
        activation_function="swish", scale_embedding=True, pad_token_id=PAD, eos_token_id=0,
        decoder_start_token_id=PAD, forced_eos_token_id=0, share_encoder_decoder_embeddings=True,
        _name_or_path="random-opus-mt-en-fr")
    torch.manual_seed(0)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias[0, 0] += end_bias  # </s> is id 0
    model.generation_config = GenerationConfig(
        bad_words_ids=[[PAD]], decoder_start_token_id=PAD, eos_token_id=0, forced_eos_token_id=0,
        max_length=512, num_beams=4, pad_token_id=PAD)
    model.save_pretrained(folder)  # safetensors (transformers 5 writes nothing else)
    MarianTokenizer.from_pretrained(folder)  # the folder loads as a real one does


def run(script: str, **values) -> dict:
    code = script % {"repeats": REPEATS, "root": str(ROOT), "source": SOURCE,
                     "target": TARGET, "new": NEW_TOKENS, "pad": PAD, "profile": False, **values}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"a measuring process failed:\n{done.stderr[-3000:]}")
    if values.get("profile"):
        print(done.stderr[done.stderr.find("   Ordered by"):], end="")
    return json.loads(next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))[7:])


def goal(value: float, limit: float, unit: str = "x") -> str:
    return "met" if value <= limit else f"NOT met (by {value - limit:.2f}{unit})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true",
                        help="cProfile our load + first translation (top 25, cumulative)")
    parser.add_argument("--build", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        return build_folder(Path(args.build))
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        return print(f"skipped: {' and '.join(missing)} not installed (needed to build and compare)")
    with tempfile.TemporaryDirectory() as tmp:
        folder, ckpt = Path(tmp) / "opus-mt-en-fr", Path(tmp) / "opus-mt-en-fr.ckpt"
        # Built in its own process: this one stays small (children inherit its RSS mark).
        subprocess.run([sys.executable, __file__, "--build", str(folder)], check=True, cwd=ROOT,
                       env={**os.environ, "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                            "PYTHONWARNINGS": "ignore::UserWarning"})
        weights = (folder / "model.safetensors").stat().st_size
        print(f"load average {os.getloadavg()[0]:.2f}; model.safetensors {weights / 2**20:.0f} MB")
        ours = run(OURS, folder=str(folder), ckpt=str(ckpt), profile=args.profile)
        theirs = run(THEIRS, folder=str(folder))
        ckpt_mb = ckpt.stat().st_size / 2**20 if ckpt.exists() else 0
    sides = {"ours": ours, "theirs": theirs}
    total = {s: d["import"] + d.get("convert", 0) + d["load"] + d["first"] for s, d in sides.items()}
    mem = {s: (d["rss_load"] - d["rss_import"]) / weights for s, d in sides.items()}
    print(f"\nour load_checkpoint(folder): {ours.get('direct', 'opened the folder as it is')}")
    print(f"tokens produced: ours {ours['tokens']}, transformers {theirs['tokens']}; "
          f"checkpoint written {ckpt_mb:.0f} MB\n")
    print(f"{'seconds (each side in a fresh process)':44s} {'ours':>9s} {'transformers':>13s} "
          f"{'ratio':>7s}")
    rows = [("import", "import")] + ([("conversion (the CLI, its own process)", "convert")]
                                     if "convert" in ours else []) + [
            ("load", "load"), (f"first translation ({NEW_TOKENS} tokens)", "first"),
            ("files to first translation", None), ("warm translation (median)", "warm"),
            ("maps with a typed target, first call", "maps_first"),
            ("maps with a typed target (median, warm)", "maps")]
    for label, key in rows:
        a, b = (total["ours"], total["theirs"]) if key is None else (ours.get(key, 0.0),
                                                                     theirs.get(key, 0.0))
        print(f"{label:44s} {a:9.3f} {b:13.3f} {a / b if b else float('nan'):7.2f}")
    for label, key in (("RSS high-water after import (MB)", "rss_import"),
                       ("RSS high-water after load (MB)", "rss_load"),
                       ("RSS high-water after first translation (MB)", "rss_first")):
        print(f"{label:44s} {ours[key] / 2**20:9.0f} {theirs[key] / 2**20:13.0f}")
    print(f"{'load: high-water growth / weights on disk':44s} {mem['ours']:9.2f} "
          f"{mem['theirs']:13.2f}")
    print(f"{'the export: converter process high-water (MB)':44s} {ours['export_rss'] / 2**20:9.0f}")
    print("\ngoals:")
    for what, value, limit in (
            ("files to first translation <= 1.2x transformers'", total["ours"] / total["theirs"], 1.2),
            ("maps with a typed target <= 2x transformers' forward", ours["maps"] / theirs["maps"], 2),
            ("warm translation <= transformers'", ours["warm"] / theirs["warm"], 1),
            ("peak memory on load <= 1.5x the weights", mem["ours"], 1.5)):
        print(f"  {what}: {value:.2f}x -> {goal(value, limit)}")
    print(f"  the export (python -m transformer.convert marian --out) <= 5 s: "
          f"{ours['export']:.1f} s -> {goal(ours['export'], 5, ' s')}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
