"""Tests for transformer.core.text and for text as a browser can send it: any Python string (lone
surrogates, control characters, NUL, noncharacters, very long text) through every public text
entry point of an OpenedModel and of every tokenizer kind gives a result (finite numbers) or a
ValueError with a message, never anything else."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.core.text import MAX_TEXT_CHARS, REPLACEMENT, clean_text, text_notes
from transformer.tokenizers.base import Tokenizer
from transformer.tokenizers.marian_pieces import MarianTokenizer
from transformer.tokenizers.word import WordTokenizer
from transformer.tokenizers.wordpiece import WordPieceTokenizer

# Characters that broke or could break a tokenizer: surrogates (lone, and a pair as two code
# units), controls, NUL, noncharacters, BOM, separators, combining marks, SentencePiece's "▁",
# characters NFKC expands, a Marian language code's brackets, and the dates model's own words.
NASTY = ["\ud800", "\udfff", "\ud83d\ude00", "\x00", "\x01", "\x1f", "\x7f", "\x85", "\x9f",
         "\ufffe", "\uffff", "\ufeff", "\U0010ffff", "\u2028", "\u200b", "\u0301", "\u0345",
         "▁", "ﬁ", "ﷺ", "İ", "ß", "Ａ", "½", "𝔘", "東", ">>", "<<", "<s>", "</s>", "<unk>",
         "[UNK]", "##", " ", "\t", "\n", "\r", "0", "5", "March", "friday", ",", "2021", "😀"]
# Every code point (surrogates included), with surrogates, control and format characters and
# ASCII drawn often (a surrogate is 2,048 of 1.1 million code points: rarely drawn otherwise).
ANY_CHARACTER = st.one_of(st.characters(exclude_categories=()), st.characters(categories=["Cs"]),
                          st.characters(categories=["Cc", "Cf", "Zl", "Zp"]),
                          st.characters(max_codepoint=0x7F))
TEXTS = st.one_of(
    st.text(ANY_CHARACTER, max_size=40),
    st.lists(st.sampled_from(NASTY), max_size=30).map("".join),
    st.lists(st.one_of(st.sampled_from(NASTY), ANY_CHARACTER), max_size=30).map("".join),
)
LONG = "5 March 2021 \ud800 " * (MAX_TEXT_CHARS // 10)  # longer than MAX_TEXT_CHARS
SETTINGS = dict(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def is_text(value) -> bool:
    return isinstance(value, str) and clean_text(value)[0] == value[:MAX_TEXT_CHARS]


def check_tokenizer(tok: Tokenizer, text: str) -> None:
    """Every text method of ``tok`` on ``text``: consistent results, or a ValueError."""
    try:
        cleaned = clean_text(text)[0]
        pre = tok.preprocess(text)
        assert pre == tok.preprocess(cleaned)  # the cleaning happens in the one place
        pieces, spans, ids = tok.pieces(text), tok.piece_spans(text), tok.encode(text)
        assert len(pieces) == len(spans) == len(ids)
        assert all(is_text(p) for p in pieces)
        assert all(0 <= b <= e <= len(pre) for b, e in spans)
        assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids)
        assert all(is_text(p) for p in tok.ids_to_pieces(ids))
        assert is_text(tok.decode(ids))
        if tok.start_id is not None and tok.end_id is not None:
            framed = tok.encode(text, add_start=True, add_end=True, max_len=8)
            assert framed[0] == tok.start_id and framed[-1] == tok.end_id and len(framed) <= 8
    except ValueError as err:
        assert str(err)


def check_finite(value) -> None:
    array = np.asarray(value)
    if array.dtype.kind == "f":
        assert np.isfinite(array).all()


# ------------------------------------------------------------------ transformer.core.text

def test_clean_text_replaces_lone_surrogates_one_for_one():
    text = "a\ud800b\udfffc\ud83d\ude00"
    cleaned, notes = clean_text(text)
    assert cleaned == f"a{REPLACEMENT}b{REPLACEMENT}c{REPLACEMENT}{REPLACEMENT}"
    assert len(cleaned) == len(text)
    cleaned.encode("utf-8")
    assert notes == ["4 characters that cannot be encoded as UTF-8 (lone surrogates) were "
                     "replaced with \ufffd."]
    assert text_notes("x\ud800") == ["1 character that cannot be encoded as UTF-8 (lone "
                                     "surrogates) was replaced with \ufffd."]


def test_clean_text_leaves_valid_text_alone():
    for text in ("", "Friday, March 5, 2021", "\x00\x01\x7f\ufffe\uffff\ufeff", "😀 東京", "▁"):
        assert clean_text(text) == (text, [])
        assert text_notes(text) == []


def test_clean_text_cuts_a_very_long_text_and_says_so():
    cleaned, notes = clean_text(LONG)
    assert cleaned == LONG[:MAX_TEXT_CHARS].replace("\ud800", REPLACEMENT)
    assert notes[0] == (f"The text has {len(LONG):,} characters; only its first "
                        f"{MAX_TEXT_CHARS:,} are read.")
    assert "lone surrogates" in notes[1]


def test_clean_text_refuses_what_is_not_text():
    with pytest.raises(TypeError, match="text must be str, got bytes"):
        clean_text(b"abc")


# ------------------------------------------------------------------ the bundled checkpoint

@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint(DEFAULT_CHECKPOINT)


def test_a_lone_surrogate_reaches_every_entry_point_as_u_fffd(ckpt):
    """The spans of the cleaned text are offsets into the text as typed."""
    text, cleaned = "5 March\ud800 2021", f"5 March{REPLACEMENT} 2021"
    src = ckpt.source_tokenizer
    assert src.piece_spans(text) == src.piece_spans(cleaned)
    assert src.encode(text) == src.encode(cleaned)
    assert len(src.preprocess(text)) == len(text)
    assert ckpt.translate(text).text == ckpt.translate(cleaned).text
    assert ckpt.pieces_cut(text, "target") == ckpt.pieces_cut(cleaned, "target")
    maps = ckpt.attention(text, "2021-03-05\ud800")
    assert maps["source_tokens"] == ckpt.attention(cleaned, "2021-03-05")["source_tokens"]
    assert Tokenizer.text_notes(text) == text_notes(text) != []


@settings(max_examples=20, **SETTINGS)
@given(source=TEXTS, target=TEXTS)
@example(source="\ud800", target="\ud800")
@example(source="a\x00b\ufffe\uffff", target="\x00")
@example(source=LONG, target=LONG)
@example(source="", target="")
def test_every_checkpoint_entry_point_takes_any_text(ckpt, source, target):
    for text in (source, target):
        check_tokenizer(ckpt.source_tokenizer, text)
        check_tokenizer(ckpt.target_tokenizer, text)
    try:
        assert ckpt.pieces_cut(source, "source") >= 0
        assert ckpt.pieces_cut(target, "target") >= 0
        ids = ckpt.encode_source(source)
        assert len(ids) <= ckpt.source_len
        assert all(0 <= i < ckpt.config.src_vocab_size for i in ids)
        result = ckpt.translate(source)
        assert is_text(result.text)
        for step in result.steps:
            assert np.isfinite(step.log_prob)
            check_finite([p for _, _, p in step.top_k])
            check_finite(step.cross)
        for given_target in (None, target):
            maps = ckpt.attention(source, given_target)
            for value in maps.values():
                check_finite(value)
            assert all(is_text(t) for t in maps["source_tokens"] + maps["output_tokens"])
    except ValueError as err:
        assert str(err)


# ------------------------------------------------------------------ the other tokenizer kinds

WORDS = ["the", "cat", "sat", "on", "mat", "friday", "march", "é", "東", "[start]", "[end]"]


@pytest.fixture(scope="module")
def word():
    vocab = "\n".join(["", "[UNK]"] + WORDS).encode()
    return WordTokenizer.from_vocabulary(vocab, standardize="keras_seq2seq",
                                         start_token="[start]", end_token="[end]")


@pytest.fixture(scope="module")
def wordpiece():
    pieces = ["[PAD]", "[UNK]", "[START]", "[END]", *"abcdefghijklmnopqrstuvwxyz0123456789",
              *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"), "the", ",",
              ".", "!", "?", "東", "é"]
    return WordPieceTokenizer.from_vocabulary("\n".join(pieces).encode())


@pytest.fixture(scope="module")
def marian():
    """Both sides of the tiny opus-mt fixture's tokenizer (its source.spm is a real one)."""
    folder = Path(__file__).resolve().parents[1] / "fixtures" / "marian"
    vocab = (folder / "vocab.json").read_bytes()
    return [MarianTokenizer.from_files((folder / f"{side}.spm").read_bytes(), vocab, side)
            for side in ("source", "target")]


@settings(max_examples=150, **SETTINGS)
@given(text=TEXTS)
@example(text="\ud800")
@example(text=">>fr<<\ud800 ▁")
@example(text=LONG)
def test_word_wordpiece_and_marian_tokenizers_take_any_text(word, wordpiece, marian, text):
    for tok in [word, wordpiece, *marian]:
        check_tokenizer(tok, text)


@settings(max_examples=60, **SETTINGS)
@given(ids=st.lists(st.integers(-3, 300), max_size=20))
def test_decode_takes_any_ids(ckpt, word, wordpiece, marian, ids):
    for tok in (ckpt.source_tokenizer, ckpt.target_tokenizer, word, wordpiece, *marian):
        try:
            assert is_text(tok.decode(ids))
            assert all(is_text(p) for p in tok.ids_to_pieces(ids))
        except ValueError as err:
            assert "out of range" in str(err)
