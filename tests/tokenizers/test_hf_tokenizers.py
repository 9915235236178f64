"""transformer.tokenizers.huggingface (BART, mBART, mBART-50, T5, Pegasus, NLLB-200) and
transformer.tokenizers.m2m100_pieces on tiny files built here (hf_tiny): each family's special-token
layout, language codes, the checkpoint round trip (spec + model_bytes), and that a tokenizer
built from its tokenizer.json equals one built from the original files. No transformers needed
(test_hf_live.py compares with transformers where it is installed)."""

import json

import pytest
from hf_tiny import BUILDERS, LANGS, NLLB_LANGS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer.tokenizers import tokenizer_from_spec
from transformer.tokenizers.base import TokenizerError
from transformer.tokenizers.huggingface import HFTokenizer
from transformer.tokenizers.m2m100_pieces import M2M100Tokenizer

FAMILIES = ("bart", "mbart", "mbart50", "t5", "pegasus", "nllb", "m2m100")
TEXT = "Hello, world! Привет 東京 😀"


@pytest.fixture(scope="module")
def files():
    return {family: BUILDERS[family]() for family in FAMILIES}


def build(files, family, side, language=None, **options):
    if family == "m2m100":
        return M2M100Tokenizer.from_files(files[family], side, language, **options)
    return HFTokenizer.from_files(family, dict(files[family]), side, language, **options)


def both(files, family, **options):
    src, tgt = LANGS.get(family, (None, None))
    return build(files, family, "source", src, **options), build(files, family, "target", tgt,
                                                                 **options)


def layout(tok, ids):
    return [tok.id_to_piece(i) for i in ids]


