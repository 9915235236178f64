"""Tests for transformer.tokenizers.marian_pieces: tiny SentencePiece models trained here and a vocab.json
laid out as opus-mt's ("</s>" = 0, "<unk>" = 1, the pieces, "<pad>" last)."""

import importlib.util
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm

from transformer.tokenizers import tokenizer_from_spec
from transformer.tokenizers.base import TokenizerError
from transformer.tokenizers.marian_pieces import MarianTokenizer
from transformer.tokenizers.spm_vocab import MAX_SPM_BYTES, MAX_VOCAB_JSON_BYTES, parse_vocab_json

SOURCE = [
    "The black cat sleeps on the mat.", "I like green apples and red cherries.",
    "Where is the railway station?", "My brother reads a book every evening.",
    "The weather is nice today, isn't it?", "We are going to the beach tomorrow.",
]
TARGET = [
    "Le chat noir dort sur le tapis.", "J'aime les pommes vertes et les cerises rouges.",
    "Où est la gare ?", "Mon frère lit un livre chaque soir.",
    "Il fait beau aujourd'hui, n'est-ce pas ?", "Nous allons à la plage demain.",
]


def train_spm(sentences, vocab_size):
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences * 5), model_writer=writer, model_type="unigram",
        vocab_size=vocab_size, hard_vocab_limit=False, character_coverage=1.0, num_threads=1,
        minloglevel=2)
    return writer.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """source.spm, target.spm, vocab.json (bytes), the folder holding them, and a piece of the
    source model that vocab.json lacks (it must become <unk>)."""
    source_spm, target_spm = train_spm(SOURCE, 80), train_spm(TARGET, 80)
    left_out = max(spm.SentencePieceProcessor(model_proto=source_spm).encode(
        "The black cat", out_type=str), key=len)
    pieces = []
    for model in (source_spm, target_spm):
        sp = spm.SentencePieceProcessor(model_proto=model)
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    special = {"</s>", "<unk>", "<s>", "<pad>", left_out}
    words = [p for p in dict.fromkeys(pieces) if p not in special]
    vocab = {"</s>": 0, "<unk>": 1, ">>fr<<": 2, **{p: i + 3 for i, p in enumerate(words)}}
    vocab["<pad>"] = len(vocab)
    vocab_json = json.dumps(vocab, indent=2, ensure_ascii=False).encode()
    folder = tmp_path_factory.mktemp("opus-mt-tiny")
    for name, data in (("source.spm", source_spm), ("target.spm", target_spm),
                       ("vocab.json", vocab_json)):
        (folder / name).write_bytes(data)
    return source_spm, target_spm, vocab_json, folder, left_out


@pytest.fixture(scope="module")
def source(files):
    return MarianTokenizer.from_files(files[0], files[2], "source")


@pytest.fixture(scope="module")
def target(files):
    return MarianTokenizer.from_files(files[1], files[2], "target")


def test_special_ids(source, target, files):
    vocab = json.loads(files[2])
    for tok in (source, target):
        assert tok.end_id == 0 and tok.unk_id == 1
        assert tok.pad_id == tok.start_id == len(vocab) - 1 == tok.vocab_size - 1
        assert tok.ids_to_pieces([0, 1, tok.pad_id]) == ["</s>", "<unk>", "<pad>"]
        assert tok.kind == "marian" and not tok.lowercase and not tok.digits_to_zero
    assert (source.side, target.side) == ("source", "target")


def test_pieces_and_ids(source, target, files):
    vocab = json.loads(files[2])
    for tok, model, sentences in ((source, files[0], SOURCE), (target, files[1], TARGET)):
        sp = spm.SentencePieceProcessor(model_proto=model)
        for text in sentences + ["Ünïcödé ☃ text", ""]:
            pieces = sp.encode(text, out_type=str)
            assert tok.pieces(text) == pieces
            ids = tok.encode(text, add_end=True)
            assert ids == [vocab.get(p, vocab["<unk>"]) for p in pieces] + [vocab["</s>"]]
            assert all(0 <= i < tok.vocab_size for i in ids)
    pieces = source.pieces("The black cat")
    assert files[4] in pieces and files[4] not in vocab
    assert source.encode("The black cat")[pieces.index(files[4])] == source.unk_id


def test_no_start_token_on_the_source(source):
    ids = source.encode("The black cat.", add_end=True, max_len=3)
    assert len(ids) == 3 and ids[-1] == source.end_id and source.pad_id not in ids


