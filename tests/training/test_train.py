"""Training: a tiny real run that learns, the CLI's files and metadata, the loss, accuracy and
learning-rate pieces against hand computations, and the bundled dates checkpoint.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.model.weights import weight_arrays
from transformer.training import data
from transformer.training.fit import (
    TransformerSchedule,
    build_parser,
    epoch_path,
    main,
    masked_accuracy,
    masked_loss,
)

TINY_MODEL = ["--d-model", "32", "--num-heads", "2", "--dff", "64", "--num-encoder-layers", "1",
              "--num-decoder-layers", "1", "--max-len", "40", "--warmup-steps", "50",
              "--verbose", "0", "--src-vocab-size", "60", "--tgt-vocab-size", "20"]
EPOCHS, STEPS = 4, 100
# Observed last/first epoch mean loss for this run: 0.52 (seed 0), 0.52 (seed 1), 0.54 (seed 2).
LOSS_RATIO = 0.7


# ============================================================================= a tiny real run
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("train") / "t.ckpt"
    argv = ["--task", "dates", "--out", str(out), "--num-examples", "2000",
            "--epochs", str(EPOCHS), "--max-steps", str(STEPS), "--save-every-epoch", *TINY_MODEL]
    return argv, out, main(argv)


@pytest.mark.slow
def test_tiny_model_lowers_its_loss(tiny_run):
    _, _, metadata = tiny_run
    history = metadata["history"]
    loss = history["loss"]
    assert len(loss) == EPOCHS and all(math.isfinite(x) for x in loss)
    assert loss[-1] < LOSS_RATIO * loss[0], (
        f"after {STEPS} steps the epoch loss went {loss[0]:.3f} -> {loss[-1]:.3f}, "
        f"not below {LOSS_RATIO:.0%} of the first")
    assert all(b < a for a, b in zip(loss, loss[1:])), loss  # down every epoch
    val = history["val_loss"]
    assert val[-1] < val[0], val
    accuracy = history["masked_accuracy"]
    assert accuracy[-1] > accuracy[0] + 0.2, accuracy


@pytest.mark.slow
def test_tiny_run_writes_a_loadable_checkpoint_with_its_metadata(tiny_run):
    argv, out, metadata = tiny_run
    checkpoint = load_checkpoint(out)
    saved = checkpoint.metadata
    assert saved == metadata
    assert saved["command"] == "python -m transformer.train " + shlex.join(argv)
    assert saved["command"].startswith("python -m transformer.train --task dates --out ")
    assert saved["steps"] == STEPS
    assert saved["epochs"] == EPOCHS
    assert saved["task"] == "dates" and saved["name"] == "dates"
    assert saved["train_examples"] == 2000
    held_out = saved["held_out"]
    # 200 held-out pairs shared out over the formats, rounded up: 6 of each of the 36.
    assert held_out["num_examples"] == saved["held_out_examples"] == 6 * len(data.DATE_FORMATS)
    assert [row["format"] for row in held_out["per_format"]] == list(data.DATE_FORMATS)
    assert all(row["num_examples"] == 6 and isinstance(row["example"], str) and row["example"]
               for row in held_out["per_format"])
    for key in ("exact_match", "token_accuracy"):
        assert isinstance(held_out[key], float) and 0.0 <= held_out[key] <= 1.0, held_out
    assert held_out["token_accuracy"] > 0.5  # 100 steps learn most of the ISO layout
    c = checkpoint.config
    assert (c.d_model, c.num_heads, c.dff, c.num_encoder_layers, c.num_decoder_layers,
            c.max_len) == (32, 2, 64, 1, 1, 40)
    assert c.src_vocab_size == checkpoint.source_tokenizer.vocab_size <= 60
    assert c.tgt_vocab_size == checkpoint.target_tokenizer.vocab_size <= 20


@pytest.mark.slow
def test_save_every_epoch_writes_one_checkpoint_per_epoch(tiny_run):
    _, out, metadata = tiny_run
    files = sorted(out.parent.glob("t.epoch*.ckpt"))
    assert [f.name for f in files] == [f"t.epoch{i:02d}.ckpt" for i in range(1, EPOCHS + 1)]
    assert files == [epoch_path(out, i) for i in range(1, EPOCHS + 1)]
    final = load_checkpoint(out)
    for i, path in enumerate(files, start=1):
        checkpoint = load_checkpoint(path)
        assert checkpoint.config == final.config
        assert checkpoint.metadata["epoch"] == i
        assert checkpoint.metadata["steps"] == i * STEPS // EPOCHS
        assert checkpoint.metadata["command"] == metadata["command"]
        assert checkpoint.metadata["epoch_metrics"]["loss"] == pytest.approx(
            metadata["history"]["loss"][i - 1], rel=1e-6)
    # The last epoch's snapshot holds the final weights; the first one does not.
    last, first = weight_arrays(checkpoint.model), weight_arrays(load_checkpoint(files[0]).model)
    after = weight_arrays(final.model)
    assert all(np.array_equal(last[k], after[k]) for k in after)
    assert not all(np.array_equal(first[k], after[k]) for k in after)


# ============================================================================= pieces
@pytest.mark.parametrize("d_model, warmup, scale", [(128, 400, 1.0), (512, 4000, 1.0),
                                                    (32, 50, 0.4)])
def test_learning_rate_schedule_is_the_paper_formula(d_model, warmup, scale):
    schedule = TransformerSchedule(d_model, warmup, scale) if scale != 1.0 else \
        TransformerSchedule(d_model, warmup)
    for keras_step in (0, 1, warmup // 2, warmup - 1, warmup, 3 * warmup, 100_000):
        step = keras_step + 1  # Keras counts optimizer steps from 0, the paper from 1
        expected = scale * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
        got = float(schedule(tf.constant(keras_step, tf.int64)))
        assert got == pytest.approx(expected, rel=1e-5), keras_step
    # Rising through warmup, the peak d_model^-0.5 * warmup^-0.5 at its last step, then falling.
    steps = sorted(set(range(0, 3 * warmup, max(1, warmup // 40))) | {warmup - 1})
    values = [float(schedule(s)) for s in steps]
    peak = steps.index(warmup - 1)
    assert values[peak] == max(values)
    assert values[peak] == pytest.approx(scale * (d_model * warmup) ** -0.5, rel=1e-5)
    assert all(a < b for a, b in zip(values[:peak], values[1:peak + 1]))
    assert all(a > b for a, b in zip(values[peak:], values[peak + 1:]))


def np_label_smoothed_ce(labels, logits, pad_id, smoothing):
    """Per-token -sum(q log softmax(z)) with q = (1 - e) one_hot + e / V, averaged over non-pad."""
    logits = logits.astype(np.float64)
    vocab = logits.shape[-1]
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    total, count = 0.0, 0
    for b in range(labels.shape[0]):
        for t in range(labels.shape[1]):
            if labels[b, t] == pad_id:
                continue
            q = np.full(vocab, smoothing / vocab)
            q[labels[b, t]] += 1.0 - smoothing
            total += -(q * log_probs[b, t]).sum()
            count += 1
    return total / count


PAD, VOCAB = 0, 7
LABELS = np.array([[3, 5, 2, 0, 0],
                   [4, 4, 6, 1, 2]], np.int32)


def test_masked_loss_matches_numpy_label_smoothed_cross_entropy():
    logits = np.random.default_rng(0).normal(0, 2, (2, 5, VOCAB)).astype(np.float32)
    for smoothing in (0.0, 0.1, 0.3):
        loss = masked_loss(PAD, VOCAB, smoothing)
        expected = np_label_smoothed_ce(LABELS, logits, PAD, smoothing)
        assert float(loss(tf.constant(LABELS), tf.constant(logits))) == \
            pytest.approx(expected, rel=1e-5)
        # Keras may hand labels over as (B, T, 1); the value must not change.
        assert float(loss(tf.constant(LABELS[..., None]), tf.constant(logits))) == \
            pytest.approx(expected, rel=1e-5)
    # Not the unmasked mean: padding would otherwise count.
    unmasked = np_label_smoothed_ce(LABELS, logits, pad_id=-1, smoothing=0.1)
    assert float(masked_loss(PAD, VOCAB, 0.1)(LABELS, logits)) != pytest.approx(unmasked, rel=1e-3)


def test_masked_loss_ignores_padding_positions():
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 2, (2, 5, VOCAB)).astype(np.float32)
    loss = masked_loss(PAD, VOCAB, 0.1)
    base = float(loss(LABELS, logits))
    # Anything at padded positions changes nothing ...
    changed = logits.copy()
    changed[LABELS == PAD] = rng.normal(0, 50, (int((LABELS == PAD).sum()), VOCAB))
    assert float(loss(LABELS, changed)) == pytest.approx(base, rel=1e-6)
    # ... and neither does padding the batch further.
    longer_labels = np.pad(LABELS, ((0, 0), (0, 3)), constant_values=PAD)
    longer_logits = np.concatenate([logits, rng.normal(0, 9, (2, 3, VOCAB)).astype(np.float32)],
                                   axis=1)
    assert float(loss(longer_labels, longer_logits)) == pytest.approx(base, rel=1e-6)
    # A real position does matter.
    moved = logits.copy()
    moved[0, 0, LABELS[0, 0]] += 5.0
    assert float(loss(LABELS, moved)) != pytest.approx(base, rel=1e-4)
    # All padding: zero, not NaN.
    assert float(loss(np.zeros((1, 3), np.int32), logits[:1, :3])) == 0.0


def test_masked_accuracy_counts_only_real_positions():
    predicted = np.array([[3, 1, 2, 0, 4],    # right, wrong, right, pad, pad (4 predicted)
                          [4, 4, 6, 6, 6]],   # right, right, right, wrong, wrong
                         np.int32)
    logits = np.full((2, 5, VOCAB), -3.0, np.float32)
    for b in range(2):
        for t in range(5):
            logits[b, t, predicted[b, t]] = 3.0
    accuracy = masked_accuracy(PAD)
    assert float(accuracy(LABELS, logits)) == pytest.approx(5 / 8)  # 8 real positions
    assert float(accuracy(LABELS[..., None], logits)) == pytest.approx(5 / 8)
    longer_labels = np.pad(LABELS, ((0, 0), (0, 2)), constant_values=PAD)
    longer_logits = np.concatenate([logits, np.zeros((2, 2, VOCAB), np.float32)], axis=1)
    assert float(accuracy(longer_labels, longer_logits)) == pytest.approx(5 / 8)
    assert float(accuracy(np.zeros((1, 2), np.int32), logits[:1, :2])) == 0.0


# ============================================================================= TSV corpus, flags
@pytest.mark.slow
def test_tsv_corpus_run_trains_and_records_the_corpus_report(tmp_path, capsys):
    pairs = data.date_pairs(300, seed=4)
    lines = [f"{s}\t{t}" for s, t in pairs]
    lines.insert(2, "a line without any tab")  # line 3: malformed
    lines.insert(10, "")  # line 11: blank
    lines.insert(20, "only a source\t")  # line 21: empty target
    corpus = tmp_path / "my_pairs.tsv"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "corpus.ckpt"
    metadata = main(["--data", str(corpus), "--out", str(out), "--epochs", "1",
                     "--max-steps", "5", "--batch-size", "32", *TINY_MODEL])
    report = metadata["corpus_report"]
    assert report.startswith("read 300 pairs from my_pairs.tsv"), report
    assert "skipped 1 blank line" in report
    assert "2 malformed lines" in report
    assert "line 3: missing target column (no tab)" in report
    assert "line 21: empty target" in report
    assert report in capsys.readouterr().err  # also told to the person running it
    assert metadata["corpus"] == "my_pairs.tsv" and "task" not in metadata
    assert metadata["name"] == "my_pairs"
    assert metadata["train_examples"] + metadata["held_out_examples"] == 300
    assert metadata["held_out_examples"] == 15  # the default 5%
    assert metadata["steps"] == 5
    checkpoint = load_checkpoint(out)
    assert checkpoint.metadata["corpus_report"] == report
    assert checkpoint.name == "my_pairs"
    assert len(checkpoint.translate(pairs[0][0], max_len=12).token_ids) >= 1


def run_expecting_exit(argv) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code


def test_invalid_model_settings_exit_with_a_message_naming_d_model(tmp_path):
    out = tmp_path / "never.ckpt"
    base = ["--task", "dates", "--out", str(out), "--num-examples", "200", "--verbose", "0"]
    code = run_expecting_exit([*base, "--d-model", "30", "--num-heads", "4"])
    assert isinstance(code, str) and "d_model" in code and "num_heads" in code, code
    assert "30" in code and "4" in code
    assert "Traceback" not in code
    code = run_expecting_exit([*base, "--dropout-rate", "1.5"])
    assert isinstance(code, str) and "dropout_rate" in code, code
    code = run_expecting_exit([*base, "--pad-id", "5"])
    assert isinstance(code, str) and "--pad-id 5" in code and "disagrees" in code, code
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_argument_errors_exit_with_usage(tmp_path, capsys):
    out = str(tmp_path / "x.ckpt")
    assert run_expecting_exit(["--task", "dates", "--data", "x.tsv", "--out", out]) == 2
    assert "not allowed with" in capsys.readouterr().err
    assert run_expecting_exit(["--task", "dates"]) == 2
    assert "--out" in capsys.readouterr().err
    assert run_expecting_exit(["--task", "sums", "--out", out]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_too_small_corpus_exits_with_a_message(tmp_path):
    corpus = tmp_path / "one.tsv"
    corpus.write_text("hello\tbonjour\n", encoding="utf-8")
    code = run_expecting_exit(["--data", str(corpus), "--out", str(tmp_path / "o.ckpt")])
    assert isinstance(code, str) and "too few pairs" in code, code


# ============================================================================= bundled checkpoint
@pytest.fixture(scope="module")
def bundled():
    assert DEFAULT_CHECKPOINT.is_file(), f"the bundled checkpoint {DEFAULT_CHECKPOINT} is missing"
    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def bundled_args(bundled):
    """The recorded training command, parsed by the training CLI's own parser."""
    words = shlex.split(bundled.metadata["command"])
    assert words[:3] == ["python", "-m", "transformer.train"]
    return build_parser().parse_args(words[3:])


