"""Oracles for the Keras importers (transformer.importers.keras_seq2seq, tf_tutorial): each
recipe's ORIGINAL model (tests/originals/), built small with random weights, saved as its users
save it, converted, and compared number for number: output probabilities and every attention
map of every layer and kind."""

import functools
import io
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

keras = pytest.importorskip("keras")
import tensorflow as tf  # noqa: E402

from transformer.checkpoint.format import CheckpointError  # noqa: E402
from transformer.importers.cli import main  # noqa: E402
from transformer.importers.keras_seq2seq import convert_keras_seq2seq  # noqa: E402
from transformer.importers.tf_tutorial import convert_tf_tutorial  # noqa: E402
from transformer.inference.session import load_checkpoint  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SRC_VOCAB, TGT_VOCAB, D_MODEL, HEADS, DFF, SEQ_LEN = 30, 20, 16, 2, 32, 6
TOL = 1e-5

# Two sentences of the example's shape: padded to sequence_length with 0, the second shorter.
SEQ2SEQ_SOURCE = np.array([[4, 5, 6, 7, 0, 0], [8, 9, 0, 0, 0, 0]], np.int64)
SEQ2SEQ_TARGET = np.array([[2, 7, 8, 9, 0, 0], [2, 11, 0, 0, 0, 0]], np.int64)  # [start] ...
TUTORIAL_SOURCE = np.array([[2, 5, 6, 7, 3, 0, 0], [2, 8, 3, 0, 0, 0, 0]], np.int64)  # [START]..[END]
TUTORIAL_TARGET = np.array([[2, 7, 8, 9, 0], [2, 11, 0, 0, 0]], np.int64)
# Unpadded: under Keras 3.15 the tutorial's padding mask reaches only the first encoder and the
# first decoder self-attention (its EncoderLayer/DecoderLayer drop the mask), which no config
# reproduces; one sentence (what the app translates and shows) is never padded.
TUTORIAL_SOURCE_FULL = np.array([[2, 5, 6, 7, 3], [2, 8, 9, 10, 3]], np.int64)
TUTORIAL_TARGET_FULL = np.array([[2, 7, 8, 9], [2, 11, 12, 13]], np.int64)


# ------------------------------------------------------------------ vocabularies
def _lines(tokens):
    return ("\n".join(tokens) + "\n").encode()


@pytest.fixture
def seq2seq_vocabs(tmp_path):
    """TextVectorization.get_vocabulary() files: "" and [UNK] first; the target has [start]/[end]."""
    source = tmp_path / "eng_vocab.txt"
    target = tmp_path / "spa_vocab.txt"
    source.write_bytes(_lines(["", "[UNK]"] + [f"w{i}" for i in range(SRC_VOCAB - 2)]))
    target.write_bytes(_lines(["", "[UNK]", "[start]", "[end]"] + [f"s{i}" for i in range(TGT_VOCAB - 4)]))
    return source, target


@pytest.fixture
def tutorial_vocabs(tmp_path):
    """WordPiece vocabularies with the tutorial's reserved tokens first."""
    reserved = ["[PAD]", "[UNK]", "[START]", "[END]"]
    source = tmp_path / "pt_vocab.txt"
    target = tmp_path / "en_vocab.txt"
    source.write_bytes(_lines(reserved + [f"p{i}" for i in range(SRC_VOCAB - 5)] + ["##s"]))
    target.write_bytes(_lines(reserved + [f"e{i}" for i in range(TGT_VOCAB - 5)] + ["##s"]))
    return source, target


# ------------------------------------------------------------------ recording keras attention
@pytest.fixture
def recorded(monkeypatch):
    """Every keras.layers.MultiHeadAttention call's attention weights, in call order."""
    scores = []
    original = keras.layers.MultiHeadAttention.call

    @functools.wraps(original)
    def call(self, query, value, key=None, *args, return_attention_scores=False, **kwargs):
        output, weights = original(self, query, value, key, *args, return_attention_scores=True,
                                   **kwargs)
        if tf.executing_eagerly():
            scores.append(weights.numpy())
        return (output, weights) if return_attention_scores else output

    monkeypatch.setattr(keras.layers.MultiHeadAttention, "call", call)
    return scores


def _ours(checkpoint, source, target):
    out = checkpoint.model((source.astype(np.int32), target.astype(np.int32)), return_attention=True)
    return {"probs": tf.nn.softmax(out["logits"]).numpy(),
            "logits": out["logits"].numpy(),
            "encoder": out["encoder_attention"].numpy(),  # (L, B, H, N, N)
            "decoder": out["decoder_attention"].numpy(),
            "cross": out["cross_attention"].numpy()}