EXPECTED = {  # (source prefix, source suffix, target prefix, target suffix) as pieces
    "bart": (["<s>"], ["</s>"], ["<s>"], ["</s>"]),
    "mbart": ([], ["</s>", "en_XX"], [], ["</s>", "ro_RO"]),
    "mbart50": (["en_XX"], ["</s>"], ["ro_RO"], ["</s>"]),
    "t5": ([], ["</s>"], [], ["</s>"]),
    "pegasus": ([], ["</s>"], [], ["</s>"]),
    "nllb": (["eng_Latn"], ["</s>"], ["fra_Latn"], ["</s>"]),
    "m2m100": (["__en__"], ["</s>"], ["__fr__"], ["</s>"]),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_special_token_layout(files, family):
    src, tgt = both(files, family)
    ids = src.encode(TEXT, add_start=True, add_end=True)
    pre, suf = len(src.prefix_ids), len(src.suffix_ids)
    assert layout(src, ids[:pre]) == EXPECTED[family][0]
    assert layout(src, ids[len(ids) - suf:]) == EXPECTED[family][1]
    assert ids[pre:len(ids) - suf] == src.encode(TEXT)
    tids = tgt.encode(TEXT, add_start=True, add_end=True)
    assert layout(tgt, tids[:len(tgt.prefix_ids)]) == EXPECTED[family][2]
    assert layout(tgt, tids[len(tids) - len(tgt.suffix_ids):]) == EXPECTED[family][3]
    # start_id is the prefix's id, end_id </s>; pad/unk/eos are the named pieces
    assert src.start_id == (src.prefix_ids[0] if src.prefix_ids else None)
    assert src.id_to_piece(src.end_id) == "</s>" == src.id_to_piece(src.eos_id)
    assert src.id_to_piece(src.pad_id) == "<pad>" and src.id_to_piece(src.unk_id) == "<unk>"
    assert (src.bos_id is None) == (family in ("t5", "pegasus"))
    # max_len keeps the specials
    cut = src.encode(TEXT, add_start=True, add_end=True, max_len=pre + suf + 2)
    assert len(cut) == pre + suf + 2 and cut[:pre] == ids[:pre] and cut[-suf:] == ids[-suf:]
    # pieces, spans and ids line up
    assert len(src.pieces(TEXT)) == len(src.piece_spans(TEXT)) == len(src.encode(TEXT))


@pytest.mark.parametrize("family", FAMILIES)
def test_decode_round_trip(files, family):
    src, tgt = both(files, family)
    for tok in (src, tgt):
        ids = tok.encode("the black cat sleeps", add_start=True, add_end=True)
        assert tok.decode(ids) == "the black cat sleeps"


def test_language_codes(files):
    m50 = build(files, "mbart50", "target", "de_DE")
    assert m50.prefix_ids == [m50.language_ids["de_DE"]]
    assert len(m50.language_ids) == 52  # built from the SentencePiece model: every code
    nllb = build(files, "nllb", "source", "rus_Cyrl")
    # the codes its tokenizer.json holds at their ids, then every other code (as NllbTokenizer
    # adds them) after <mask>
    assert len(nllb.language_ids) == 202 and nllb.id_to_piece(nllb.language_ids["rus_Cyrl"]) == "rus_Cyrl"
    listed = [nllb.language_ids[c] for c in NLLB_LANGS]
    assert max(listed) < nllb.vocab_size - 198 == min(i for c, i in nllb.language_ids.items()
                                                      if c not in NLLB_LANGS)
    m2m = build(files, "m2m100", "source", "de")
    n = len(m2m.vocab)
    assert m2m.language_ids["af"] == n and m2m.prefix_ids == [m2m.language_ids["de"]]
    wmt = build(files, "m2m100", "source", "ja", language_codes="wmt21")
    assert list(wmt.language_ids) == ["en", "ha", "is", "ja", "cs", "ru", "zh", "de"]
    with pytest.raises(TokenizerError, match="not a language code"):
        build(files, "nllb", "source", "xx_YY")
    with pytest.raises(TokenizerError, match="has no language codes"):
        build(files, "t5", "source", "en")
    with pytest.raises(TokenizerError, match="not one of the m2m100 language codes"):
        build(files, "m2m100", "source", "xx")


def test_nllb_legacy_layout(files):
    tok = build(files, "nllb", "source", "eng_Latn", legacy_behaviour=True)
    assert tok.prefix_ids == [] and layout(tok, tok.suffix_ids) == ["</s>", "eng_Latn"]
    assert tok.start_id is None


@pytest.mark.parametrize("family", FAMILIES)
def test_checkpoint_round_trip(files, family):
    src, tgt = both(files, family)
    for tok in (src, tgt):
        again = tokenizer_from_spec(tok.spec(), tok.model_bytes)
        assert type(again) is type(tok) and again.spec() == tok.spec()
        assert again.model_bytes == tok.model_bytes
        for text in ("", TEXT, "  a\tb\n c  ", "x</s>y <pad>"):
            assert (again.encode(text, add_start=True, add_end=True)
                    == tok.encode(text, add_start=True, add_end=True))


@pytest.mark.parametrize("family", ["bart", "mbart", "mbart50", "t5", "pegasus"])
def test_tokenizer_json_equals_the_original_files(files, family):
    """The built pipeline saved as tokenizer.json (model_bytes) and read back as a shipped
    tokenizer.json gives the same tokenizer as the original files."""
    src = build(files, family, "source", LANGS.get(family, (None,))[0])
    again = HFTokenizer.from_files(family, {"tokenizer.json": src.model_bytes}, "source",
                                   src.language)
    assert again.spec() == src.spec()
    for text in ("", TEXT, "ß İ ﬁ Ａ ½ Å", "  two  spaces\tand a tab\n"):
        assert again.encode(text, add_start=True, add_end=True) == src.encode(
            text, add_start=True, add_end=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=40))
def test_any_text_goes_through_every_family(files, text):
    for family in FAMILIES:
        tok = both(files, family)[0] if family not in _CACHE else _CACHE[family]
        _CACHE[family] = tok
        ids = tok.encode(text, add_start=True, add_end=True)
        spans = tok.piece_spans(text)
        assert len(spans) == len(tok.pieces(text)) == len(ids) - len(tok.prefix_ids) - len(
            tok.suffix_ids)
        assert all(0 <= b <= e <= len(text) for b, e in spans)
        assert isinstance(tok.decode(ids), str)


_CACHE: dict = {}


def test_spec_is_checked(files):
    tok = build(files, "t5", "source")
    with pytest.raises(TokenizerError, match="unknown field"):
        tokenizer_from_spec(dict(tok.spec(), extra=1), tok.model_bytes)
    with pytest.raises(TokenizerError, match="family"):
        tokenizer_from_spec(dict(tok.spec(), family="gpt2"), tok.model_bytes)
    with pytest.raises(TokenizerError, match="vocab_size"):
        tokenizer_from_spec(dict(tok.spec(), vocab_size=tok.vocab_size + 1), tok.model_bytes)
    with pytest.raises(TokenizerError, match="unknown option"):
        tokenizer_from_spec(dict(tok.spec(), options={"lowercase": True}), tok.model_bytes)
    with pytest.raises(TokenizerError, match="not valid JSON|empty"):
        tokenizer_from_spec(tok.spec(), b"{")
    m2m = build(files, "m2m100", "source")
    with pytest.raises(TokenizerError, match="ZIP"):
        tokenizer_from_spec(m2m.spec(), b"not a zip")


