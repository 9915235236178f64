"""Cost of returning every attention map: plain forward pass vs return_attention=True.

    .venv/bin/python bench/forward_cost.py [--small]

Prints both median times and their ratio, measured in the same run (goal: ratio <= 1.30).

    .venv/bin/python bench/forward_cost.py --maps [--source-words 13] [--target-words 15] [--details]

The maps of one sentence with a typed target, as the pages ask for them
(OpenedModel.attention(source, target)), on a model of opus-mt-en-fr's shapes with random weights
(6 + 6 layers, d_model 512, 8 heads, ffn 2048, vocabulary 59,514, 512 positions, swish,
[sin | cos] positions, shared and tied embeddings: the config the Marian importer maps it to), and
a word tokenizer of as many words: the first call (the compiled pass's trace), then warm,
interleaved, medians: the compiled pass (transformer.inference.forward), the eager reference
(attention_maps(compiled=False)), and where torch and transformers are installed, their
MarianMTModel forward on the same shapes with output_attentions=True (eager attention). Goal: the
maps within 2x transformers' forward.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
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
    parser.add_argument("--maps", action="store_true",
                        help="the maps of one sentence on an opus-mt-shaped model (see above)")
    parser.add_argument("--source-words", type=int, default=13)
    parser.add_argument("--target-words", type=int, default=15)
    parser.add_argument("--details", action="store_true", help="maps with details=True")
    args = parser.parse_args()
    if args.maps:
        return maps_bench(args)
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


OPUS_VOCAB = 59_514


def opus_config():
    """TransformerConfig of opus-mt-en-fr as transformer.importers.hf.marian.marian_config maps it
    (its pad/start id 0 and end id 2 here: those of the word tokenizer below)."""
    return TransformerConfig(
        src_vocab_size=OPUS_VOCAB, tgt_vocab_size=OPUS_VOCAB, d_model=512, num_heads=8, dff=2048,
        num_encoder_layers=6, num_decoder_layers=6, max_len=512, positional="sinusoidal_concat",
        scale_embeddings=True, share_embeddings=True, tie_output=True, output_bias=True,
        norm_first=False, pad_id=0, start_id=0, end_id=2, activation="swish",
        layer_norm_epsilon=1e-5, mask_padding=True, pad_source_to=0, source_start=False,
        source_end=True)


def torch_forward(n, t):
    """transformers' MarianMTModel (random weights, opus-mt-en-fr's shapes, eager attention):
    a function running its forward pass with output_attentions=True on n source and t decoder
    ids, or None where torch or transformers is not installed."""
    try:
        import torch
        from transformers import MarianConfig, MarianMTModel
    except ImportError:
        return None
    torch.manual_seed(0)
    config = MarianConfig(
        vocab_size=OPUS_VOCAB, d_model=512, encoder_layers=6, decoder_layers=6,
        encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
        decoder_ffn_dim=2048, max_position_embeddings=512, activation_function="swish",
        pad_token_id=OPUS_VOCAB - 1, decoder_start_token_id=OPUS_VOCAB - 1, eos_token_id=0,
        scale_embedding=True, attn_implementation="eager")
    model = MarianMTModel(config).eval()
    source = torch.arange(3, 3 + n)[None]
    target = torch.arange(5, 5 + t)[None]

    def run():
        with torch.no_grad():
            out = model(input_ids=source, decoder_input_ids=target, output_attentions=True)
            return [a.numpy() for a in out.encoder_attentions + out.decoder_attentions +
                    out.cross_attentions], out.logits.numpy()

    # torch's threads: the faster of 1 and 2. On a busy 2-core machine OpenMP's spinning threads
    # made the 2-thread forward 1.0-1.5 s, against 83 ms on one.
    timings = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        run()
        timings[threads] = median_seconds(run, 3)
    threads = min(timings, key=timings.get)
    torch.set_num_threads(threads)
    return run, threads


def maps_bench(args):
    from transformer.inference.maps import attention_maps
    from transformer.inference.session import OpenedModel
    from transformer.tokenizers.word import WordTokenizer

    config = opus_config()
    words = ["", "[UNK]", "[end]"] + [f"w{i}" for i in range(OPUS_VOCAB - 3)]
    tokenizer = WordTokenizer(words, end_token="[end]", standardize=None)
    ckpt = OpenedModel(config, Transformer(config).build_weights(), tokenizer, tokenizer)
    source = " ".join(f"w{37 * i + 5}" for i in range(args.source_words))
    target = " ".join(f"w{53 * i + 7}" for i in range(args.target_words))
    source_ids, output_ids = ckpt.encode_source(source), ckpt.encode_target(target)
    n, t = len(source_ids), len(output_ids)

    start = time.perf_counter()
    ckpt.attention(source, target, details=args.details)
    first = time.perf_counter() - start

    def compiled():
        ckpt.attention(source, target, details=args.details)

    def eager():
        attention_maps(ckpt, [source_ids], [output_ids], details=args.details, compiled=False)

    theirs, threads = torch_forward(n, t) or (None, 0)
    cases = {"compiled": compiled, "eager": eager}
    if theirs is not None:
        cases["transformers"] = theirs
    for fn in cases.values():  # warm up
        fn()
    times = {name: [] for name in cases}
    for _ in range(args.repeats):  # interleaved, so that machine noise hits each alike
        for name, fn in cases.items():
            times[name].append(median_seconds(fn, 1))
    median = {name: float(np.median(ts)) for name, ts in times.items()}
    print(f"model: opus-mt-en-fr's shapes (6+6 layers, d_model 512, 8 heads, vocabulary "
          f"{OPUS_VOCAB:,}), random weights; source {n} ids, target {t} ids"
          f"{', details' if args.details else ''}")
    print(f"first call (trace)                        {first * 1000:8.1f} ms")
    print(f"ckpt.attention(source, target), compiled  {median['compiled'] * 1000:8.1f} ms "
          f"(median of {args.repeats})")
    print(f"the same maps, eager (the reference)      {median['eager'] * 1000:8.1f} ms")
    if theirs is None:
        print("transformers: not installed, no comparison")
        return
    print(f"transformers forward, output_attentions   {median['transformers'] * 1000:8.1f} ms "
          f"(torch on {threads} thread{'s' if threads > 1 else ''})")
    print(f"compiled / transformers                   "
          f"{median['compiled'] / median['transformers']:8.2f}  (goal <= 2)")
    print(f"eager / transformers                      "
          f"{median['eager'] / median['transformers']:8.2f}")


if __name__ == "__main__":
    main()