def _assert_same(ours, probs, maps, rows=None):
    """maps: {kind: [(B, H, q, k) per layer]}; rows: optional {kind: bool (B, q)} of the query
    rows to compare (all by default)."""
    np.testing.assert_allclose(ours["probs"], probs, atol=TOL, rtol=0)
    for kind, layers in maps.items():
        assert ours[kind].shape[0] == len(layers), kind
        for layer, theirs in enumerate(layers):
            mine = ours[kind][layer]
            assert mine.shape == theirs.shape, (kind, layer, mine.shape, theirs.shape)
            if rows is not None and kind in rows:
                keep = rows[kind]  # (B, q)
                mine, theirs = mine.transpose(0, 2, 1, 3)[keep], theirs.transpose(0, 2, 1, 3)[keep]
            np.testing.assert_allclose(mine, theirs, atol=TOL, rtol=0, err_msg=f"{kind} L{layer + 1}")


# ------------------------------------------------------------------ the Keras example, form a
def _seq2seq_original():
    from originals import keras_seq2seq

    keras.utils.set_random_seed(1)
    return keras_seq2seq.build_transformer(SRC_VOCAB, SEQ_LEN, D_MODEL, DFF, HEADS,
                                           target_vocab_size=TGT_VOCAB)


def _seq2seq_reference(model, recorded):
    recorded.clear()
    probs = model({"encoder_inputs": SEQ2SEQ_SOURCE, "decoder_inputs": SEQ2SEQ_TARGET}).numpy()
    encoder, decoder_self, cross = recorded  # the call order of the example's three attentions
    return probs, {"encoder": [encoder], "decoder": [decoder_self], "cross": [cross]}


@pytest.mark.parametrize("saved_as", ["weights.h5", "keras"])
def test_keras_seq2seq_equals_the_original(tmp_path, seq2seq_vocabs, recorded, saved_as):
    model = _seq2seq_original()
    probs, maps = _seq2seq_reference(model, recorded)
    path = tmp_path / f"translator.{saved_as}"
    model.save_weights(path) if saved_as == "weights.h5" else model.save(path)
    checkpoint = convert_keras_seq2seq(path, *seq2seq_vocabs)
    c = checkpoint.config
    assert (c.d_model, c.num_heads, c.head_dim, c.dff, c.max_len) == (D_MODEL, HEADS, D_MODEL, DFF, SEQ_LEN)
    assert (c.positional, c.scale_embeddings, c.layer_norm_epsilon) == ("learned", False, 1e-3)
    assert (c.mask_padding, c.pad_source_to, c.source_start, c.source_end) == (False, SEQ_LEN, False, False)
    tokens = checkpoint.target_tokenizer
    assert (tokens.id_to_piece(c.start_id), tokens.id_to_piece(c.end_id)) == ("[start]", "[end]")
    ours = _ours(checkpoint, SEQ2SEQ_SOURCE, SEQ2SEQ_TARGET)
    _assert_same(ours, probs, maps)
    # The softmax Dense: our logits are its pre-softmax values (same log-probabilities).
    np.testing.assert_allclose(tf.nn.log_softmax(ours["logits"]).numpy(), np.log(probs), atol=1e-4)
    source = checkpoint.metadata["source"]
    assert source["recipe"] == "keras-seq2seq" and source["form"] == "keras-mha"
    assert [f["role"] for f in source["files"]] == ["weights", "source vocabulary", "target vocabulary"]
    assert all(len(f["sha256"]) == 64 for f in source["files"])


def test_keras_seq2seq_translates_as_its_own_loop(tmp_path, seq2seq_vocabs):
    """The example's decode_sequence: argmax of position i over a [start]-prefixed, padded target."""
    model = _seq2seq_original()
    model.save_weights(tmp_path / "t.weights.h5")
    checkpoint = convert_keras_seq2seq(tmp_path / "t.weights.h5", *seq2seq_vocabs)
    sentence = "w3 W4, w5!"
    source_ids = checkpoint.encode_source(sentence)
    assert source_ids == [5, 6, 7] + [0] * (SEQ_LEN - 3)  # standardized, padded like eng_vectorization
    decoded = [2]
    for i in range(SEQ_LEN):  # max_decoded_sentence_length = sequence_length in the example
        target = (decoded + [0] * SEQ_LEN)[:SEQ_LEN]  # spa_vectorization(...)[:, :-1]
        predictions = model({"encoder_inputs": np.array([source_ids]),
                             "decoder_inputs": np.array([target], np.int64)})
        # Our greedy decoding never emits padding or the start id (transformer.inference.search_ours); a
        # trained example never predicts them, this random one might: skip them here too.
        token = int(np.argmax(np.where(np.isin(np.arange(TGT_VOCAB), [0, 2]), -np.inf,
                                       predictions[0, i, :])))
        decoded.append(token)
        if token == 3:  # "[end]"
            break
    assert checkpoint.translate(sentence).token_ids == decoded[1:]


