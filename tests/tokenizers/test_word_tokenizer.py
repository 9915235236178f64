"""Tests for transformer.tokenizers.word; the oracle is the real keras.layers.TextVectorization."""

import importlib
import json
import re
import string

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer.tokenizers import tokenizer_from_spec
from transformer.tokenizers.base import TokenizerError
from transformer.tokenizers.vocab_file import MAX_VOCAB_BYTES, MAX_VOCAB_LINES
from transformer.tokenizers.word import STANDARDIZATIONS, WordTokenizer

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

# The Keras English-to-Spanish example's standardization, verbatim.
strip_chars = string.punctuation + "¿"
strip_chars = strip_chars.replace("[", "").replace("]", "")


def custom_standardization(input_string):
    lowercase = tf.strings.lower(input_string)
    return tf.strings.regex_replace(lowercase, "[%s]" % re.escape(strip_chars), "")


KERAS_STANDARDIZE = {name: name for name in STANDARDIZATIONS}
KERAS_STANDARDIZE["keras_seq2seq"] = custom_standardization
# The "Transformer from scratch" notebook's, from its original (tests/originals).
KERAS_STANDARDIZE["keras_from_scratch"] = importlib.import_module(
    "originals.keras_from_scratch").custom_standardization
FRAMED = ("keras_seq2seq", "keras_from_scratch")  # adapted on "[start] ... [end]" targets

CORPUS = [
    "Go.", "Hi!", "Run!", "I'm sorry, Tom.", "Where's the café?", "Don't touch my crème brûlée.",
    "ÉCOLE école Ecole", "¿Qué pasa?", "¡Hola, señor Núñez!", "The [big] cat sat on the mat.",
    "It costs $12.50 (or 10€).", "naïve coöperation", "Straße STRASSE", "🙂 smile 🙂",
    "tab\tseparated\nlines", "ÀÉÎÕÜ àéîõü", "email@example.com #tag", "[start] hola [end]",
    "Καλημέρα ΚΌΣΜΕ", "Привет МИР", "日本語 テキスト", "x-ray, e-mail; well-known",
]
TARGETS = [f"[start] {s} [end]" for s in CORPUS]

ALPHABET = ("abcXYZ" "0123456789" + string.punctuation + "¿¡«»—…" + "éÉñÑüÜßẞçÇ" + "ΚκΣσς"
            + "日本" + "🙂👍🏽" + " \t\n\v\f\r\u00a0\u3000\u2028\x85" + "\u0301")


@pytest.fixture(scope="module")
def layers():
    """name -> (adapted TextVectorization, its vocabulary file's bytes)."""
    out = {}
    for name, standardize in KERAS_STANDARDIZE.items():
        layer = keras.layers.TextVectorization(standardize=standardize)
        layer.adapt(TARGETS if name in FRAMED else CORPUS)
        # As a user saves it: get_vocabulary() one token per line.
        out[name] = layer, "\n".join(layer.get_vocabulary()).encode("utf-8")
    return out


def ours(layers, name):
    layer, data = layers[name]
    tokens = layer.get_vocabulary()
    framed = "[start]" in tokens
    return WordTokenizer.from_vocabulary(data, standardize=name,
                                         start_token="[start]" if framed else None,
                                         end_token="[end]" if framed else None)


def keras_ids(layer, text):
    return [int(i) for i in np.asarray(layer(tf.constant([text])))[0]]


@st.composite
def texts(draw, vocabulary):
    """Vocabulary words (also upper-cased, with punctuation) and random text, mixed."""
    words = [w for w in vocabulary if w]
    parts = draw(st.lists(st.one_of(
        st.sampled_from(words), st.sampled_from(words).map(str.upper),
        st.sampled_from(words).map(str.title), st.text(ALPHABET, max_size=8)), max_size=8))
    seps = draw(st.lists(st.sampled_from([" ", "  ", "\t", "\n", ", ", ".", "\u00a0", ""]),
                         min_size=len(parts), max_size=len(parts)))
    return "".join(p + s for p, s in zip(parts, seps))