def test_bundled_checkpoint_loads_small_and_accurate(bundled, bundled_args):
    assert DEFAULT_CHECKPOINT.stat().st_size <= 20 * 2**20
    metadata = bundled.metadata
    assert metadata["command"].startswith("python -m transformer.train --task dates")
    assert metadata["held_out"]["exact_match"] >= 0.99, metadata["held_out"]
    assert metadata["held_out"]["num_examples"] >= 200
    per_format = metadata["held_out"]["per_format"]  # every format, each measured on its own
    assert [row["format"] for row in per_format] == list(data.DATE_FORMATS)
    assert all(row["exact_match"] >= 0.99 and row["num_examples"] >= 100 for row in per_format)
    assert metadata["task"] == "dates"
    # The recorded command describes this very model.
    c = bundled.config
    assert bundled_args.task == "dates" and Path(bundled_args.out) == Path(
        "assets/checkpoints/dates.ckpt")
    assert bundled_args.seed == metadata["seed"]
    for name in ("d_model", "num_heads", "dff", "num_encoder_layers", "num_decoder_layers",
                 "max_len", "positional", "norm_first", "share_embeddings", "tie_output"):
        assert getattr(c, name) == getattr(bundled_args, name), name


def test_bundled_checkpoint_translates_held_out_dates(bundled, bundled_args):
    seed = bundled.metadata["seed"]
    fraction = bundled_args.validation_fraction
    held_out = data.date_pairs(10, split="test", seed=seed, held_out_fraction=fraction)
    seen = {t for _, t in data.date_pairs(bundled_args.num_examples, split="train", seed=seed,
                                          held_out_fraction=fraction)}
    assert not seen & {t for _, t in held_out}  # these days were never trained on
    wrong = [(source, target, bundled.translate(source).text) for source, target in held_out]
    wrong = [w for w in wrong if w[1] != w[2]]
    assert not wrong, wrong