# ------------------------------------------------------------------ the Keras example, form b
def _handwritten_original():
    from originals import keras_seq2seq_handwritten

    keras.utils.set_random_seed(2)
    return keras_seq2seq_handwritten.build_transformer(SRC_VOCAB, SEQ_LEN, D_MODEL, DFF, HEADS,
                                                       target_vocab_size=TGT_VOCAB)


def _handwritten_attention(attention, query, key, mask=None):
    """Recompute the hand-written layer's weights from its own layers and methods."""
    batch = tf.shape(query)[0]
    q = attention.split_heads(attention.q_linear(query), batch)
    k = attention.split_heads(attention.k_linear(key), batch)
    v = attention.split_heads(attention.v_linear(key), batch)
    return attention.attention(q, k, v, mask)[1].numpy()


def test_handwritten_seq2seq_equals_the_original(tmp_path, seq2seq_vocabs):
    model = _handwritten_original()
    probs = model([SEQ2SEQ_SOURCE, SEQ2SEQ_TARGET]).numpy()
    by_type = {type(layer).__name__: [] for layer in model.layers}
    for layer in model.layers:
        by_type[type(layer).__name__].append(layer)
    source_embedding, target_embedding = by_type["PositionalEmbedding"]
    (encoder,), (decoder,) = by_type["TransformerEncoder"], by_type["TransformerDecoder"]
    x = source_embedding(SEQ2SEQ_SOURCE)
    memory = encoder(x)
    y = target_embedding(SEQ2SEQ_TARGET)
    causal = decoder.get_causal_attention_mask(y)
    out_1 = decoder.layernorm_1(y + decoder.attention_1(y, y, y, mask=causal))
    maps = {"encoder": [_handwritten_attention(encoder.attention, x, x)],
            "decoder": [_handwritten_attention(decoder.attention_1, y, y, causal)],
            "cross": [_handwritten_attention(decoder.attention_2, out_1, memory)]}
    model.save_weights(tmp_path / "hw.weights.h5")
    with pytest.raises(CheckpointError, match="--num-heads"):
        convert_keras_seq2seq(tmp_path / "hw.weights.h5", *seq2seq_vocabs)
    with pytest.raises(CheckpointError, match="--num-heads 3 does not divide embed_dim 16"):
        convert_keras_seq2seq(tmp_path / "hw.weights.h5", *seq2seq_vocabs, num_heads=3)
    checkpoint = convert_keras_seq2seq(tmp_path / "hw.weights.h5", *seq2seq_vocabs, num_heads=HEADS)
    assert (checkpoint.config.num_heads, checkpoint.config.head_dim) == (HEADS, D_MODEL // HEADS)
    assert checkpoint.metadata["source"]["form"] == "handwritten-mha"
    _assert_same(_ours(checkpoint, SEQ2SEQ_SOURCE, SEQ2SEQ_TARGET), probs, maps)


# ------------------------------------------------------------------ the from-scratch notebook
# The notebook this project grew from (../shared/seeds/002), trained and saved by its own code
# under TF 2.x Keras 2 (the from_scratch_run fixture), in each of the three forms its users have.
FROM_SCRATCH_FORMS = {"weights.h5": "model.weights.h5", "keras": "model.keras",
                      "ModelCheckpoint folder": "checkpoint"}


def _from_scratch(run, saved_as):
    return convert_keras_seq2seq(run / FROM_SCRATCH_FORMS[saved_as], run / "eng_vocab.txt",
                                 run / "fra_vocab.txt", num_heads=json.loads(
                                     (run / "reference.json").read_text())["num_heads"])


@pytest.mark.parametrize("saved_as", list(FROM_SCRATCH_FORMS))
def test_from_scratch_notebook_equals_the_original(from_scratch_run, saved_as):
    run = from_scratch_run
    sizes = json.loads((run / "reference.json").read_text())
    with pytest.raises(CheckpointError, match="--num-heads"):
        convert_keras_seq2seq(run / FROM_SCRATCH_FORMS[saved_as], run / "eng_vocab.txt",
                              run / "fra_vocab.txt")
    checkpoint = _from_scratch(run, saved_as)
    c = checkpoint.config
    assert checkpoint.metadata["source"]["form"] == "from-scratch-notebook"
    assert (c.d_model, c.num_heads, c.head_dim, c.dff) == (
        sizes["embed_dim"], sizes["num_heads"], sizes["embed_dim"] // sizes["num_heads"],
        sizes["dense_dim"])
    assert (c.max_len, c.pad_source_to, c.mask_padding, c.positional) == (
        sizes["sequence_length"], sizes["sequence_length"], False, "learned")
    # Both embeddings have max_tokens rows; the vocabularies have fewer words: every row stays.
    assert (c.src_vocab_size, c.tgt_vocab_size) == (sizes["max_tokens"], sizes["max_tokens"])
    assert sizes["source_words"] < sizes["max_tokens"] and sizes["target_words"] < sizes["max_tokens"]
    with np.load(run / "reference.npz") as ref:
        ours = _ours(checkpoint, ref["source"], ref["target"])
        _assert_same(ours, ref["probs"], {"encoder": [ref["encoder"]], "decoder": [ref["decoder"]],
                                          "cross": [ref["cross"]]})
        # Its TextVectorization: the held-out sources padded to sequence_length.
        for sentence, ids in zip(sizes["held_out"], ref["source"]):
            assert checkpoint.encode_source(sentence) == ids.tolist()


def test_from_scratch_notebook_translates_as_its_decode_sequence(from_scratch_run):
    """The notebook's decode_sequence on held-out sentences (run by the original under tf_keras):
    the same words from each of the three saved forms."""
    reference = json.loads((from_scratch_run / "reference.json").read_text())
    assert len(reference["held_out"]) >= 10
    for saved_as in FROM_SCRATCH_FORMS:
        checkpoint = _from_scratch(from_scratch_run, saved_as)
        tokens = checkpoint.target_tokenizer
        assert (tokens.id_to_piece(checkpoint.config.start_id),
                tokens.id_to_piece(checkpoint.config.end_id)) == ("[start]", "[end]")
        for sentence, theirs in zip(reference["held_out"], reference["translations"]):
            result = checkpoint.translate(sentence)
            assert result.stopped_by == "end"
            assert " ".join(["[start]", result.text, "[end]"]) == theirs, sentence


def test_from_scratch_notebook_under_keras_3_equals_the_original(tmp_path, monkeypatch):
    """Keras 3 users: the notebook's PositionalEmbedding.compute_mask calls tf.math.not_equal on a
    KerasTensor, which Keras 3 refuses while building the model; with that one line written in
    keras.ops (what a Keras 3 user must change) the rest is the notebook's, saved as Keras 3 saves."""
    from originals import keras_from_scratch as nb

    monkeypatch.setattr(nb.PositionalEmbedding, "compute_mask",
                        lambda self, inputs, mask=None: keras.ops.not_equal(inputs, 0))
    recorded = []
    monkeypatch.setattr(nb, "scaled_dot_product_attention", _notebook_recorder(nb, recorded))
    keras.utils.set_random_seed(5)
    model = nb.build_transformer(SEQ_LEN, TGT_VOCAB, D_MODEL, DFF, HEADS)  # one max_tokens
    source = np.array([[4, 5, 6, 7, 0, 0], [8, 9, 0, 0, 0, 0]], np.int64)
    probs = model([source, SEQ2SEQ_TARGET]).numpy()
    encoder, decoder_self, cross = recorded
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(_lines(["", "[UNK]", "[start]", "[end]"] + [f"w{i}" for i in range(10)]))
    for saved_as in ("weights.h5", "keras"):
        path = tmp_path / f"m.{saved_as}"
        model.save_weights(path) if saved_as == "weights.h5" else model.save(path)
        checkpoint = convert_keras_seq2seq(path, vocab, vocab, num_heads=HEADS)
        assert checkpoint.metadata["source"]["form"] == "from-scratch-notebook"
        _assert_same(_ours(checkpoint, source, SEQ2SEQ_TARGET), probs,
                     {"encoder": [encoder], "decoder": [decoder_self], "cross": [cross]})


def _notebook_recorder(nb, recorded):
    from from_scratch_run import attention_recorder

    return attention_recorder(recorded)


def test_the_recipes_are_told_apart_by_what_is_inside_their_attention(tmp_path, from_scratch_run):
    from transformer.checkpoint.readers import read_weights
    from transformer.importers.keras_seq2seq import recipe_of_weights

    assert recipe_of_weights(read_weights(from_scratch_run / "checkpoint")) == \
        ("keras-seq2seq", "from-scratch-notebook")
    assert recipe_of_weights(read_weights(from_scratch_run / "model.keras")) == \
        ("keras-seq2seq", "from-scratch-notebook")
    _tutorial_original().save_weights(tmp_path / "tutorial.weights.h5")
    # The tutorial names its decoder's layers causal_self_attention and cross_attention too.
    assert recipe_of_weights(read_weights(tmp_path / "tutorial.weights.h5")) == ("tf-tutorial", "keras-mha")
    with pytest.raises(CheckpointError) as err:
        convert_tf_tutorial(from_scratch_run / "model.weights.h5", from_scratch_run / "eng_vocab.txt",
                            from_scratch_run / "fra_vocab.txt")
    message = str(err.value)
    assert "global_self_attention" in message and "q_linear" in message
    assert "from scratch" in message and "keras-seq2seq recipe" in message
    with pytest.raises(CheckpointError) as err:
        convert_keras_seq2seq(tmp_path / "tutorial.weights.h5", from_scratch_run / "eng_vocab.txt",
                              from_scratch_run / "fra_vocab.txt")
    message = str(err.value)
    assert "Its layers are: " in message and "mha" in message and "tf-tutorial recipe" in message


def test_a_file_of_no_recipe_names_the_layers_it_holds(tmp_path):
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dense(8)(inputs)))
    model.save_weights(tmp_path / "other.weights.h5")  # Keras 3 names them by class
    with pytest.raises(CheckpointError, match=r"Its layers are: dense, dense_1\."):
        convert_keras_seq2seq(tmp_path / "other.weights.h5", tmp_path / "v", tmp_path / "v")


