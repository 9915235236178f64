"""Tests for transformer.tokenizers.sentencepiece_model and the probe at load: crafted SentencePiece models
(pieces and normalization rules that are not valid UTF-8, rule tables that point outside
themselves) are refused when a tokenizer is built from them, never on a user's sentence."""

import io
import re
import struct

import numpy as np
import pytest
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from transformer.tokenizers import tokenizer_from_spec
from transformer.tokenizers.base import TokenizerError
from transformer.tokenizers.marian_pieces import MarianTokenizer
from transformer.tokenizers.sentencepiece_model import (
    MAX_CHARSMAP_BYTES,
    MAX_RULES_PER_PREFIX,
    check_charsmap,
    check_sentencepiece_model,
)

CORPUS = ["the quick brown fox jumps over the lazy dog", "march 5 2021 was a friday",
          "café déjà vu in zürich"] * 10
NAME = "model_bytes (the SentencePiece model)"


def train(tmp_path=None, rules: str | None = None, **options) -> bytes:
    """A small BPE model with the trained layout (<pad> <unk> <s> </s>); ``rules`` a
    normalization_rule_tsv (one rule per line: input code points TAB output code points)."""
    if rules is not None:
        path = tmp_path / "rules.tsv"
        path.write_text(rules)
        options["normalization_rule_tsv"] = str(path)
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS), model_writer=writer, model_type="bpe", vocab_size=60,
        hard_vocab_limit=False, character_coverage=1.0, num_threads=1, pad_id=0, unk_id=1,
        bos_id=2, eos_id=3, minloglevel=2, **options)
    return writer.getvalue()


def proto(model_bytes: bytes) -> sentencepiece_model_pb2.ModelProto:
    m = sentencepiece_model_pb2.ModelProto()
    m.ParseFromString(model_bytes)
    return m


def with_piece_bytes(model_bytes: bytes, index: int, raw: bytes) -> bytes:
    """The model with piece ``index`` made the bytes ``raw`` and "@"s after them (protobuf
    refuses to write bytes that are not UTF-8 into a string field, so a placeholder of the same
    length is patched)."""
    m = proto(model_bytes)
    placeholder = b"@" * 12
    m.pieces[index].piece = placeholder.decode()
    data = m.SerializeToString()
    assert data.count(placeholder) == 1
    return data.replace(placeholder, raw + placeholder[len(raw):])


def with_charsmap(model_bytes: bytes, blob: bytes, spec: str = "normalizer_spec") -> bytes:
    m = proto(model_bytes)
    getattr(m, spec).precompiled_charsmap = blob
    if spec == "normalizer_spec":
        m.normalizer_spec.name = "user_defined"
    return m.SerializeToString()


def load(model_bytes: bytes, spec: dict):
    return tokenizer_from_spec(spec, model_bytes)


@pytest.fixture(scope="module")
def good():
    """A model that loads, and the spec a checkpoint stores beside it."""
    data = train(user_defined_symbols=["QZ"])
    spec = {"kind": "trained", "lang": None, "vs": None, "lowercase": False,
            "digits_to_zero": False, "pad_id": 0, "unk_id": 1, "start_id": 2, "end_id": 3,
            "vocab_size": spm.SentencePieceProcessor(model_proto=data).get_piece_size()}
    assert "QZ" in load(data, spec).pieces("QZ fox")
    return data, spec


def chain_trie(depth: int, outputs: bytes = b"a\0", value: int = 0) -> tuple[np.ndarray, bytes]:
    """A Darts-clone double array, built by hand, holding the rules "Q", "QQ", ... ("Q" * depth)
    -> the output at ``value`` in ``outputs``: one node per "Q", each with a rule.

    Units: label in bits 0-7, has_leaf bit 8, offset (to the node's base) from bit 10; a rule's
    value unit (at the base) has bit 31 set. The root's base is 256, node k's is 256 (k + 1).
    Unused units get bit 31 too, so no byte matches them (Darts-clone gives them labels that
    match no byte).
    """
    q = ord("Q")
    units = np.full(256 * (depth + 2), 1 << 31, dtype="<u4")
    units[0] = 256 << 10  # the root: base 0 ^ 256
    base = 256
    for k in range(1, depth + 1):
        node, next_base = base ^ q, 256 * (k + 1)
        units[node] = ((node ^ next_base) << 10) | (1 << 8) | q
        units[next_base] = (1 << 31) | value
        base = next_base
    return units, outputs