def test_bundled_checkpoint_attention_maps(bundled):
    c = bundled.config
    source = "Friday, March 5, 2021"
    maps = bundled.attention(source)
    n, t = len(maps["source_tokens"]), len(maps["target_tokens"])
    assert len(maps["output_tokens"]) == t and n == len(maps["source_ids"]) and t == len(
        maps["target_ids"])
    assert maps["source_tokens"][0] == "<s>" and maps["source_tokens"][-1] == "</s>"
    assert maps["target_tokens"][0] == "<s>" and maps["output_tokens"][-1] == "</s>"
    assert maps["target_tokens"][1:] == maps["output_tokens"][:-1]  # shifted right
    expected = {"encoder": (c.num_encoder_layers, c.num_heads, n, n),
                "decoder": (c.num_decoder_layers, c.num_heads, t, t),
                "cross": (c.num_decoder_layers, c.num_heads, t, n)}
    for kind, shape in expected.items():
        weights = maps[kind]
        assert weights.shape == shape, kind
        assert weights.dtype == np.float32, kind
        assert np.all(weights >= 0), kind
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5, err_msg=kind)
    assert np.all(np.triu(maps["decoder"], k=1) == 0)  # no position attends to a later one
    translation = bundled.translate(source)
    assert translation.text == "2021-03-05"
    forced = bundled.attention(source, target=translation.text)
    assert forced["output_tokens"] == maps["output_tokens"] == translation.tokens
    for kind in expected:
        np.testing.assert_allclose(forced[kind], maps[kind], rtol=0, atol=1e-6, err_msg=kind)


@pytest.mark.slow
def test_bundled_per_epoch_checkpoints_come_from_the_same_run(bundled):
    files = sorted(DEFAULT_CHECKPOINT.parent.glob("dates.epoch*.ckpt"))
    assert len(files) >= 2, files
    epochs, steps = [], []
    for path in files:
        checkpoint = load_checkpoint(path)
        assert checkpoint.config == bundled.config, path.name
        assert checkpoint.metadata["command"] == bundled.metadata["command"], path.name
        assert checkpoint.metadata["seed"] == bundled.metadata["seed"], path.name
        epoch = checkpoint.metadata["epoch"]
        assert path.name == f"dates.epoch{epoch:02d}.ckpt"
        epochs.append(epoch)
        steps.append(checkpoint.metadata["steps"])
    assert epochs == sorted(set(epochs)) and steps == sorted(set(steps))
    assert epochs[-1] <= bundled.metadata["epochs"]
    assert steps[-1] <= bundled.metadata["steps"]
    # Same run, same steps per epoch.
    assert len({s // e for s, e in zip(steps, epochs)}) == 1 and all(
        s % e == 0 for s, e in zip(steps, epochs))
