"""Tests for transformer.tokenizers.wordpiece; the oracle is tensorflow_text.BertTokenizer used as
the TF tutorial "Neural machine translation with a Transformer and Keras" uses it."""

import json
import re
import string

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer.tokenizers import tokenizer_from_spec
from transformer.tokenizers.base import TokenizerError
from transformer.tokenizers.wordpiece import RESERVED_TOKENS, WordPieceTokenizer

tf = pytest.importorskip("tensorflow")
tf_text = pytest.importorskip("tensorflow_text")

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Café déjà vu: the naïve señor ate crème brûlée in Zürich.",
    "I'm playing, you're played; they were PLAYING games!",
    "Straße, STRASSE and strasse are the same word.",
    "日本語のテキストと中文文本。",
    "Καλημέρα κόσμε, ΟΔΥΣΣΕΥΣ.",
    "Привет, мир! Как дела?",
    "e-mail x-ray well-known (parentheses) [brackets] {braces}",
    "Numbers 12,345.67 and 2023-12-31 at 10:45.",
    "tokenization tokenizer tokenized tokens token",
] * 3

ALPHABET = (string.ascii_letters + string.digits + string.punctuation + "¿¡«»—…“”‘’·"
            + "éÉèñÑüÜßẞçÇøØåÅæÆİıœŒ" + "ΚκΣσςΟΔΥ" + "ПриветМИР" + "日本語中文のテ\U00020000"
            + "ﬁﬂＡＢａｂ１²½™" + "🙂👍🏽" + " \t\n\v\f\r\u00a0\u3000\u2028\x85\x00\x01\x7f"
            + "\u0301\u0308\u200b\u200d\u00ad\ufeff\u0600")


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    """The tutorial's vocabulary: bert_vocab_from_dataset, written with print(token, file=f)."""
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as bert_vocab
    vocab = bert_vocab.bert_vocab_from_dataset(
        tf.data.Dataset.from_tensor_slices(CORPUS).batch(1000), vocab_size=400,
        reserved_tokens=list(RESERVED_TOKENS), bert_tokenizer_params=dict(lower_case=True),
        learn_params={})
    path = tmp_path_factory.mktemp("wordpiece") / "vocab.txt"
    with open(path, "w") as f:
        for token in vocab:
            print(token, file=f)
    return path


@pytest.fixture(scope="module")
def oracle(vocab_file):
    return tf_text.BertTokenizer(str(vocab_file), lower_case=True)


@pytest.fixture(scope="module")
def tok(vocab_file):
    return WordPieceTokenizer.from_vocabulary(vocab_file.read_bytes(), lower_case=True)


def oracle_ids(oracle, text):
    return oracle.tokenize(tf.constant([text])).merge_dims(-2, -1).numpy()[0].tolist()


def tutorial_detokenize(oracle, ids):
    """The tutorial's CustomTokenizer.detokenize: words, reserved tokens but [UNK] dropped."""
    words = oracle.detokenize(tf.ragged.constant([ids], dtype=tf.int64))
    bad = "|".join(re.escape(t) for t in RESERVED_TOKENS if t != "[UNK]")
    kept = tf.ragged.boolean_mask(words, ~tf.strings.regex_full_match(words, bad))
    return tf.strings.reduce_join(kept, separator=" ", axis=-1).numpy()[0].decode()


@st.composite
def texts(draw, words):
    parts = draw(st.lists(st.one_of(
        st.sampled_from(words), st.sampled_from(words).map(str.upper),
        st.text(ALPHABET, max_size=8)), max_size=8))
    seps = draw(st.lists(st.sampled_from([" ", "", "\t", ", ", "-", "\u3000"]),
                         min_size=len(parts), max_size=len(parts)))
    return "".join(p + s for p, s in zip(parts, seps))


def corpus_words():
    return sorted({w for s in CORPUS for w in s.split()})


def test_vocabulary_is_the_tutorials(tok, vocab_file):
    assert tok.tokens[:4] == list(RESERVED_TOKENS)
    assert (tok.pad_id, tok.unk_id, tok.start_id, tok.end_id) == (0, 1, 2, 3)
    assert tok.vocab_size == len(vocab_file.read_text().splitlines())
    assert any(t.startswith("##") for t in tok.tokens)