def charsmap(units: np.ndarray, outputs: bytes) -> bytes:
    return struct.pack("<I", units.nbytes) + units.tobytes() + outputs


# ------------------------------------------------------------------ the crafted models load today

def test_the_crafted_models_break_sentencepiece_after_it_loads_them(good, tmp_path):
    """What the checks are for: SentencePiece loads each of these and fails later."""
    data, _ = good
    bad_piece = with_piece_bytes(data, 4, b"\xff\xfe")
    sp = spm.SentencePieceProcessor(model_proto=bad_piece)
    with pytest.raises(UnicodeDecodeError):
        sp.id_to_piece(4)
    rule = train(tmp_path, "51\t5A 5A 5A 5A\n")  # "Q" -> "ZZZZ"
    m = proto(rule)
    assert m.normalizer_spec.precompiled_charsmap.count(b"ZZZZ") == 1
    bad_rule = with_charsmap(rule, m.normalizer_spec.precompiled_charsmap.replace(
        b"ZZZZ", b"\xff\xfe\xfd\xfc"))
    sp = spm.SentencePieceProcessor(model_proto=bad_rule)
    assert sp.encode("the fox", out_type=str)  # loads, and works until the rule is needed
    with pytest.raises(UnicodeDecodeError):
        sp.encode("Quick", out_type=str)


def test_a_hand_built_trie_is_read_by_sentencepiece_as_the_checker_reads_it(good):
    """The checker's model of the rule table is SentencePiece's: three nested rules work."""
    data, _ = good
    units, outputs = chain_trie(3, b"a\0")
    blob = charsmap(units, outputs)
    check_charsmap(blob, "rules")
    sp = spm.SentencePieceProcessor(model_proto=with_charsmap(data, blob))
    assert sp.encode("QQQQ", out_type=str) == sp.encode("aa", out_type=str)


# ------------------------------------------------------------------ refused at load

def test_a_piece_that_is_not_utf8_is_refused_at_load(good):
    data, spec = good
    for index in (4, 20):  # a user-defined symbol, a merged BPE piece
        bad = with_piece_bytes(data, index, b"\xff\xfe")
        with pytest.raises(TokenizerError,
                           match=f"{re.escape(NAME)}: piece {index} .* not valid UTF-8"):
            load(bad, spec)


def test_a_piece_with_a_lone_surrogate_encoded_is_refused(good):
    data, spec = good
    bad = with_piece_bytes(data, 20, "\ud800".encode("utf-8", "surrogatepass"))
    with pytest.raises(TokenizerError, match="not valid UTF-8"):
        load(bad, spec)


@pytest.mark.parametrize("spec_field", ["normalizer_spec", "denormalizer_spec"])
def test_a_rule_whose_output_is_not_utf8_is_refused_at_load(good, tmp_path, spec_field):
    data, spec = good
    rule = train(tmp_path, "51\t5A 5A 5A 5A\n")
    blob = proto(rule).normalizer_spec.precompiled_charsmap.replace(b"ZZZZ", b"\xff\xfe\xfd\xfc")
    what = "normalization" if spec_field == "normalizer_spec" else "denormalization"
    with pytest.raises(TokenizerError, match=f"{what} rules hold an output that is not valid "
                                             f"UTF-8"):
        load(with_charsmap(data, blob, spec_field), spec)


def test_a_rule_pointing_inside_a_character_is_refused(good):
    data, spec = good
    units, outputs = chain_trie(2, "é\0".encode(), value=1)  # the second byte of "é"
    with pytest.raises(TokenizerError, match="not valid UTF-8"):
        load(with_charsmap(data, charsmap(units, outputs)), spec)