def test_the_model_checkpoint_folder_is_read_from_its_files_as_uploaded(from_scratch_run, capsys):
    """The app receives the folder's files by name (".index", ".data-00000-of-00001", and the
    "checkpoint" text file); the CLI takes the folder."""
    folder = from_scratch_run / "checkpoint"
    files = {name: (folder / name).read_bytes() for name in (".index", ".data-00000-of-00001",
                                                             "checkpoint")}
    from_files = convert_keras_seq2seq(files, from_scratch_run / "eng_vocab.txt",
                                       from_scratch_run / "fra_vocab.txt", num_heads=4)
    from_folder = _from_scratch(from_scratch_run, "ModelCheckpoint folder")
    assert from_files.translate("We like the dog.").text == from_folder.translate("We like the dog.").text
    assert from_folder.name == "checkpoint"
    out = from_scratch_run / "cli.ckpt"
    assert main(["keras-seq2seq", "--weights", str(folder) + "/", "--source-vocab",
                 str(from_scratch_run / "eng_vocab.txt"), "--target-vocab",
                 str(from_scratch_run / "fra_vocab.txt"), "--num-heads", "4", "--out", str(out)]) == 0
    assert load_checkpoint(out).translate("We like the dog.").text == "nous aimons le chien"


# ------------------------------------------------------------------ the TF tutorial (Keras 3)
def _tutorial_original():
    from originals import tf_tutorial

    keras.utils.set_random_seed(3)
    model = tf_tutorial.Transformer(num_layers=2, d_model=D_MODEL, num_heads=HEADS, dff=DFF,
                                    input_vocab_size=SRC_VOCAB, target_vocab_size=TGT_VOCAB,
                                    dropout_rate=0.1)
    model((TUTORIAL_SOURCE[:, :2], TUTORIAL_TARGET[:, :2]))  # build, as the tutorial does
    return model