def test_missing_files_are_named(files):
    with pytest.raises(TokenizerError, match="needs tokenizer.json"):
        HFTokenizer.from_files("nllb", {"sentencepiece.bpe.model": b"x"}, "source")
    with pytest.raises(TokenizerError, match="merges.txt"):
        HFTokenizer.from_files("bart", {"vocab.json": files["bart"]["vocab.json"]}, "source")
    with pytest.raises(TokenizerError, match="family"):
        HFTokenizer.from_files("gpt2", {}, "source")
    with pytest.raises(TokenizerError, match="vocab.json and sentencepiece.bpe.model"):
        M2M100Tokenizer.from_files({"vocab.json": b"{}"}, "source")
    with pytest.raises(TokenizerError, match="unigram SentencePiece model"):  # a BPE model for T5
        HFTokenizer.from_files("t5", {"spiece.model": files["m2m100"]["sentencepiece.bpe.model"]},
                               "source")
    with pytest.raises(TokenizerError, match="BPE model, this file holds a Unigram"):
        t5 = build(files, "t5", "source")
        HFTokenizer.from_files("nllb", {"tokenizer.json": t5.model_bytes}, "source")


def test_tokenizer_pair_reads_tokenizer_config(files):
    from transformer.tokenizers.hf_pair import tokenizer_pair

    config = {"tokenizer_class": "MBart50Tokenizer", "src_lang": "de_DE", "tgt_lang": "ro_RO"}
    src, tgt = tokenizer_pair(dict(files["mbart50"],
                                   **{"tokenizer_config.json": json.dumps(config).encode()}))
    assert (src.family, src.language, tgt.language) == ("mbart50", "de_DE", "ro_RO")
    config = {"tokenizer_class": "NllbTokenizer", "src_lang": "rus_Cyrl",
              "legacy_behaviour": True}
    src, tgt = tokenizer_pair(dict(files["nllb"],
                                   **{"tokenizer_config.json": json.dumps(config).encode()}))
    assert src.options["legacy_behaviour"] and tgt.language == "rus_Cyrl" and src.prefix_ids == []
    config = {"tokenizer_class": "M2M100Tokenizer", "src_lang": "en", "tgt_lang": "de",
              "language_codes": "wmt21"}
    src, tgt = tokenizer_pair(dict(files["m2m100"],
                                   **{"tokenizer_config.json": json.dumps(config).encode()}))
    assert type(src) is M2M100Tokenizer and len(tgt.language_ids) == 8
    src, _ = tokenizer_pair(files["t5"], family="t5")  # no tokenizer_config.json: say the family
    assert src.family == "t5"
    with pytest.raises(TokenizerError, match="names no tokenizer that opens here"):
        tokenizer_pair(dict(files["t5"], **{"tokenizer_config.json": b'{"tokenizer_class": "X"}'}))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_padded_vocabulary_names_its_unused_ids_and_round_trips(files, family):
    """A model with more rows than the tokenizer has entries (Google's T5, NLLB-200): the ids
    between are '[unused N]', no text gives them, decode skips them (M2M100: '<unk>', as
    transformers' M2M100Tokenizer names an id it has no token for), and the spec records the
    padded size so a checkpoint's tokenizer comes back the same."""
    src, tgt = both(files, family)
    own = src.vocab_size
    padded = own + 9
    for tok in (src, tgt):
        tok.pad_vocabulary(padded)
        assert (tok.own_vocab_size, tok.vocab_size) == (own, padded)
        assert tok.id_to_piece(own) == f"[unused {own}]"
        assert tok.ids_to_pieces([padded - 1]) == [f"[unused {padded - 1}]"]
        with pytest.raises(ValueError, match="out of range"):
            tok.id_to_piece(padded)
        ids = tok.encode(TEXT, add_start=True, add_end=True)
        assert max(ids) < own
        mixed = ids[:-1] + [own, padded - 1] + ids[-1:]
        unk = "<unk><unk>" if family == "m2m100" else ""
        assert tok.decode(mixed) == tok.decode(ids) + unk
        spec = tok.spec()
        assert spec["vocab_size"] == own and spec["padded_vocab_size"] == padded
        again = tokenizer_from_spec(json.loads(json.dumps(spec)), tok.model_bytes)
        assert again.spec() == spec and again.vocab_size == padded
        assert again.decode(mixed) == tok.decode(mixed)
    unpadded = both(files, family)[0]
    assert "padded_vocab_size" not in unpadded.spec()  # a spec without it: no padding
    if unpadded.id_to_piece(own - 1) == "<mask>":  # a model may lack <mask>'s row: cut
        cut = tokenizer_from_spec(dict(unpadded.spec(), padded_vocab_size=own - 1),
                                  unpadded.model_bytes)
        assert cut.vocab_size == own - 1 and cut.spec()["padded_vocab_size"] == own - 1
        assert max(cut.encode(f"{TEXT} <mask>", add_start=True, add_end=True)) < own - 1
        assert cut.unk_id in cut.encode("<mask>")
    bad_sizes = ((own - 2, f"fewer than the tokenizer's {own} entries"),
                 (10**6, "more than the 262,144"), (True, "expected an int"))
    for bad, message in bad_sizes:
        with pytest.raises(TokenizerError, match=message):
            tokenizer_from_spec(dict(unpadded.spec(), padded_vocab_size=bad),
                                unpadded.model_bytes)


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "m2m100"])
def test_the_other_side_equals_a_tokenizer_built_for_it(files, family):
    """tokenizer_pair builds the target from the source's pipeline (other_side): the same as a
    target built from the files, for another language too; a language the vocabulary lacks is
    refused there as well."""
    src_lang, tgt_lang = LANGS.get(family, (None, None))
    source = build(files, family, "source", src_lang)
    target = source.other_side("target", tgt_lang)
    built = build(files, family, "target", tgt_lang)
    assert target.spec() == built.spec() and target.backend is source.backend
    assert (target.prefix_ids, target.suffix_ids) == (built.prefix_ids, built.suffix_ids)
    assert target.encode(TEXT, add_start=True, add_end=True) == built.encode(
        TEXT, add_start=True, add_end=True)
    if tgt_lang is not None and tgt_lang != src_lang:
        assert target.prefix_ids + target.suffix_ids != source.prefix_ids + source.suffix_ids
    if family in ("mbart", "mbart50", "nllb"):
        with pytest.raises(TokenizerError, match="not a language code"):
            source.other_side("target", "xx_YY")


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "m2m100"])
def test_the_pieces_and_ids_are_the_librarys(files, family):
    """The vocabulary HFTokenizer takes from hf_backend (its model's, with the added tokens over
    it) without reading it back is the library's get_vocab(with_added_tokens=True), every id's
    piece its id_to_token: from tokenizer.json and from the original files."""
    sources = {"files": dict(files[family])}
    if "tokenizer.json" not in sources["files"]:
        built = build(files, family, "source")
        sources["tokenizer.json"] = {"tokenizer.json": built.model_bytes}
    for these in sources.values():
        tok = HFTokenizer.from_files(family, these, "source", LANGS.get(family, (None,))[0])
        library = tok.backend.get_vocab(with_added_tokens=True)
        assert {p: i for i, p in enumerate(tok.pieces_by_id)} == library
        assert tok.pieces_by_id == [tok.backend.id_to_token(i) for i in range(tok.vocab_size)]


def test_the_m2m100_other_side_equals_a_tokenizer_built_for_it(files):
    """tokenizer_pair builds M2M100's target from the source (other_side: one reading of the
    files): the same as a target built from them, for another language too; a language the
    codes lack is refused there as well."""
    source = build(files, "m2m100", "source", "en")
    for language in ("fr", None):
        target = source.other_side("target", language)
        built = build(files, "m2m100", "target", language)
        assert target.spec() == built.spec() and target.sp is source.sp
        assert target.model_bytes == built.model_bytes
        assert target.encode(TEXT, add_start=True, add_end=True) == built.encode(
            TEXT, add_start=True, add_end=True)
        assert target.decode(range(target.vocab_size)) == built.decode(range(built.vocab_size))
    assert source.other_side("target", "fr").prefix_ids != source.prefix_ids
    with pytest.raises(TokenizerError, match="not one of the m2m100 language codes"):
        source.other_side("target", "xx")