@pytest.mark.parametrize("break_it, message", [
    (lambda u: u.__setitem__(0, (len(u) + 4096) << 10), "the trie points past its end"),
    (lambda u: u.__setitem__(256 ^ ord("Q"), ((256 ^ ord("Q") ^ (len(u) + 9)) << 10)
                             | (1 << 8) | ord("Q")), "a rule points past the trie's end"),
    (lambda u: u.__setitem__(512, (1 << 31) | 5000), "output lies past the table's end"),
])
def test_a_rule_table_pointing_outside_itself_is_refused(good, break_it, message):
    """Offsets that lead outside the table: the check refuses them before SentencePiece runs
    (this SentencePiece refuses them too when it loads the model)."""
    data, spec = good
    units, outputs = chain_trie(2)
    break_it(units)
    with pytest.raises(TokenizerError, match=message):
        check_charsmap(charsmap(units, outputs), "rules")
    with pytest.raises(TokenizerError, match="model_bytes"):
        load(with_charsmap(data, charsmap(units, outputs)), spec)


def test_more_rules_on_one_input_than_sentencepiece_keeps_are_refused(good):
    """SentencePiece keeps 32 matches in a stack array and reads past it when there are more;
    its own builder never writes such a table, a crafted file can."""
    data, spec = good
    check_charsmap(charsmap(*chain_trie(MAX_RULES_PER_PREFIX)), "rules")
    units, outputs = chain_trie(MAX_RULES_PER_PREFIX + 1)
    with pytest.raises(TokenizerError, match="more than 32 rules"):
        load(with_charsmap(data, charsmap(units, outputs)), spec)


def test_a_rule_table_with_a_cycle_is_refused(good):
    data, spec = good
    units, outputs = chain_trie(2)
    node = 512 ^ ord("Q")  # the second "Q" leads back to the first node's base
    units[node] = ((node ^ 512) << 10) | ord("Q")
    with pytest.raises(TokenizerError, match="broken"):
        load(with_charsmap(data, charsmap(units, outputs)), spec)


@pytest.mark.parametrize("blob, message", [
    (b"\x01\x00", "broken"),
    (struct.pack("<I", 1000) + b"\0" * 8, "broken"),
    (b"\0" * (MAX_CHARSMAP_BYTES + 1), "more than"),
])
def test_a_rule_table_with_a_bad_header_or_size_is_refused(blob, message):
    with pytest.raises(TokenizerError, match=message):
        check_charsmap(blob, "rules")


def test_random_damage_to_a_rule_table_is_refused_or_harmless(good, tmp_path):
    """Every damaged table either fails the check or tokenizes every probe text (SentencePiece
    reading outside its memory would crash this test's process)."""
    data, spec = good
    rule = train(tmp_path, "51\t5A 5A\n71\tC3 A9\n")  # "Q" -> "ZZ", "q" -> "é"
    blob = proto(rule).normalizer_spec.precompiled_charsmap
    trie_end = 4 + struct.unpack("<I", blob[:4])[0]
    rng = np.random.default_rng(0)
    refused = accepted = 0
    for _ in range(150):
        damaged = bytearray(blob)
        for at in rng.integers(0, len(blob), size=rng.integers(1, 4)):
            damaged[at] = rng.integers(0, 256) if at < trie_end else rng.choice([0, 0x80, 0xff])
        try:
            tok = load(with_charsmap(data, bytes(damaged)), spec)
        except TokenizerError as err:
            assert "model_bytes" in str(err)
            refused += 1
            continue
        accepted += 1
        for text in ("Quick q Q QQQ", "\x00Q\x80", "é" * 50):
            assert len(tok.encode(text)) == len(tok.piece_spans(text))
    assert refused and accepted  # both kinds of damage happened


# ------------------------------------------------------------------ the same checks elsewhere

def test_marian_from_files_refuses_a_bad_piece(good):
    data, _ = good
    bad = with_piece_bytes(data, 20, b"\xc3")
    vocab = b'{"</s>": 0, "<unk>": 1, "<pad>": 2}'
    with pytest.raises(TokenizerError, match="source.spm: piece 20 .* not valid UTF-8"):
        MarianTokenizer.from_files(bad, vocab, "source")


def test_marian_vocab_json_with_a_lone_surrogate_is_refused_at_load(good):
    """JSON can spell a lone surrogate ("\\ud800"); such a piece would crash every page that
    shows it."""
    data, _ = good
    vocab = b'{"</s>": 0, "<unk>": 1, "<pad>": 2, "\\ud800": 3}'
    with pytest.raises(TokenizerError, match="vocab.json: the piece of id 3 .* lone surrogate"):
        MarianTokenizer.from_files(data, vocab, "source")


