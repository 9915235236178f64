"""Train a Transformer and save an Attention Explorer checkpoint.

    python -m transformer.train --task dates --out assets/checkpoints/dates.ckpt
    python -m transformer.train --data corpus.tsv --out my.ckpt --epochs 20

Keras fit with the paper's recipe: Adam(beta_1=0.9, beta_2=0.98, epsilon=1e-9), learning rate
d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), label smoothing, loss and accuracy masked on
padding, teacher forcing with the target shifted right. Runs inside a tf.distribute strategy.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from transformer.checkpoint.format import save_checkpoint
from transformer.inference.search_ours import greedy_decode_batch
from transformer.model.config import POSITIONAL_KINDS, TransformerConfig
from transformer.model.transformer import Transformer
from transformer.tokenizers.bpemb import BPEmbTokenizer
from transformer.training import data


@keras.saving.register_keras_serializable(package="attention_explorer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5) (paper, 5.3).

    scale is 1 in the paper; small models with short warmups peak too high without it (the
    Annotated Transformer calls it `factor`)."""

    def __init__(self, d_model: int, warmup_steps: int = 4000, scale: float = 1.0):
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = tf.cast(step, tf.float32) + 1.0  # Keras counts from 0; the formula from 1
        return self.scale * tf.math.rsqrt(tf.cast(self.d_model, tf.float32)) * tf.minimum(
            tf.math.rsqrt(step), step * self.warmup_steps ** -1.5)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


def masked_loss(pad_id: int, vocab_size: int, label_smoothing: float):
    """Label-smoothed cross-entropy averaged over non-padding target positions."""
    def loss(labels, logits):
        labels = _labels(labels, logits)
        smoothed = tf.one_hot(labels, vocab_size) * (1.0 - label_smoothing) + \
            label_smoothing / vocab_size
        per_token = keras.losses.categorical_crossentropy(smoothed, logits, from_logits=True)
        mask = tf.cast(tf.not_equal(labels, pad_id), per_token.dtype)
        return tf.reduce_sum(per_token * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)
    loss.__name__ = "masked_loss"
    return loss


def _labels(labels, logits):
    """(B, T) int labels. Keras' loss wrappers expand them to (B, T, 1) to match the rank of the
    (B, T, V) logits: undo that, or one_hot/equal would broadcast to (B, T, T)."""
    return tf.reshape(tf.cast(labels, tf.int32), tf.shape(logits)[:-1])


def masked_accuracy(pad_id: int):
    def accuracy(labels, logits):
        labels = _labels(labels, logits)
        hits = tf.cast(tf.equal(tf.cast(tf.argmax(logits, -1), tf.int32), labels), tf.float32)
        mask = tf.cast(tf.not_equal(labels, pad_id), tf.float32)
        return tf.reduce_sum(hits * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)
    accuracy.__name__ = "masked_accuracy"
    return accuracy


def encode_pairs(pairs, source_tokenizer, target_tokenizer, max_len):
    """[(source, target)] -> list of (source_ids, target_ids) with <s> ... </s> on both sides.

    Pairs longer than max_len pieces are truncated (their end token kept)."""
    return [(source_tokenizer.encode(s, add_start=True, add_end=True, max_len=max_len),
             target_tokenizer.encode(t, add_start=True, add_end=True, max_len=max_len))
            for s, t in pairs]


def make_dataset(encoded, pad_id, batch_size, shuffle_seed=None):
    """Teacher forcing: inputs (source, target[:-1]), labels target[1:], padded per batch."""
    def gen():
        for src, tgt in encoded:
            yield (np.asarray(src, np.int32), np.asarray(tgt[:-1], np.int32)), \
                np.asarray(tgt[1:], np.int32)
    spec = ((tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32)),
            tf.TensorSpec([None], tf.int32))
    ds = tf.data.Dataset.from_generator(gen, output_signature=spec) \
        .apply(tf.data.experimental.assert_cardinality(len(encoded))).cache()
    if shuffle_seed is not None:
        ds = ds.shuffle(len(encoded), seed=shuffle_seed, reshuffle_each_iteration=True)
    return ds.padded_batch(batch_size, padding_values=((pad_id, pad_id), pad_id)) \
        .prefetch(tf.data.AUTOTUNE)


