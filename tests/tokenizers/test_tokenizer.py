"""Tests for transformer.tokenizers.base (the interface and from_spec) and transformer.tokenizers.bpemb
(offline: no BPEmb download is ever needed)."""

import io
import json
import time

import numpy as np
import pytest
import sentencepiece as spm
from bpemb import BPEmb

from transformer.tokenizers import KIND_CLASSES, tokenizer_from_spec
from transformer.tokenizers.base import Tokenizer, TokenizerError, as_id_list, byte_to_char_spans
from transformer.tokenizers.bpemb import BPEmbTokenizer

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "March 5, 2021 was a Friday; April 17, 1999 was a Saturday.",
    "Café déjà vu: the naïve señor ate crème brûlée in Zürich.",
    "Meeting at 10:45 on 2023-12-31 with 3 people.",
    "Hello world, hello tokenizer, hello BPEmb!",
    "She sells sea shells by the sea shore in 1987.",
] * 10

SAMPLES = [
    "The quick brown fox.",
    "March 5, 2021",
    "Café déjà vu, crème brûlée",
    "Meeting on 2023-12-31 at 10:45",
    "Zürich 1999, Señor",
    "",
]

FLAGS = [(True, True), (True, False), (False, True), (False, False)]


@pytest.fixture(scope="module")
def trained():
    return BPEmbTokenizer.train(CORPUS, 120, lowercase=True, digits_to_zero=False)


@pytest.fixture(scope="module")
def bpemb_cache(tmp_path_factory):
    """A cache folder holding a model with BPEmb's layout at BPEmb's model_tpl path."""
    cache = tmp_path_factory.mktemp("bpemb_cache")
    writer = io.BytesIO()
    # sentencepiece's default ids are BPEmb's: <unk>=0, <s>=1, </s>=2, no pad.
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([BPEmb.preprocess(t) for t in CORPUS]), model_writer=writer,
        model_type="bpe", vocab_size=1000, hard_vocab_limit=False, character_coverage=1.0,
        num_threads=1, minloglevel=2)
    path = cache / BPEmb.model_tpl.format(lang="en", vs=1000)
    path.parent.mkdir(parents=True)
    path.write_bytes(writer.getvalue())
    return cache, path


@pytest.fixture(scope="module")
def standard(bpemb_cache):
    cache, _ = bpemb_cache
    return BPEmbTokenizer.from_bpemb("en", 1000, cache_dir=cache)


# ------------------------------------------------------------------ trained models