def test_the_real_models_pass_the_check():
    for rule_name in ("nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf", "identity"):
        writer = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(CORPUS), model_writer=writer, model_type="unigram",
            vocab_size=40, hard_vocab_limit=False, num_threads=1, minloglevel=2,
            normalization_rule_name=rule_name)
        check_sentencepiece_model(writer.getvalue(), rule_name)


def test_not_a_model_is_refused():
    with pytest.raises(TokenizerError, match="not a SentencePiece model"):
        check_sentencepiece_model(b"\xff" * 40, "x.spm")


def test_the_probe_alone_finds_a_bad_piece_and_a_bad_rule(good, tmp_path):
    """Behind the check, the probe at load runs the model as the pages will: a tokenizer whose
    SentencePiece model has a bad piece, or a bad rule for a letter of the probe texts, is
    refused by it too."""
    data, spec = good
    tok = load(data, spec)
    tok.probe("x.model")  # the good model passes
    rule = train(tmp_path, "65\t5A 5A 5A 5A\n")  # "e" -> "ZZZZ"
    bad_rule = with_charsmap(rule, proto(rule).normalizer_spec.precompiled_charsmap.replace(
        b"ZZZZ", b"\xff\xfe\xfd\xfc"))
    for bad, message in ((with_piece_bytes(data, 20, b"\xff"), "reading the piece of every id"),
                         (bad_rule, "tokenizing the probe text 'Hello, world!'")):
        tok.bpemb.spm = spm.SentencePieceProcessor(model_proto=bad)  # past the check
        with pytest.raises(TokenizerError, match=f"x.model: {message} fails .*UnicodeDecodeError"):
            tok.probe("x.model")


def test_a_model_that_passed_is_not_checked_again_and_a_bad_one_always_is(good, monkeypatch):
    """Reopening a checkpoint (or another with the same tokenizer) skips the check: the bytes
    that passed are remembered by sha256. A refused model is refused every time."""
    import transformer.tokenizers.sentencepiece_model as checker

    data, _ = good
    parsed = []
    real = checker._check
    monkeypatch.setattr(checker, "_check", lambda b, n: parsed.append(n) or real(b, n))
    monkeypatch.setattr(checker, "_PASSED", type(checker._PASSED)())
    check_sentencepiece_model(data, "first")
    check_sentencepiece_model(bytes(data), "again")
    assert parsed == ["first"]
    for attempt in range(2):
        with pytest.raises(TokenizerError, match="not a SentencePiece model"):
            check_sentencepiece_model(b"\xff" * 40, f"bad {attempt}")
    assert parsed == ["first", "bad 0", "bad 1"]


def _outputs_one_by_one(values, outputs: bytes, limit: int) -> str:
    """What each rule's output must be, checked output by output as _check_outputs reads them
    when one fails."""
    for start in values:
        end = outputs.find(b"\0", start, start + limit + 1)
        if end < 0 and len(outputs) - start > limit:
            return "too long"
        try:
            outputs[start:end if end >= 0 else len(outputs)].decode("utf-8")
        except UnicodeDecodeError:
            return "not UTF-8"
    return "ok"


def test_the_outputs_are_checked_at_once_as_they_were_one_by_one(monkeypatch):
    """_check_outputs checks every output at once (their ends, their first bytes, the bytes
    they span decoded as one) and goes output by output only to name a failure: on random
    tables, the same verdict as output by output, for a short and a long bound."""
    import random

    from transformer.tokenizers import sentencepiece_model

    rng = random.Random(0)
    pieces = [b"\0", b"a", b"bc", "é".encode(), "€".encode(), "😀".encode(), b"\x80", b"\xff",
              b"\xe2\x82"]
    for limit in (3, 8, 32):
        monkeypatch.setattr(sentencepiece_model, "MAX_RULE_OUTPUT_BYTES", limit)
        for _ in range(3000):
            outputs = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 24)))
            values = np.unique(np.array([rng.randrange(len(outputs))
                                         for _ in range(rng.randint(0, 5))], dtype=np.int64))
            try:
                sentencepiece_model._check_outputs(values, outputs, "rules")
                verdict = "ok"
            except TokenizerError as err:
                verdict = "too long" if "longer than" in str(err) else "not UTF-8"
            assert verdict == _outputs_one_by_one(values.tolist(), outputs, limit), (outputs,
                                                                                       values)