def held_out_report(model, encoded, target_tokenizer, batch_size=256, formats=None,
                    sources=None):
    """Exact match of greedy translations, and teacher-forced token accuracy, on held-out pairs.

    ``formats`` (one name per pair, e.g. the dates task's format names) adds "per_format": one
    {"format", "example", "exact_match", "num_examples"} per name, in order of first appearance,
    its example the first of its ``sources``."""
    c = model.config
    exact = hits = total = 0
    correct = []
    for i in range(0, len(encoded), batch_size):
        chunk = encoded[i:i + batch_size]
        decoded = greedy_decode_batch(model, [s for s, _ in chunk], max_len=c.max_len - 1,
                                      capture=False)
        correct += [d.token_ids == t[1:] for d, (_, t) in zip(decoded, chunk)]
        for (src, tgt_in), labels in make_dataset(chunk, c.pad_id, len(chunk)):
            predicted = tf.argmax(model((src, tgt_in)), -1, output_type=tf.int32).numpy()
            real = labels.numpy() != c.pad_id
            hits += int(((predicted == labels.numpy()) & real).sum())
            total += int(real.sum())
    exact = sum(correct)
    report = {"exact_match": exact / max(len(encoded), 1), "token_accuracy": hits / max(total, 1),
              "num_examples": len(encoded)}
    if formats is not None:
        report["per_format"] = per_format_report(formats, correct, sources)
    return report


def per_format_report(formats, correct, sources=None) -> list[dict]:
    """[{"format", "example", "exact_match", "num_examples"}] per format name, in order of first
    appearance; ``correct`` holds one bool per example."""
    rows: dict[str, dict] = {}
    for i, (fmt, ok) in enumerate(zip(formats, correct)):
        row = rows.setdefault(fmt, {"format": fmt, "example": sources[i] if sources else "",
                                    "right": 0, "num_examples": 0})
        row["right"] += bool(ok)
        row["num_examples"] += 1
    return [{"format": r["format"], "example": r["example"],
             "exact_match": r["right"] / r["num_examples"], "num_examples": r["num_examples"]}
            for r in rows.values()]


class EpochCheckpoints(keras.callbacks.Callback):
    """Saves one checkpoint per epoch (PATH.epochNN.ckpt) to show attention evolving."""

    def __init__(self, out: Path, tokenizers, metadata):
        super().__init__()
        self.out, self.tokenizers, self.metadata = out, tokenizers, metadata

    def on_epoch_end(self, epoch, logs=None):
        path = epoch_path(self.out, epoch + 1)
        metrics = {k: float(v) for k, v in (logs or {}).items()}
        save_checkpoint(path, self.model, *self.tokenizers,
                        {**self.metadata, "epoch": epoch + 1,
                         "steps": int(self.model.optimizer.iterations.numpy()),
                         "epoch_metrics": metrics})