def _tutorial_maps(recorded, layers=2):
    """Call order: encoder layers, then per decoder layer its causal self- and cross-attention."""
    assert len(recorded) == 3 * layers
    return {"encoder": recorded[:layers], "decoder": recorded[layers::2],
            "cross": recorded[layers + 1::2]}


def test_tf_tutorial_equals_the_original(tmp_path, tutorial_vocabs, recorded):
    """Saved with save_weights: the tutorial's subclassed Transformer has no get_config, so
    model.save("x.keras") refuses it (the tutorial itself exports a SavedModel, never read)."""
    model = _tutorial_original()
    recorded.clear()
    logits = model((TUTORIAL_SOURCE_FULL, TUTORIAL_TARGET_FULL)).numpy()
    maps = _tutorial_maps(recorded)
    path = tmp_path / "tutorial.weights.h5"
    model.save_weights(path)
    checkpoint = convert_tf_tutorial(path, *tutorial_vocabs)
    c = checkpoint.config
    assert (c.num_encoder_layers, c.num_decoder_layers, c.num_heads, c.head_dim) == (2, 2, HEADS, D_MODEL)
    assert (c.positional, c.scale_embeddings, c.max_len) == ("sinusoidal_concat", True, 2048)
    assert (c.source_start, c.source_end, c.pad_source_to) == (True, True, 0)
    assert c.mask_padding is True
    tokens = checkpoint.target_tokenizer
    assert (tokens.id_to_piece(c.start_id), tokens.id_to_piece(c.end_id)) == ("[START]", "[END]")
    ours = _ours(checkpoint, TUTORIAL_SOURCE_FULL, TUTORIAL_TARGET_FULL)
    np.testing.assert_allclose(ours["logits"], logits, atol=TOL, rtol=0)
    _assert_same(ours, tf.nn.softmax(logits).numpy(), maps)