def test_decode(target):
    for text in TARGET:
        ids = target.encode(text, add_end=True)
        assert target.unk_id not in ids
        sp = target.sp
        assert target.decode([target.start_id] + ids + [target.pad_id] * 3) == \
            sp.decode_pieces(sp.encode(text, out_type=str)).strip()
    ids = target.encode("Le chat ☃ noir", add_end=True)
    assert target.unk_id in ids
    # <unk> is a special, dropped as skip_special_tokens drops it: its "▁" stays.
    assert target.decode(ids) == "Le chat  noir"
    assert target.decode([target.end_id] + ids) == ""


def test_language_code(target, files):
    vocab = json.loads(files[2])
    text = ">>fr<< Le chat noir"
    assert target.pieces(text)[0] == ">>fr<<"
    assert target.pieces(text)[1:] == target.sp.encode(" Le chat noir", out_type=str)
    assert target.encode(text)[0] == vocab[">>fr<<"]
    assert target.pieces(">>xx<<Le")[0] == ">>xx<<" and target.encode(">>xx<<Le")[0] == 1
    assert target.pieces("Le >>fr<< chat")[0] != ">>fr<<"
    spans = target.piece_spans(text)
    assert spans[0] == (0, 6) and all(b >= 6 for b, _ in spans[1:])


def test_piece_spans(source):
    text = "Where is the railway station?"
    spans, pieces = source.piece_spans(text), source.pieces(text)
    assert len(spans) == len(pieces) and spans[-1][1] == len(text)
    for (b, e), piece in zip(spans, pieces):
        assert text[b:e].strip() == piece.replace("▁", " ").strip()


def test_spec_round_trip(source, target):
    for tok in (source, target):
        spec = json.loads(json.dumps(tok.spec()))
        assert spec["kind"] == "marian" and spec["side"] == tok.side
        again = tokenizer_from_spec(spec, tok.model_bytes)
        assert isinstance(again, MarianTokenizer) and again.spec() == tok.spec()
        assert again.model_bytes == tok.model_bytes
        for text in SOURCE + TARGET:
            assert again.encode(text, add_end=True) == tok.encode(text, add_end=True)
    with zipfile.ZipFile(io.BytesIO(source.model_bytes)) as zf:
        assert sorted(zf.namelist()) == ["sentencepiece.model", "vocab.json"]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())


def test_same_files_same_bytes(files):
    a = MarianTokenizer.from_files(files[0], files[2], "source")
    b = MarianTokenizer.from_files(files[0], files[2], "source")
    assert a.model_bytes == b.model_bytes


def vocab_bytes(vocab):
    return json.dumps(vocab).encode()


@pytest.mark.parametrize("vocab_json,message", [
    (b"", "empty"),
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"</s>": 0, "<unk>": 1, "<unk>": 2, "<pad>": 3}', "appear more than once"),
    (vocab_bytes({"</s>": 0, "<unk>": 1, "a": 2}), "has no <pad>"),
    (vocab_bytes({"</s>": 0, "<unk>": 1, "<pad>": 5}), "ids must be 0 .. 2"),
    (vocab_bytes({"</s>": 0, "<unk>": 1, "<pad>": 1}), "both have id 1"),
    (vocab_bytes({"</s>": 0, "<unk>": "1", "<pad>": 2}), "integer id"),
    (vocab_bytes({"</s>": 0, "<unk>": True, "<pad>": 2}), "integer id"),
    (b'{"</s>": 0, "<unk>": 1, "<pad>": 2, "\xff": 3}', "not UTF-8"),
])
def test_bad_vocab_json(files, vocab_json, message):
    with pytest.raises(TokenizerError, match=message) as info:
        MarianTokenizer.from_files(files[0], vocab_json, "source", vocab_name="opus/vocab.json")
    assert "opus/vocab.json" in str(info.value)


def test_bad_spm_and_side(files):
    with pytest.raises(TokenizerError, match="source.spm: not a SentencePiece model"):
        MarianTokenizer.from_files(b"garbage", files[2], "source")
    with pytest.raises(TokenizerError, match="target.spm: the file is empty"):
        MarianTokenizer.from_files(b"", files[2], "target")
    with pytest.raises(TokenizerError, match="side"):
        MarianTokenizer.from_files(files[0], files[2], "both")
    with pytest.raises(TokenizerError, match="more than"):
        MarianTokenizer.from_files(b"x" * (MAX_SPM_BYTES + 1), files[2], "source")
    with pytest.raises(TokenizerError, match="more than"):
        parse_vocab_json(b" " * (MAX_VOCAB_JSON_BYTES + 1))