def epoch_path(out: Path, epoch: int) -> Path:
    return out.with_name(f"{out.stem}.epoch{epoch:02d}{out.suffix}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m transformer.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--task", choices=["dates"], help="a built-in task")
    src.add_argument("--data", type=Path, help="TSV parallel corpus: source<TAB>target per line")
    p.add_argument("--out", type=Path, required=True, help="checkpoint file to write")
    p.add_argument("--name", help="a name shown in the app (default: task or corpus file name)")
    g = p.add_argument_group("training")
    g.add_argument("--epochs", type=int, default=10)
    g.add_argument("--batch-size", type=int, default=64)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--validation-fraction", type=float, default=0.05,
                   help="share of the corpus held out (for --task dates: of the calendar days)")
    g.add_argument("--num-examples", type=int, default=40000, help="--task dates: training pairs")
    g.add_argument("--held-out-per-format", type=int, default=None,
                   help="--task dates: held-out pairs of each format (default: the validation "
                        "fraction of --num-examples, at least 200 in all, shared out)")
    g.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    g.add_argument("--warmup-steps", type=int, default=4000)
    g.add_argument("--lr-scale", type=float, default=1.0,
                   help="multiplies the paper's learning-rate schedule")
    g.add_argument("--label-smoothing", type=float, default=0.1)
    g.add_argument("--save-every-epoch", action="store_true",
                   help="also write PATH.epochNN.ckpt after each epoch")
    g.add_argument("--strategy", choices=["default", "mirrored"], default="default",
                   help="tf.distribute strategy (mirrored: every local GPU)")
    g.add_argument("--verbose", type=int, default=1, choices=[0, 1, 2], help="Keras fit verbosity")
    t = p.add_argument_group("tokenizer")
    t.add_argument("--tokenizer", choices=["trained", "bpemb"], default="trained",
                   help="train SentencePiece BPE on the corpus, or use standard BPEmb models")
    t.add_argument("--bpemb-lang", nargs=2, metavar=("SRC", "TGT"), default=("en", "en"))
    t.add_argument("--bpemb-vs", type=int, default=10000)
    t.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True)
    t.add_argument("--digits-to-zero", action=argparse.BooleanOptionalAction, default=False,
                   help="BPEmb's digit folding; keep off where digits matter")
    m = p.add_argument_group("model (TransformerConfig fields)")
    defaults = TransformerConfig()
    m.add_argument("--src-vocab-size", type=int, default=None,
                   help="vocabulary of a trained source tokenizer (default 8000; 300 for dates)")
    m.add_argument("--tgt-vocab-size", type=int, default=None,
                   help="vocabulary of a trained target tokenizer (default 8000; 64 for dates)")
    for name in ("d_model", "num_heads", "dff", "num_encoder_layers", "num_decoder_layers",
                 "max_len"):
        m.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name))
    m.add_argument("--dropout-rate", type=float, default=defaults.dropout_rate)
    m.add_argument("--positional", choices=POSITIONAL_KINDS, default=defaults.positional)
    for name in ("scale_embeddings", "share_embeddings", "tie_output", "norm_first"):
        m.add_argument("--" + name.replace("_", "-"), action=argparse.BooleanOptionalAction,
                       default=getattr(defaults, name))
    for name in ("pad_id", "start_id", "end_id"):
        m.add_argument("--" + name.replace("_", "-"), type=int, default=None,
                       help="fixed by the tokenizer; given, it must agree")
    return p