# ------------------------------------------------------------------ TF 2.x Keras 2 checkpoints
_TF_KERAS_SCRIPT = textwrap.dedent("""
    import functools, sys
    import numpy as np
    import tensorflow as tf
    import tf_keras
    sys.path.insert(0, {tests!r})
    recorded = []
    original = tf_keras.layers.MultiHeadAttention.call

    @functools.wraps(original)
    def call(self, query, value, key=None, return_attention_scores=False, **kwargs):
        kwargs.pop("mask", None)
        output, weights = original(self, query, value, key, return_attention_scores=True, **kwargs)
        if tf.executing_eagerly():
            recorded.append(weights.numpy())
        return (output, weights) if return_attention_scores else output

    tf_keras.layers.MultiHeadAttention.call = call
    tf_keras.utils.set_random_seed(4)
    source, target = np.array({source}), np.array({target})
    if {recipe!r} == "keras-seq2seq":
        from originals import tf_keras_seq2seq
        model = tf_keras_seq2seq.build_transformer({src}, {seq}, {d}, {dff}, {heads},
                                                   target_vocab_size={tgt})
    else:
        from originals import tf_tutorial
        model = tf_tutorial.Transformer(num_layers=2, d_model={d}, num_heads={heads}, dff={dff},
                                        input_vocab_size={src}, target_vocab_size={tgt})
    model((source, target))
    recorded.clear()
    out = model((source, target)).numpy()
    # What ModelCheckpoint({prefix!r}, save_weights_only=True) calls at each save:
    model.save_weights({prefix!r})
    np.savez({npz!r}, out=out, *recorded)
""")


def _tf_keras_reference(tmp_path, recipe, source, target):
    prefix = str(tmp_path / "ckpt")
    script = _TF_KERAS_SCRIPT.format(
        tests=str(ROOT / "tests"), source=source.tolist(), target=target.tolist(), recipe=recipe,
        src=SRC_VOCAB, tgt=TGT_VOCAB, seq=SEQ_LEN, d=D_MODEL, dff=DFF, heads=HEADS,
        prefix=prefix, npz=str(tmp_path / "reference.npz"))
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert Path(prefix + ".index").is_file() and Path(prefix + ".data-00000-of-00001").is_file()
    with np.load(tmp_path / "reference.npz") as npz:
        out = npz["out"]
        maps = [npz[f"arr_{i}"] for i in range(len(npz.files) - 1)]
    return prefix, out, maps


def test_keras_seq2seq_tf_keras_checkpoint_equals_the_original(tmp_path, seq2seq_vocabs):
    prefix, probs, (encoder, decoder_self, cross) = _tf_keras_reference(
        tmp_path, "keras-seq2seq", SEQ2SEQ_SOURCE, SEQ2SEQ_TARGET)
    checkpoint = convert_keras_seq2seq(prefix + ".index", *seq2seq_vocabs)
    _assert_same(_ours(checkpoint, SEQ2SEQ_SOURCE, SEQ2SEQ_TARGET), probs,
                 {"encoder": [encoder], "decoder": [decoder_self], "cross": [cross]})
    names = [f["name"] for f in checkpoint.metadata["source"]["files"]]
    assert names[:2] == ["ckpt.index", "ckpt.data-00000-of-00001"]


def test_tf_tutorial_tf_keras_checkpoint_equals_the_original(tmp_path, tutorial_vocabs):
    """Keras 2 masks the padded keys (mask_zero) and gives padded query rows a uniform row;
    ours masks the same keys, so every real row is equal (padded query rows are never shown)."""
    prefix, logits, recorded = _tf_keras_reference(tmp_path, "tf-tutorial", TUTORIAL_SOURCE,
                                                   TUTORIAL_TARGET)
    checkpoint = convert_tf_tutorial(prefix, *tutorial_vocabs)
    assert checkpoint.config.mask_padding is True
    ours = _ours(checkpoint, TUTORIAL_SOURCE, TUTORIAL_TARGET)
    real_source, real_target = TUTORIAL_SOURCE != 0, TUTORIAL_TARGET != 0
    np.testing.assert_allclose(ours["logits"][real_target], logits[real_target], atol=TOL, rtol=0)
    maps = _tutorial_maps(recorded)
    rows = {"encoder": real_source, "decoder": real_target, "cross": real_target}
    _assert_same({**ours, "probs": ours["probs"][real_target]},
                 tf.nn.softmax(logits).numpy()[real_target], maps, rows)


# ------------------------------------------------------------------ the CLI
def test_cli_writes_a_checkpoint_that_loads(tmp_path, seq2seq_vocabs, capsys):
    _seq2seq_original().save_weights(tmp_path / "model.weights.h5")
    out = tmp_path / "converted.ckpt"
    argv = ["keras-seq2seq", "--weights", str(tmp_path / "model.weights.h5"),
            "--source-vocab", str(seq2seq_vocabs[0]), "--target-vocab", str(seq2seq_vocabs[1]),
            "--out", str(out)]
    assert main(argv) == 0
    assert "1 encoder and 1 decoder layers" in capsys.readouterr().out
    loaded = load_checkpoint(out)
    assert loaded.config.positional == "learned"
    assert loaded.metadata["source"]["command"].startswith("python -m transformer.convert keras-seq2seq")