@pytest.mark.parametrize("name", list(KERAS_STANDARDIZE))
def test_ids_equal_text_vectorization(layers, name):
    layer, _ = layers[name]
    tok = ours(layers, name)
    assert tok.tokens == layer.get_vocabulary()
    assert tok.vocab_size == layer.vocabulary_size()

    @settings(max_examples=150, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(texts(tok.tokens))
    def check(text):
        ids = tok.encode(text)
        assert ids == keras_ids(layer, text), (text, tok.preprocess(text), tok.pieces(text))
        assert all(0 <= i < tok.vocab_size for i in ids)
        assert len(tok.pieces(text)) == len(ids) == len(tok.piece_spans(text))

    check()


@pytest.mark.parametrize("name", list(KERAS_STANDARDIZE))
def test_fixed_cases_equal_text_vectorization(layers, name):
    layer, _ = layers[name]
    tok = ours(layers, name)
    for text in ["", "   ", "ÉCOLE École école", "Where's the CAFÉ?", "¿Qué?", "[start] hola [end]",
                 "a\u00a0b a\u3000b a\x85b a\u2028b", "tab\tand\vvertical\fform\rfeed",
                 "Straße ΚΌΣΜΕ МИР", "🙂smile🙂 👍🏽", "x-ray e-mail", "$12.50 10€"]:
        assert tok.encode(text) == keras_ids(layer, text), text


def test_standardizations():
    tokens = ["", "[UNK]", "[start]", "[end]", "qué", "école", "É"]
    data = "\n".join(tokens).encode()
    text = "¿Qué? [start] ÉCOLE, École!"
    expected = {
        # ASCII-only lowercasing: "ÉCOLE" -> "École", "É" stays.
        "lower_and_strip_punctuation": "¿qué start École École",
        "lower": "¿qué? [start] École, École!",
        "strip_punctuation": "¿Qué start ÉCOLE École",
        "keras_seq2seq": "qué [start] École École",
        "keras_from_scratch": "¿qué [start] École École",  # "¿" is not in string.punctuation
        None: text,
    }
    for name, standardized in expected.items():
        tok = WordTokenizer.from_vocabulary(data, standardize=name)
        assert tok.preprocess(text) == standardized, name
        assert tok.pieces(text) == standardized.split()
    tok = WordTokenizer.from_vocabulary(data, standardize="keras_seq2seq",
                                        start_token="[start]", end_token="[end]")
    assert tok.encode(text) == [4, 2, 1, 1]  # "École" keeps its É: not a word of it


@pytest.fixture(scope="module")
def target():
    tokens = ["", "[UNK]", "[start]", "[end]", "el", "gato", "negro", "."]
    return WordTokenizer.from_vocabulary("\n".join(tokens).encode() + b"\n",
                                         standardize="keras_seq2seq",
                                         start_token="[start]", end_token="[end]")


def test_specials_encode_decode(target):
    assert (target.pad_id, target.unk_id, target.start_id, target.end_id) == (0, 1, 2, 3)
    assert target.vocab_size == 8
    ids = target.encode("El gato NEGRO perro", add_start=True, add_end=True)
    assert ids == [2, 4, 5, 6, 1, 3]
    assert target.decode(ids + [0, 0]) == "el gato negro [UNK]"
    assert target.decode([0, 2, 4, 3, 5]) == "el"
    assert target.encode("el gato negro", add_start=True, add_end=True, max_len=3) == [2, 4, 3]
    assert target.ids_to_pieces([0, 1, 2, 5]) == ["[PAD]", "[UNK]", "[start]", "gato"]
    assert target.lowercase and not target.digits_to_zero
    with pytest.raises(ValueError):
        target.decode([8])
    with pytest.raises(ValueError):
        target.id_to_piece(-1)


def test_piece_spans_index_the_standardized_text(target):
    text = "  ¿El  gato,\tNEGRO?  "
    pre = target.preprocess(text)
    spans = target.piece_spans(text)
    assert [pre[b:e] for b, e in spans] == target.pieces(text) == ["el", "gato", "negro"]


def test_no_start_or_end_token():
    source = WordTokenizer.from_vocabulary(b"\n[UNK]\nthe\ncat\n")
    assert source.start_id is None and source.end_id is None
    assert source.encode("The cat!") == [2, 3]
    for flag in ("add_start", "add_end"):
        with pytest.raises(TokenizerError, match="no (start|end) token"):
            source.encode("the cat", **{flag: True})
    assert source.decode([2, 3, 0]) == "the cat"


@pytest.mark.parametrize("name", list(KERAS_STANDARDIZE))
def test_spec_round_trip(layers, name):
    tok = ours(layers, name)
    spec = json.loads(json.dumps(tok.spec()))
    assert spec["kind"] == "word" and spec["standardize"] == name
    again = tokenizer_from_spec(spec, tok.model_bytes)
    assert isinstance(again, WordTokenizer) and again.spec() == tok.spec()
    assert again.tokens == tok.tokens
    for text in CORPUS:
        assert again.encode(text) == tok.encode(text)


@pytest.mark.parametrize("data,message", [
    (b"", "empty"),
    (b"[UNK]\nthe\n", "starts with the empty line"),
    (b"\nthe\ncat", "starts with the empty line"),
    (b"\n[UNK]\nthe\ncat\nthe", "line 5 repeats 'the' of line 3"),
    (b"\n[UNK]\n\xff\xfe", "not UTF-8"),
    ("\n[UNK]", "bytes"),
])
def test_bad_vocabulary(data, message):
    with pytest.raises(TokenizerError, match=message) as info:
        WordTokenizer.from_vocabulary(data, name="spa_vocab.txt")
    if isinstance(data, bytes) and data:
        assert "spa_vocab.txt" in str(info.value)


def test_vocabulary_caps():
    with pytest.raises(TokenizerError, match="more than the"):
        WordTokenizer.from_vocabulary(b"\n[UNK]\n" + b"a" * MAX_VOCAB_BYTES)
    lines = "\n[UNK]\n" + "\n".join(f"w{i}" for i in range(MAX_VOCAB_LINES))
    with pytest.raises(TokenizerError, match="262,14"):
        WordTokenizer.from_vocabulary(lines.encode())


def test_windows_line_ends_and_bom():
    tok = WordTokenizer.from_vocabulary("\ufeff\r\n[UNK]\r\nthe\r\ncat\r\n".encode())
    assert tok.tokens == ["", "[UNK]", "the", "cat"]
    assert tok.encode("the cat") == [2, 3]


def test_bad_special_tokens():
    data = b"\n[UNK]\nthe\n[start]"
    with pytest.raises(TokenizerError, match="end token '\\[end\\]' is not a word"):
        WordTokenizer.from_vocabulary(data, start_token="[start]", end_token="[end]")
    with pytest.raises(TokenizerError, match="start token '\\[UNK\\]'"):
        WordTokenizer.from_vocabulary(data, start_token="[UNK]")
    with pytest.raises(TokenizerError, match="must differ"):
        WordTokenizer.from_vocabulary(data, start_token="the", end_token="the")
    with pytest.raises(TokenizerError, match="standardize"):
        WordTokenizer.from_vocabulary(data, standardize="lower_and_strip")


@pytest.mark.parametrize("field,value,message", [
    ("standardize", "upper", "standardize"),
    ("pad_id", 2, "pad_id"),
    ("unk_id", 0, "unk_id"),
    ("start_id", 99, "start_id"),
    ("end_id", True, "end_id"),
    ("end_id", 2, "must differ"),  # the id of "[start]"
    ("vocab_size", 5, "vocab_size"),
    ("colour", "blue", "unknown field"),
])
def test_bad_spec(target, field, value, message):
    spec = dict(target.spec(), **{field: value})
    with pytest.raises(TokenizerError, match=message):
        tokenizer_from_spec(spec, target.model_bytes)
    spec = target.spec()
    del spec["standardize"]
    with pytest.raises(TokenizerError, match="missing field"):
        tokenizer_from_spec(spec, target.model_bytes)
    with pytest.raises(TokenizerError, match="not UTF-8"):
        tokenizer_from_spec(target.spec(), b"\xff" * 10)