def test_ids_equal_bert_tokenizer(tok, oracle):
    @settings(max_examples=300, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(texts(corpus_words()))
    def check(text):
        ids = tok.encode(text)
        assert ids == oracle_ids(oracle, text), (text, tok.preprocess(text), tok.pieces(text))
        assert all(0 <= i < tok.vocab_size for i in ids)

    check()


def test_ids_equal_bert_tokenizer_any_text(tok, oracle):
    """Any assigned character (Python's Unicode tables; tensorflow_text's may be newer)."""
    alphabet = st.characters(exclude_categories=("Cs", "Co", "Cn"))

    @settings(max_examples=300, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.text(alphabet, max_size=20))
    def check(text):
        assert tok.encode(text) == oracle_ids(oracle, text), (text, tok.pieces(text))

    check()


@pytest.mark.parametrize("text", [
    "", "   ", "The quick BROWN fox!", "Straße STRASSE ﬁ Ａｂｃ ½", "日本語のテキスト中文",
    "ΟΔΥΣΣΕΥΣ Σίσυφος", "İstanbul ıi", "Café\u0301 na\u0308ive", "zero\u200bwidth soft\u00adhyphen",
    "ctrl\x01char\x7fdel", "a\u2028b a\u00a0b a\u3000b a\x85b", "🙂👍🏽 emoji",
    "playing" * 14, "é" * 51, "e" * 101, "x" * 100,  # the 100-byte word limit
    "tokenizationtokenization", "[START] [END] [PAD]",
])
def test_fixed_cases(tok, oracle, text):
    assert tok.encode(text) == oracle_ids(oracle, text)


def test_pieces_spans_and_unknown(tok):
    text = "Tokenization, CAFÉ naïve PLAYING qwzx☃!"
    pieces, spans, ids = tok.pieces(text), tok.piece_spans(text), tok.encode(text)
    assert len(pieces) == len(spans) == len(ids)
    assert "[UNK]" in pieces and tok.unk_id in ids
    pre = tok.preprocess(text)
    assert pre == "tokenization, cafe naive playing qwzx☃!"
    for (b, e), piece in zip(spans, pieces):
        assert piece == "[UNK]" or pre[b:e] == piece.removeprefix("##")
    assert pre[spans[pieces.index("[UNK]")][0]:spans[pieces.index("[UNK]")][1]] == "qwzx☃"
    assert tok.ids_to_pieces(ids) == pieces


def test_decode_is_the_tutorials(tok, oracle):
    for text in CORPUS[:10] + ["qwzx☃ tokenization!"]:
        ids = tok.encode(text, add_start=True, add_end=True)
        assert ids == [2] + oracle_ids(oracle, text) + [3]
        assert tok.decode(ids + [0, 0]) == tutorial_detokenize(oracle, ids), text
    rng = np.random.default_rng(0)
    for _ in range(50):  # model-like output: any ids, then [END]
        ids = [2] + rng.integers(4, tok.vocab_size, size=rng.integers(0, 12)).tolist() + [3]
        assert tok.decode(ids) == tutorial_detokenize(oracle, ids), ids
    assert tok.decode([2, 5, 3, 6, 7]) == tok.decode([2, 5, 3])


def test_lower_case_false(vocab_file):
    tok = WordPieceTokenizer.from_vocabulary(vocab_file.read_bytes(), lower_case=False)
    oracle = tf_text.BertTokenizer(str(vocab_file), lower_case=False)
    for text in ["The Café", "the café", "é" * 60, "ﬁ Ａ ß", "a\u00a0b", "x\u200by", "日本"]:
        assert tok.encode(text) == oracle_ids(oracle, text), text
    assert not tok.lowercase and tok.spec()["lower_case"] is False


def test_spec_round_trip(tok):
    spec = json.loads(json.dumps(tok.spec()))
    assert spec == {"kind": "wordpiece", "lower_case": True, "pad_id": 0, "unk_id": 1,
                    "start_id": 2, "end_id": 3, "vocab_size": tok.vocab_size}
    again = tokenizer_from_spec(spec, tok.model_bytes)
    assert isinstance(again, WordPieceTokenizer) and again.spec() == tok.spec()
    for text in CORPUS[:10]:
        assert again.encode(text, add_start=True, add_end=True) == \
            tok.encode(text, add_start=True, add_end=True)
        assert again.piece_spans(text) == tok.piece_spans(text)


@pytest.mark.parametrize("data,message", [
    (b"", "empty"),
    (b"[PAD]\n[UNK]\n[START]\nhello\n", "end token '\\[END\\]' is not in the vocabulary"),
    (b"[UNK]\n[START]\n[END]\nhello\n", "pad token"),
    (b"[PAD]\n[UNK]\n[START]\n[END]\nhi\nhi\n", "line 6 repeats 'hi' of line 5"),
    (b"[PAD]\n[UNK]\n[START]\n[END]\n\xc3(", "not UTF-8"),
])
def test_bad_vocabulary(data, message):
    with pytest.raises(TokenizerError, match=message) as info:
        WordPieceTokenizer.from_vocabulary(data, name="en_vocab.txt")
    assert "en_vocab.txt" in str(info.value)


@pytest.mark.parametrize("field,value,message", [
    ("lower_case", 1, "lower_case"),
    ("pad_id", 2, "must differ"),
    ("unk_id", -1, "unk_id"),
    ("end_id", None, "end_id"),
    ("vocab_size", 3, "vocab_size"),
    ("vocab_size", 10**9, "vocab_size"),
    ("max_bytes_per_word", 100, "unknown field"),
])
def test_bad_spec(tok, field, value, message):
    spec = dict(tok.spec(), **{field: value})
    with pytest.raises(TokenizerError, match=message):
        tokenizer_from_spec(spec, tok.model_bytes)
    spec = tok.spec()
    del spec["lower_case"]
    with pytest.raises(TokenizerError, match="missing field"):
        tokenizer_from_spec(spec, tok.model_bytes)


def test_spans_of_pieces_past_multibyte_characters():
    tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[START]", "[END]", "caf", "##é", "##s", "日"],
                             lower_case=False)
    text = "日 cafés ☃☃ cafés"
    pre = tok.preprocess(text)
    assert tok.pieces(text) == ["日", "caf", "##é", "##s", "[UNK]", "caf", "##é", "##s"]
    assert [pre[b:e] for b, e in tok.piece_spans(text)] == \
        ["日", "caf", "é", "s", "☃☃", "caf", "é", "s"]