def test_cli_names_the_missing_flag(tmp_path, seq2seq_vocabs, capsys):
    _handwritten_original().save_weights(tmp_path / "hw.weights.h5")
    argv = ["keras-seq2seq", "--weights", str(tmp_path / "hw.weights.h5"),
            "--source-vocab", str(seq2seq_vocabs[0]), "--target-vocab", str(seq2seq_vocabs[1]),
            "--out", str(tmp_path / "x.ckpt")]
    assert main(argv) == 2
    assert "--num-heads" in capsys.readouterr().err
    assert not (tmp_path / "x.ckpt").exists()


def test_cli_runs_as_a_module(tmp_path):
    run = subprocess.run([sys.executable, "-m", "transformer.convert", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0
    for recipe in ("keras-seq2seq", "tf-tutorial", "marian"):
        assert recipe in run.stdout


# ------------------------------------------------------------------ bad and mismatched files
def test_wrong_recipe_is_named(tmp_path, seq2seq_vocabs, tutorial_vocabs):
    _tutorial_original().save_weights(tmp_path / "tutorial.weights.h5")
    with pytest.raises(CheckpointError, match="tutorial.weights.h5.*use the tf-tutorial recipe"):
        convert_keras_seq2seq(tmp_path / "tutorial.weights.h5", *seq2seq_vocabs)
    _seq2seq_original().save_weights(tmp_path / "example.weights.h5")
    with pytest.raises(CheckpointError, match="example.weights.h5.*use the keras-seq2seq recipe"):
        convert_tf_tutorial(tmp_path / "example.weights.h5", *tutorial_vocabs)


def test_vocabulary_of_the_wrong_size_names_the_file_and_the_weight(tmp_path, seq2seq_vocabs):
    _seq2seq_original().save_weights(tmp_path / "model.weights.h5")
    long = tmp_path / "long_vocab.txt"
    long.write_bytes(_lines(["", "[UNK]"] + [f"w{i}" for i in range(SRC_VOCAB + 3)]))
    with pytest.raises(CheckpointError) as err:
        convert_keras_seq2seq(tmp_path / "model.weights.h5", long, seq2seq_vocabs[1])
    message = str(err.value)
    assert "long_vocab.txt" in message and f"{SRC_VOCAB + 5} tokens" in message
    assert f"{SRC_VOCAB} rows" in message and "source_token_embedding" in message


def test_a_vocabulary_with_fewer_words_than_max_tokens_keeps_every_row(tmp_path, seq2seq_vocabs):
    """TextVectorization(max_tokens=30) adapted on 12 words: the notebooks size the embeddings by
    max_tokens, so the model has 30 rows and the file 12 words. Every row stays (the model's
    softmax is over all of them); ids 12..29 have no word and are named so."""
    _seq2seq_original().save_weights(tmp_path / "model.weights.h5")
    short = tmp_path / "short_vocab.txt"
    short.write_bytes(_lines(["", "[UNK]"] + [f"w{i}" for i in range(10)]))
    checkpoint = convert_keras_seq2seq(tmp_path / "model.weights.h5", short, seq2seq_vocabs[1])
    tokens = checkpoint.source_tokenizer
    assert tokens.vocab_size == checkpoint.config.src_vocab_size == SRC_VOCAB
    assert tokens.encode("w3 w9 w10") == [5, 11, 1]  # w10 is not a word of the file: [UNK]
    assert tokens.ids_to_pieces([11, 12, SRC_VOCAB - 1]) == ["w9", "[unused 12]", f"[unused {SRC_VOCAB - 1}]"]
    assert tokens.decode([5, 12]) == "w3 [unused 12]"
    # The checkpoint keeps them through its own file format.
    from transformer.checkpoint.format import checkpoint_bytes

    again = load_checkpoint(checkpoint_bytes(checkpoint.model, tokens, checkpoint.target_tokenizer,
                                             checkpoint.metadata))
    assert again.source_tokenizer.ids_to_pieces([12]) == ["[unused 12]"]
    assert again.source_tokenizer.vocab_size == SRC_VOCAB


def test_num_heads_that_contradicts_the_kernels(tmp_path, seq2seq_vocabs):
    _seq2seq_original().save_weights(tmp_path / "model.weights.h5")
    with pytest.raises(CheckpointError, match="--num-heads is 4 but the attention kernels hold 2"):
        convert_keras_seq2seq(tmp_path / "model.weights.h5", *seq2seq_vocabs, num_heads=4)


def test_truncated_h5_and_keras_without_weights(tmp_path, seq2seq_vocabs):
    model = _seq2seq_original()
    model.save_weights(tmp_path / "model.weights.h5")
    data = (tmp_path / "model.weights.h5").read_bytes()
    (tmp_path / "cut.weights.h5").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="cut.weights.h5.*damaged or truncated"):
        convert_keras_seq2seq(tmp_path / "cut.weights.h5", *seq2seq_vocabs)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("config.json", json.dumps({"class_name": "Functional"}))
        z.writestr("metadata.json", "{}")
    (tmp_path / "empty.keras").write_bytes(archive.getvalue())
    with pytest.raises(CheckpointError, match="empty.keras.*has no 'model.weights.h5'"):
        convert_keras_seq2seq(tmp_path / "empty.keras", *seq2seq_vocabs)


def test_a_weight_of_the_wrong_shape_is_named(tmp_path, seq2seq_vocabs):
    """An edited file: one attention kernel with a different head count than the others."""
    import h5py

    _seq2seq_original().save_weights(tmp_path / "model.weights.h5")
    with h5py.File(tmp_path / "model.weights.h5", "r+") as f:
        name = "layers/transformer_encoder/attention/key_dense/vars/0"
        if name not in f:  # layer names carry a session counter; find the encoder's key kernel
            name = next(n for n in _datasets(f) if n.endswith("attention/key_dense/vars/0")
                        and "decoder" not in n)
        del f[name]
        f[name] = np.zeros((D_MODEL, 4, 8), np.float32)
    with pytest.raises(CheckpointError, match=r"key_dense.*\(16, 4, 8\).*\(16, 2, 16\)"):
        convert_keras_seq2seq(tmp_path / "model.weights.h5", *seq2seq_vocabs)


@pytest.mark.parametrize("group, says", [
    ("layernorm_2", r"encoder layer 1 \('layers/transformer_encoder(_\d+)?'\) has no "
                    r"LayerNormalization weights for its feed-forward \(expected a group like "
                    r"'layers/transformer_encoder(_\d+)?/layernorm_2/vars' with gamma and "
                    r"beta\)"),
    ("layernorm_1", r"encoder layer 1 .* no LayerNormalization weights for its self-attention"),
])
def test_a_missing_layer_norm_group_is_named(tmp_path, seq2seq_vocabs, group, says):
    """Issue 25: a block without one of its LayerNormalization groups was not recognised as a
    block, and the file was said to hold no Keras seq2seq model; the sentence names the group."""
    import h5py

    _seq2seq_original().save_weights(tmp_path / "model.weights.h5")
    with h5py.File(tmp_path / "model.weights.h5", "r+") as f:
        name = next(n for n in _datasets(f) if n.endswith(f"{group}/vars/0")
                    and "encoder" in n).rsplit("/vars/", 1)[0]
        del f[name]
    with pytest.raises(CheckpointError, match=r"^'model\.weights\.h5': " + says):
        convert_keras_seq2seq(tmp_path / "model.weights.h5", *seq2seq_vocabs)


def _datasets(group, prefix=""):
    import h5py

    for key, item in group.items():
        if isinstance(item, h5py.Dataset):
            yield prefix + key
        else:
            yield from _datasets(item, prefix + key + "/")


# ------------------------------------------------------------------ hostile files (issue 15)
TUTORIAL_DATES = ROOT / "tests" / "fixtures" / "tutorial_dates"


def _tutorial_dates_edited(tmp_path, change):
    """The tutorial's dates model (tests/fixtures/tutorial_dates) with its weights edited."""
    import h5py

    path = tmp_path / "model.weights.h5"
    path.write_bytes((TUTORIAL_DATES / "model.weights.h5").read_bytes())
    with h5py.File(path, "r+") as f:
        change(f)
    return path


def test_a_scalar_where_a_kernel_belongs_is_named(tmp_path):
    name = "encoder/enc_layers/encoder_layer/self_attention/mha/query_dense/vars/0"

    def scalar(f):
        del f[name]
        f[name] = np.float32(0.5)
    weights = _tutorial_dates_edited(tmp_path, scalar)
    with pytest.raises(CheckpointError, match=r"^'model\.weights\.h5': the query kernel of "
                                              r"'encoder/.*/query_dense' has shape \(\); expected 3"):
        convert_tf_tutorial(weights, TUTORIAL_DATES / "source_vocab.txt",
                            TUTORIAL_DATES / "target_vocab.txt")


def test_a_vocabulary_that_is_no_vocabulary_is_a_sentence(tmp_path):
    source = tmp_path / "source_vocab.txt"
    source.write_bytes((TUTORIAL_DATES / "source_vocab.txt").read_bytes().replace(
        b"[UNK]", b"[\xff\xfe]"))
    with pytest.raises(CheckpointError, match=r"A vocabulary file is invalid: "
                                              r"source_vocab\.txt: not UTF-8 text"):
        convert_tf_tutorial(TUTORIAL_DATES / "model.weights.h5", source,
                            TUTORIAL_DATES / "target_vocab.txt")


def test_a_tf_checkpoint_given_as_files_is_named_by_its_prefix(tmp_path):
    from fuzz_formats import tf_bundle, vocabularies

    index, data = tf_bundle(lambda entries, data: entries.pop(0) and None)  # a gamma is missing
    with pytest.raises(CheckpointError, match=r"^'tutorial': "):
        convert_tf_tutorial({"tutorial.index": index, "tutorial.data-00000-of-00001": data},
                            *vocabularies().values())