def test_trained_special_ids(trained):
    assert (trained.pad_id, trained.unk_id, trained.start_id, trained.end_id) == (0, 1, 2, 3)
    assert [trained.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert trained.vocab_size == trained.bpemb.spm.get_piece_size()
    assert trained.kind == "trained" and trained.lang is None and trained.vs is None
    assert trained.lowercase is True and trained.digits_to_zero is False
    for bad in (-1, trained.vocab_size):
        with pytest.raises(ValueError):
            trained.id_to_piece(bad)


@pytest.mark.parametrize("lowercase,digits_to_zero", FLAGS)
def test_round_trip(lowercase, digits_to_zero):
    tok = BPEmbTokenizer.train(iter(CORPUS), 150, lowercase=lowercase, digits_to_zero=digits_to_zero)
    assert (tok.lowercase, tok.digits_to_zero) == (lowercase, digits_to_zero)
    for text in SAMPLES:
        ids = tok.encode(text)
        assert tok.unk_id not in ids, text
        assert tok.decode(ids) == tok.preprocess(text)
        framed = tok.encode(text, add_start=True, add_end=True)
        padded = np.array(framed + [tok.pad_id] * 3, dtype=np.int32)
        assert tok.decode(padded) == tok.preprocess(text)
        assert tok.ids_to_pieces(ids) == tok.pieces(text)


def test_preprocess_options_change_pieces():
    both = BPEmbTokenizer.train(CORPUS, 120, lowercase=True, digits_to_zero=True)
    neither = BPEmbTokenizer.train(CORPUS, 120, lowercase=False, digits_to_zero=False)
    text = "March 5, 2021"
    assert both.preprocess(text) == "march 0, 0000"
    assert neither.preprocess(text) == text
    assert "".join(both.pieces(text)).replace("▁", " ").strip() == "march 0, 0000"
    assert "".join(neither.pieces(text)).replace("▁", " ").strip() == text
    assert both.decode(both.encode(text)) == "march 0, 0000"


def test_split_digits():
    split = BPEmbTokenizer.train(CORPUS, 200)
    joined = BPEmbTokenizer.train(CORPUS, 200, split_digits=False)
    assert all(len(p.strip("▁")) == 1 for p in split.pieces("1999 2021") if p.strip("▁").isdigit())
    assert any(len(p.strip("▁")) > 1 and p.strip("▁").isdigit() for p in joined.pieces("1999"))


def test_encode_start_end_and_max_len(trained):
    text = "The quick brown fox jumps over the lazy dog."
    plain = trained.encode(text)
    assert len(plain) > 6
    framed = trained.encode(text, add_start=True, add_end=True)
    assert framed == [trained.start_id] + plain + [trained.end_id]
    assert trained.encode(text, add_start=True) == [trained.start_id] + plain
    assert trained.encode(text, add_end=True) == plain + [trained.end_id]
    cut = trained.encode(text, add_start=True, add_end=True, max_len=5)
    assert cut == [trained.start_id] + plain[:3] + [trained.end_id]
    assert trained.encode(text, max_len=4) == plain[:4]
    assert trained.encode(text, add_start=True, add_end=True, max_len=2) == [2, 3]
    assert trained.encode(text, max_len=1000) == plain
    with pytest.raises(ValueError):
        trained.encode(text, add_start=True, add_end=True, max_len=1)


def test_decode_specials_and_unknown(trained):
    hello = trained.encode("hello world")
    ids = [trained.pad_id, trained.start_id] + hello + [trained.end_id] + trained.encode("fox")
    assert trained.decode(ids) == "hello world"
    assert trained.decode([trained.end_id] + hello) == ""
    assert trained.decode([]) == ""
    # "@" never occurs in the corpus.
    ids = trained.encode("hello @ world")
    assert trained.unk_id in ids
    assert trained.decode(ids) == "hello  ⁇  world"
    assert "<unk>" in trained.ids_to_pieces(ids)
    with pytest.raises(ValueError):
        trained.decode([trained.vocab_size])
    with pytest.raises(ValueError):
        trained.decode(np.zeros((2, 2), dtype=int))


def test_train_is_deterministic():
    a = BPEmbTokenizer.train(CORPUS, 120, seed=0)
    b = BPEmbTokenizer.train(list(CORPUS), 120, seed=0)
    assert a.model_bytes == b.model_bytes


def test_train_rejects_bad_input():
    with pytest.raises(TokenizerError, match="empty"):
        BPEmbTokenizer.train([], 100)
    with pytest.raises(TokenizerError, match="vocab_size"):
        BPEmbTokenizer.train(CORPUS, 2)


# ------------------------------------------------------------------ spec round trip

def test_from_spec_gives_identical_ids(trained):
    spec = json.loads(json.dumps(trained.spec()))
    again = tokenizer_from_spec(spec, trained.model_bytes)
    assert again.spec() == trained.spec()
    for text in SAMPLES:
        assert again.encode(text, add_start=True, add_end=True) == \
            trained.encode(text, add_start=True, add_end=True)
        assert again.piece_spans(text) == trained.piece_spans(text)


@pytest.mark.parametrize("model_bytes", [b"", b"definitely not a sentencepiece model", "text"])
def test_from_spec_bad_bytes(trained, model_bytes):
    with pytest.raises(TokenizerError, match="model_bytes"):
        tokenizer_from_spec(trained.spec(), model_bytes)


def test_from_spec_truncated_bytes(trained):
    with pytest.raises(TokenizerError):
        tokenizer_from_spec(trained.spec(), trained.model_bytes[: len(trained.model_bytes) // 3])


@pytest.mark.parametrize("field,value", [
    ("vocab_size", "wrong"),  # replaced by vocab_size + 1 below
    ("vocab_size", 10**6),
    ("kind", "sentencepiece"),
    ("kind", None),
    ("lowercase", "yes"),
    ("digits_to_zero", 1),
    ("pad_id", True),
    ("end_id", -1),
    ("unk_id", 3),
    ("lang", "en"),
    ("vs", 1000),
])
def test_from_spec_bad_field(trained, field, value):
    spec = trained.spec()
    spec[field] = spec["vocab_size"] + 1 if value == "wrong" else value
    with pytest.raises(TokenizerError, match=field):
        tokenizer_from_spec(spec, trained.model_bytes)


def test_from_spec_unknown_and_missing_fields(trained):
    spec = dict(trained.spec(), colour="blue")
    with pytest.raises(TokenizerError, match="colour"):
        tokenizer_from_spec(spec, trained.model_bytes)
    spec = trained.spec()
    del spec["digits_to_zero"]
    with pytest.raises(TokenizerError, match="digits_to_zero"):
        tokenizer_from_spec(spec, trained.model_bytes)
    with pytest.raises(TokenizerError, match="spec"):
        tokenizer_from_spec([("kind", "trained")], trained.model_bytes)


# ------------------------------------------------------------------ standard BPEmb models

def test_bpemb_from_cache(bpemb_cache, standard):
    cache, path = bpemb_cache
    n = standard.bpemb.spm.get_piece_size()
    assert standard.kind == "bpemb" and standard.lang == "en" and standard.vs == 1000
    assert standard.lowercase and standard.digits_to_zero
    assert (standard.unk_id, standard.start_id, standard.end_id) == (0, 1, 2)
    assert standard.pad_id == n and standard.vocab_size == n + 1
    assert standard.id_to_piece(standard.pad_id) == "<pad>"
    assert [standard.id_to_piece(i) for i in range(3)] == ["<unk>", "<s>", "</s>"]
    assert standard.model_bytes == path.read_bytes()
    assert standard.bpemb.model_file == path
    assert sorted(p.name for p in cache.rglob("*")) == ["en", path.name]

    ids = standard.encode("March 5, 2021", add_start=True, add_end=True)
    assert ids == standard.encode("march 0, 0000", add_start=True, add_end=True)
    assert standard.decode(ids + [standard.pad_id] * 2) == "march 0, 0000"
    assert standard.decode([standard.pad_id, *ids]) == "march 0, 0000"


def test_bpemb_spec_round_trip(standard):
    again = tokenizer_from_spec(json.loads(json.dumps(standard.spec())), standard.model_bytes)
    assert again.spec() == standard.spec()
    for text in SAMPLES:
        assert again.encode(text, add_end=True) == standard.encode(text, add_end=True)
    spec = dict(standard.spec(), vocab_size=standard.vocab_size - 1)
    with pytest.raises(TokenizerError, match="vocab_size"):
        tokenizer_from_spec(spec, standard.model_bytes)


def test_bpemb_missing_model_offline(tmp_path, monkeypatch):
    # Reserved .invalid host (RFC 2606): BPEmb's real download path fails even with network.
    monkeypatch.setattr(BPEmb, "base_url", "https://bpemb.invalid/bpemb/")
    cache = tmp_path / "empty_cache"
    cache.mkdir()
    start = time.monotonic()
    with pytest.raises(TokenizerError) as info:
        BPEmbTokenizer.from_bpemb("en", 1000, cache_dir=cache)
    assert time.monotonic() - start < 5, "BPEmb's failing download attempt is slow here"
    message = str(info.value)
    assert str(cache / "en" / "en.wiki.bpe.vs1000.model") in message
    assert f"cache folder {cache}" in message
    assert "Traceback" not in message and "urllib3" not in message
    assert list(cache.iterdir()) == []


def test_bpemb_bad_lang_or_vs(tmp_path):
    with pytest.raises(TokenizerError, match="lang"):
        BPEmbTokenizer.from_bpemb("klingon", 1000, cache_dir=tmp_path)
    with pytest.raises(TokenizerError, match="vs"):
        BPEmbTokenizer.from_bpemb("en", 1234, cache_dir=tmp_path)


def test_bpemb_corrupt_cached_model(tmp_path):
    path = tmp_path / BPEmb.model_tpl.format(lang="en", vs=1000)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage")
    with pytest.raises(TokenizerError, match="cannot load"):
        BPEmbTokenizer.from_bpemb("en", 1000, cache_dir=tmp_path)


# ------------------------------------------------------------------ piece spans

@pytest.mark.parametrize("which", ["trained", "standard"])
def test_piece_spans_cover_text(which, request):
    tok = request.getfixturevalue(which)
    raw = "Café déjà vu on March 5, 2021 in Zürich"
    text = tok.preprocess(raw)
    spans = tok.piece_spans(raw)
    pieces = tok.pieces(raw)
    assert len(spans) == len(pieces) > 5
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    for (b, e), piece in zip(spans, pieces):
        assert text[b:e].strip() == piece.replace("▁", " ").strip()


def test_byte_to_char_spans():
    text = "é a€"
    assert byte_to_char_spans(text, [(0, 2), (2, 3), (3, 4), (4, 7)]) == \
        [(0, 1), (1, 2), (2, 3), (3, 4)]


# ------------------------------------------------------------------ the interface, from_spec

def test_bpemb_kinds_are_tokenizers(trained, standard):
    for tok in (trained, standard):
        assert isinstance(tok, BPEmbTokenizer) and isinstance(tok, Tokenizer)
        again = tokenizer_from_spec(tok.spec(), tok.model_bytes)
        assert type(again) is BPEmbTokenizer
    assert set(KIND_CLASSES) == {"bpemb", "trained", "word", "wordpiece", "marian",
                                 "huggingface", "m2m100"}


def test_from_spec_dispatches_and_checks_the_kind_fields(trained):
    word = tokenizer_from_spec({"kind": "word", "standardize": None, "pad_id": 0, "unk_id": 1,
                                "start_id": None, "end_id": None, "vocab_size": 3},
                               b"\n[UNK]\nhello")
    assert type(word).__name__ == "WordTokenizer" and word.encode("hello") == [2]
    # A BPEmb spec with another kind is refused by that kind's field list.
    with pytest.raises(TokenizerError, match="spec of kind 'word': unknown field"):
        tokenizer_from_spec(dict(trained.spec(), kind="word"), trained.model_bytes)


def test_encode_without_start_token_is_a_clear_error():
    word = tokenizer_from_spec({"kind": "word", "standardize": None, "pad_id": 0, "unk_id": 1,
                                "start_id": None, "end_id": None, "vocab_size": 3},
                               b"\n[UNK]\nhello")
    with pytest.raises(TokenizerError, match="has no start token"):
        word.encode("hello", add_start=True)


def _new_kind_tokenizers():
    """(source, target) pairs of the word, wordpiece and marian kinds, from tiny files."""
    from transformer.tokenizers.marian_pieces import MarianTokenizer
    from transformer.tokenizers.word import WordTokenizer
    from transformer.tokenizers.wordpiece import WordPieceTokenizer

    word_source = WordTokenizer.from_vocabulary(b"\n[UNK]\nthe\nblack\ncat")
    word_target = WordTokenizer.from_vocabulary(
        "\n[UNK]\n[start]\n[end]\nle\nchat\nnoir".encode(), standardize="keras_seq2seq",
        start_token="[start]", end_token="[end]")
    pieces = "[PAD] [UNK] [START] [END] the black cat le chat noir ##s".split()
    wordpiece = WordPieceTokenizer(pieces)
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["the black cat", "le chat noir"] * 5), model_writer=writer,
        vocab_size=20, hard_vocab_limit=False, num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=writer.getvalue())
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    vocab["<pad>"] = len(vocab)
    marian = [MarianTokenizer.from_files(writer.getvalue(), json.dumps(vocab).encode(), side)
              for side in ("source", "target")]
    return {"word": (word_source, word_target), "wordpiece": (wordpiece, wordpiece),
            "marian": tuple(marian)}


@pytest.mark.parametrize("kind", ["word", "wordpiece", "marian"])
def test_every_kind_goes_through_a_checkpoint(kind):
    import keras

    from transformer import Transformer, TransformerConfig
    from transformer.checkpoint.format import checkpoint_bytes
    from transformer.inference.session import load_checkpoint

    source, target = _new_kind_tokenizers()[kind]
    config = TransformerConfig(
        src_vocab_size=source.vocab_size, tgt_vocab_size=target.vocab_size, d_model=8,
        num_heads=2, dff=16, num_encoder_layers=1, num_decoder_layers=1, max_len=16,
        pad_id=target.pad_id, start_id=target.start_id, end_id=target.end_id)
    keras.utils.set_random_seed(0)
    model = Transformer(config).build_weights()
    ckpt = load_checkpoint(checkpoint_bytes(model, source, target, {"name": kind}))
    for ours, loaded in ((source, ckpt.source_tokenizer), (target, ckpt.target_tokenizer)):
        assert type(loaded) is type(ours) and loaded.spec() == ours.spec()
        assert loaded.model_bytes == ours.model_bytes
        assert loaded.encode("The black cat") == ours.encode("The black cat")


def test_first_not_text_finds_the_first_piece_that_is_no_utf8_text():
    from transformer.tokenizers.base import first_not_text

    pieces = [f"▁w{i}" for i in range(60_000)]
    assert first_not_text(pieces) is None
    assert first_not_text(pieces[:10] + ["a\ud800b"] + pieces[10:] + ["\udfff"]) == 10
    assert first_not_text(["a", b"bytes", "c"]) == 1  # not a str at all
    assert first_not_text([]) is None


def _outcome(call):
    try:
        return call()
    except (ValueError, TypeError) as err:
        return type(err).__name__, str(err)


@pytest.mark.parametrize("ids", [  # pad 0, start 2, end 3
    [5, 6, 7], [], np.array([], dtype=np.int64), np.arange(10, dtype=np.uint8),
    np.array([4, 3, 2**63 + 5], dtype=np.uint64),  # past the end id: never checked
    [4, -1, 3], [4, 10**30, 3], [4, 3, -1], np.array([1, 0, 4, 2, 5, 3, 6]),
    [1.0, 2.0], np.array([True, False]), [4, "5"], [[1, 2]], np.int32(4), [10**9],
])
def test_ids_are_checked_at_once_as_they_were_one_by_one(trained, ids):
    """An array of integers is checked with NumPy (decode, ids_to_pieces): the same ids kept,
    the same error for the first bad id before the first end id, and anything else id by id."""
    assert (trained.pad_id, trained.start_id, trained.end_id) == (0, 2, 3)
    assert _outcome(lambda: trained._kept_ids(ids)) == _outcome(
        lambda: trained._kept_one_by_one(as_id_list(ids)))
    assert _outcome(lambda: trained._checked_ids(ids)) == _outcome(
        lambda: [trained._check_id(i) for i in as_id_list(ids)])