def load_pairs(args):
    """(train pairs, held-out pairs, metadata about the data, held-out format names or None)."""
    if args.task == "dates":
        n_test = max(200, int(args.num_examples * args.validation_fraction))
        per_format = args.held_out_per_format or -(-n_test // len(data.DATE_FORMATS))
        held_out = data.held_out_date_examples(per_format, seed=args.seed,
                                               held_out_fraction=args.validation_fraction)
        return (data.date_pairs(args.num_examples, seed=args.seed, split="train",
                                held_out_fraction=args.validation_fraction),
                [(s, t) for s, t, _ in held_out], {"task": "dates"}, [f for _, _, f in held_out])
    corpus = data.read_parallel_tsv(args.data)
    print(corpus.summary(), file=sys.stderr)
    pairs = list(corpus.pairs)
    np.random.default_rng(args.seed).shuffle(pairs)
    n_val = max(1, int(len(pairs) * args.validation_fraction))
    if len(pairs) - n_val < 1:
        raise SystemExit(f"{args.data}: too few pairs ({len(pairs)}) to hold out a validation set")
    return pairs[n_val:], pairs[:n_val], {"corpus": args.data.name,
                                          "corpus_report": corpus.summary()}, None


def _examples(held_out_pairs, formats, n=8) -> list[str]:
    """n held-out sources for the app's examples: of n different formats where there are any."""
    if formats is None:
        return [source for source, _ in held_out_pairs[:n]]
    firsts = {}
    for (source, _), fmt in zip(held_out_pairs, formats):
        firsts.setdefault(fmt, source)
    chosen = list(firsts.values())
    return chosen[::max(1, len(chosen) // n)][:n]


def build_tokenizers(args, train_pairs):
    if args.tokenizer == "bpemb":
        src_lang, tgt_lang = args.bpemb_lang
        return (BPEmbTokenizer.from_bpemb(src_lang, args.bpemb_vs, lowercase=args.lowercase,
                                     digits_to_zero=args.digits_to_zero),
                BPEmbTokenizer.from_bpemb(tgt_lang, args.bpemb_vs, lowercase=args.lowercase,
                                     digits_to_zero=args.digits_to_zero))
    dates = args.task == "dates"
    src_vs = args.src_vocab_size or (300 if dates else 8000)
    tgt_vs = args.tgt_vocab_size or (64 if dates else 8000)
    options = dict(lowercase=args.lowercase, digits_to_zero=args.digits_to_zero, seed=args.seed)
    if args.share_embeddings:  # one matrix needs one vocabulary
        joint = BPEmbTokenizer.train([s for p in train_pairs for s in p], max(src_vs, tgt_vs), **options)
        return joint, joint
    return (BPEmbTokenizer.train([s for s, _ in train_pairs], src_vs, **options),
            BPEmbTokenizer.train([t for _, t in train_pairs], tgt_vs, **options))


def make_config(args, source_tokenizer, target_tokenizer) -> TransformerConfig:
    for name in ("pad_id", "start_id", "end_id"):
        given, actual = getattr(args, name), getattr(target_tokenizer, name)
        if given is not None and given != actual:
            raise SystemExit(f"--{name.replace('_', '-')} {given} disagrees with the tokenizer's "
                             f"{name} {actual}")
    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    values = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    values.update(src_vocab_size=source_tokenizer.vocab_size,
                  tgt_vocab_size=target_tokenizer.vocab_size, pad_id=target_tokenizer.pad_id,
                  start_id=target_tokenizer.start_id, end_id=target_tokenizer.end_id)
    try:
        return TransformerConfig(**values)
    except ValueError as err:
        raise SystemExit(f"invalid model settings: {err}") from None


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    started = time.time()
    train_pairs, held_out_pairs, data_meta, held_out_formats = load_pairs(args)
    source_tokenizer, target_tokenizer = build_tokenizers(args, train_pairs)
    config = make_config(args, source_tokenizer, target_tokenizer)
    train_encoded = encode_pairs(train_pairs, source_tokenizer, target_tokenizer, config.max_len)
    held_out_encoded = encode_pairs(held_out_pairs, source_tokenizer, target_tokenizer,
                                    config.max_len)
    strategy = tf.distribute.MirroredStrategy() if args.strategy == "mirrored" \
        else tf.distribute.get_strategy()
    with strategy.scope():
        model = Transformer(config)
        model.build_weights()
        model.compile(
            optimizer=keras.optimizers.Adam(TransformerSchedule(config.d_model, args.warmup_steps,
                                                                args.lr_scale),
                                            beta_1=0.9, beta_2=0.98, epsilon=1e-9),
            loss=masked_loss(config.pad_id, config.tgt_vocab_size, args.label_smoothing),
            metrics=[masked_accuracy(config.pad_id)])
    metadata = {**data_meta, "name": args.name or data_meta.get("task") or args.data.stem,
                "command": "python -m transformer.train " + shlex.join(argv),
                "train_examples": len(train_encoded), "held_out_examples": len(held_out_encoded),
                "examples": _examples(held_out_pairs, held_out_formats),
                "batch_size": args.batch_size, "seed": args.seed, "strategy": args.strategy,
                "label_smoothing": args.label_smoothing, "warmup_steps": args.warmup_steps,
                "lr_scale": args.lr_scale}
    callbacks = [EpochCheckpoints(args.out, (source_tokenizer, target_tokenizer), metadata)] \
        if args.save_every_epoch else []
    train_ds = make_dataset(train_encoded, config.pad_id, args.batch_size, shuffle_seed=args.seed)
    steps_per_epoch = None
    if args.max_steps:
        train_ds = train_ds.repeat()
        steps_per_epoch = max(1, args.max_steps // args.epochs)
    history = model.fit(train_ds, epochs=args.epochs, steps_per_epoch=steps_per_epoch,
                        validation_data=make_dataset(held_out_encoded, config.pad_id, 256),
                        callbacks=callbacks, verbose=args.verbose, shuffle=False)
    report = held_out_report(model, held_out_encoded, target_tokenizer, formats=held_out_formats,
                             sources=[source for source, _ in held_out_pairs])
    print(f"held-out: exact match {report['exact_match']:.2%}, token accuracy "
          f"{report['token_accuracy']:.2%} on {report['num_examples']} examples")
    for row in report.get("per_format", []):
        print(f"  {row['format']:<28} {row['exact_match']:8.2%} of {row['num_examples']:4d}  "
              f"e.g. {row['example']!r}")
    metadata.update(epochs=args.epochs, steps=int(model.optimizer.iterations.numpy()),
                    held_out=report, train_seconds=round(time.time() - started, 1),
                    history={k: [float(x) for x in v] for k, v in history.history.items()})
    save_checkpoint(args.out, model, source_tokenizer, target_tokenizer, metadata)
    print(f"saved {args.out}")
    return metadata


if __name__ == "__main__":
    main()
