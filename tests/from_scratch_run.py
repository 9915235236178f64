"""Run the "Transformer from scratch" notebook (tests/originals/keras_from_scratch.py) end to end, as
its TF 2.x users did: Keras 2 (tf_keras), its TextVectorization pipeline, compile + fit with its
callbacks (ModelCheckpoint(filepath=<folder>/, save_weights_only=True) writes the TensorFlow
checkpoint), load_weights, decode_sequence on held-out sentences.

    TF_USE_LEGACY_KERAS=1 python tests/from_scratch_run.py OUT_DIR

OUT_DIR receives what the notebook's users have and what the tests compare with:
  checkpoint/          the folder ModelCheckpoint wrote (checkpoint, .index, .data-00000-of-00001)
  model.weights.h5     transformer.save_weights(...) of the same trained model
  model.keras          transformer.save(...) of it
  eng_vocab.txt, fra_vocab.txt   each TextVectorization's get_vocabulary(), one word per line
  reference.npz        the model's probabilities and every attention map (its own arithmetic) on
                       a padded batch of held-out sentences, with the ids fed
  reference.json       sizes, held-out sentences and decode_sequence's translation of each

The corpus is made here (the notebook reads fra.txt, which is not shipped): short English
sentences and their French, written as fra.txt's lines are ("Je vois le chat." with its
punctuation and capitals), so the notebook's standardizations have work to do.
"""

import json
import os
import random
import sys
from pathlib import Path

# The notebook under TF 2.x: tf.keras is Keras 2.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from originals import keras_from_scratch as nb  # noqa: E402

SEQUENCE_LENGTH = 10
MAX_TOKENS = 64  # more than the words of either side: rows past the vocabulary stay in the model
EMBED_DIM, DENSE_DIM, NUM_HEADS = 32, 64, 4
EPOCHS = 60
HELD_OUT = 12

SUBJECTS = [("I", "Je", 0), ("You", "Tu", 1), ("He", "Il", 2), ("She", "Elle", 2),
            ("We", "Nous", 3), ("They", "Ils", 4)]
VERBS = [("see", "sees", ["vois", "vois", "voit", "voyons", "voient"]),
         ("like", "likes", ["aime", "aimes", "aime", "aimons", "aiment"]),
         ("want", "wants", ["veux", "veux", "veut", "voulons", "veulent"])]
OBJECTS = [("the cat", "le chat"), ("the dog", "le chien"), ("the house", "la maison"),
           ("the car", "la voiture"), ("the tree", "l'arbre"), ("the bread", "le pain"),
           ("the book", "le livre"), ("the sea", "la mer")]


def corpus():
    """(English, French) lines as fra.txt holds them."""
    pairs = []
    for english_subject, french_subject, person in SUBJECTS:
        for plain, third, forms in VERBS:
            verb = third if english_subject in ("He", "She") else plain
            for english_object, french_object in OBJECTS:
                french_verb = forms[person]
                if french_subject == "Je" and french_verb[0] in "aeiou":
                    french_subject_written = "J'"
                    line = f"{french_subject_written}{french_verb} {french_object}."
                else:
                    line = f"{french_subject} {french_verb} {french_object}."
                pairs.append((f"{english_subject} {verb} {english_object}.", line))
    return pairs


def attention_recorder(recorded):
    """nb.scaled_dot_product_attention, recording its softmax weights (the notebook's function
    returns only the outputs: the weights are recomputed with its own mask_attn_weights)."""
    original = nb.scaled_dot_product_attention

    def recording(q, k, v, use_causal_mask=False):
        d_k = tf.cast(tf.shape(k)[-1], tf.float32)
        scaled_scores = tf.matmul(q, k, transpose_b=True) / tf.math.sqrt(d_k)
        if use_causal_mask:
            scaled_scores = nb.mask_attn_weights(scaled_scores)
        if tf.executing_eagerly():
            recorded.append(tf.nn.softmax(scaled_scores, axis=-1).numpy())
        return original(q, k, v, use_causal_mask)

    return recording


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    random.seed(0)
    tf.keras.utils.set_random_seed(0)
    data = []
    for english, french in corpus():  # the notebook's parsing cell
        french = "[start] " + french + " [end]"
        data.append((english, french))
    random.shuffle(data)
    test = data[:HELD_OUT]
    train = data[HELD_OUT:][: int(len(data) * 0.8)]
    validation = data[HELD_OUT:][int(len(data) * 0.8):]

    source_vectorization, target_vectorization = nb.make_vectorizations(train, MAX_TOKENS,
                                                                        SEQUENCE_LENGTH)
    train_ds = nb.make_dataset(train, source_vectorization, target_vectorization, batch_size=16)
    validation_ds = nb.make_dataset(validation, source_vectorization, target_vectorization,
                                    batch_size=16)
    transformer = nb.build_transformer(SEQUENCE_LENGTH, MAX_TOKENS, EMBED_DIM, DENSE_DIM, NUM_HEADS)
    nb.train(transformer, train_ds, validation_ds, str(out / "checkpoint") + "/", epochs=EPOCHS)
    transformer.save_weights(str(out / "model.weights.h5"))
    transformer.save(str(out / "model.keras"))
    for name, layer in (("eng_vocab.txt", source_vectorization),
                        ("fra_vocab.txt", target_vectorization)):
        (out / name).write_text("\n".join(layer.get_vocabulary()) + "\n", encoding="utf-8")

    decode_sequence = nb.make_decode_sequence(transformer, source_vectorization,
                                              target_vectorization,
                                              max_decoded_sentence_length=SEQUENCE_LENGTH)
    held_out = [english for english, _ in test]
    translations = [decode_sequence(sentence) for sentence in held_out]

    # The reference batch: held-out sources and their references, as format_dataset makes them.
    source = source_vectorization(held_out[:4]).numpy()
    target = target_vectorization([french for _, french in test[:4]]).numpy()[:, :-1]
    recorded = []
    nb.scaled_dot_product_attention = attention_recorder(recorded)
    probs = transformer([source, target]).numpy()
    encoder, decoder_self, cross = recorded  # the call order of the notebook's three attentions
    np.savez(out / "reference.npz", source=source, target=target, probs=probs, encoder=encoder,
             decoder=decoder_self, cross=cross)
    (out / "reference.json").write_text(json.dumps({
        "sequence_length": SEQUENCE_LENGTH, "max_tokens": MAX_TOKENS, "embed_dim": EMBED_DIM,
        "dense_dim": DENSE_DIM, "num_heads": NUM_HEADS, "held_out": held_out,
        "references": [french for _, french in test], "translations": translations,
        "source_words": len(source_vectorization.get_vocabulary()),
        "target_words": len(target_vectorization.get_vocabulary())}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