def zip_blob(members, compression=zipfile.ZIP_STORED):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out.getvalue()


def test_bad_model_bytes(source, files):
    spec = source.spec()
    for blob, message in [
        (b"not a zip", "not a ZIP"),
        (zip_blob({"sentencepiece.model": files[0]}), "members"),
        (zip_blob({"sentencepiece.model": files[0], "vocab.json": files[2], "x.pkl": b""}),
         "members"),
        (zip_blob({"sentencepiece.model": files[0], "vocab.json": files[2]},
                  zipfile.ZIP_DEFLATED), "compressed"),
        (zip_blob({"sentencepiece.model": b"junk", "vocab.json": files[2]}),
         "not a SentencePiece model"),
    ]:
        with pytest.raises(TokenizerError, match=message):
            tokenizer_from_spec(spec, blob)


@pytest.mark.parametrize("field,value,message", [
    ("side", "left", "side"),
    ("start_id", 0, "start_id"),
    ("pad_id", 3, "pad_id"),
    ("vocab_size", 7, "vocab_size"),
    ("end_id", None, "end_id"),
    ("lang", "fr", "unknown field"),
])
def test_bad_spec(source, field, value, message):
    spec = dict(source.spec(), **{field: value})
    with pytest.raises(TokenizerError, match=message):
        tokenizer_from_spec(spec, source.model_bytes)
    spec = source.spec()
    del spec["side"]
    with pytest.raises(TokenizerError, match="missing field"):
        tokenizer_from_spec(spec, source.model_bytes)


HF_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "marian"


@pytest.mark.skipif(not (HF_FIXTURE / "recorded.npz").is_file(),
                    reason="tests/fixtures/marian (make_marian_fixture.py's output) is missing")
def test_equals_recorded_hugging_face_ids():
    """The ids transformers' MarianTokenizer gave when the fixture was made (tokenizer(source),
    tokenizer(text_target=target)), including pieces that map to <unk>."""
    recorded = np.load(HF_FIXTURE / "recorded.npz", allow_pickle=False)
    vocab_json = (HF_FIXTURE / "vocab.json").read_bytes()
    source = MarianTokenizer.from_files((HF_FIXTURE / "source.spm").read_bytes(), vocab_json,
                                        "source")
    target = MarianTokenizer.from_files((HF_FIXTURE / "target.spm").read_bytes(), vocab_json,
                                        "target")
    saw_unknown = False
    for i, (text, target_text) in enumerate(zip(recorded["sentences"], recorded["targets"])):
        ids = source.encode(str(text), add_end=True)
        assert ids == recorded[f"s{i}_source_ids"].tolist(), text
        saw_unknown |= source.unk_id in ids
        assert target.encode(str(target_text), add_end=True) == \
            recorded[f"s{i}_forced_output_ids"].tolist(), target_text
    assert saw_unknown


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                    reason="transformers is not installed (pip install transformers "
                           "sentencepiece) - the comparison with Hugging Face's MarianTokenizer "
                           "runs only where it is")
def test_equals_hugging_face_marian_tokenizer(files, source, target):
    from transformers import MarianTokenizer as HFMarianTokenizer
    hf = HFMarianTokenizer(str(files[3] / "source.spm"), str(files[3] / "target.spm"),
                           str(files[3] / "vocab.json"))
    for text in SOURCE + ["Ünïcödé ☃ text"]:
        assert source.encode(text, add_end=True) == hf(text)["input_ids"]
    for text in TARGET:
        ids = hf(text_target=text)["input_ids"]
        assert target.encode(text, add_end=True) == ids
        assert target.decode(ids) == hf.decode(ids, skip_special_tokens=True)


def test_a_million_entry_vocab_json_is_refused_before_it_is_parsed():
    """A million short entries fit the byte cap (14 MB); parsing them first grew memory by
    ~290 MB (issue 25's fuzzer). The keys are counted on the text instead: the refusal holds
    little more than the text itself, and a key with an escaped quote and a colon counts once."""
    import tracemalloc

    data = json.dumps({f"{i:x}": i for i in range(1_000_000)}, separators=(",", ":")).encode()
    assert len(data) <= MAX_VOCAB_JSON_BYTES
    tracemalloc.start()
    try:
        with pytest.raises(TokenizerError, match=r"1,000,000 pieces, more than the 262,144"):
            parse_vocab_json(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(data), peak  # the decoded text, not a million Python objects
    tricky = {'a"\\":b': 0, "c": 1, '{"x":': 2}
    assert parse_vocab_json(json.dumps(tricky).encode()) == tricky
