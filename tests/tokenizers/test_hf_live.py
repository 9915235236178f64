"""Live: our BART, mBART, mBART-50, T5, Pegasus, NLLB-200 and M2M100 tokenizers against
transformers' own tokenizer classes on the same tiny files (hf_tiny), for any text (hypothesis:
unrestricted Unicode, and a mix of Latin, accents, Cyrillic, CJK, Arabic, emoji, combining marks
and whitespace), on both sides: equal ids (``tok(text)["input_ids"]`` and
``tok(text_target=text)["input_ids"]``) and equal decoding of those ids.

Each family is loaded twice: from the files it ships (vocab.json + merges.txt, spiece.model,
sentencepiece.bpe.model (+ vocab.json), tokenizer.json), and from what transformers'
``save_pretrained`` writes (tokenizer.json + tokenizer_config.json). Skipped where transformers
is not installed (CI has none; the project's .venv has it)."""

import json
import warnings

import pytest
from hf_tiny import BUILDERS, LANGS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer.tokenizers.huggingface import HFTokenizer
from transformer.tokenizers.m2m100_pieces import M2M100Tokenizer

transformers = pytest.importorskip("transformers")

CLASSES = {"bart": "BartTokenizer", "mbart": "MBartTokenizer", "mbart50": "MBart50Tokenizer",
           "t5": "T5Tokenizer", "pegasus": "PegasusTokenizer", "nllb": "NllbTokenizer",
           "m2m100": "M2M100Tokenizer"}
FAMILIES = tuple(CLASSES)

FRAGMENTS = ["Hello", "world", "the", "cat", "café", "déjà", "naïve", "Zürich", "Straße", "Привет",
             "мир", "Москва", "東京", "日本語", "我喜欢", "مرحبا", "العالم", "שלום", "😀", "👍🏽",
             "❤️", "👩\u200d💻", "e\u0301", "o\u0308\u0301", "\u0300", " ", "  ", "\t", "\n",
             "\r\n", "\u00a0", "\u3000", "\u200b", ",", ".", "!", "?", "¿", "1", "2021", "ﬁ",
             "Ａ", "½", "ß", "İ", "Å", "ǅ", "</s>", "<pad>", "__de__", "▁", "Ġ", "<s>", "<unk>", "<mask>",
             "<mask_1>", "<unk_7>", "<extra_id_0>", "en_XX", "ro_RO", "eng_Latn", "ary_Arab"]
MIXED = st.lists(st.sampled_from(FRAGMENTS) | st.characters(codec="utf-8"),
                 max_size=16).map("".join)
ANY = st.text(st.characters(codec="utf-8"), max_size=40)
SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


def reference(family, folder):
    cls = getattr(transformers, CLASSES[family])
    src, tgt = LANGS.get(family, (None, None))
    kwargs = {"src_lang": src, "tgt_lang": tgt} if src else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls.from_pretrained(str(folder), **kwargs)


def ours(family, files, options=None):
    src, tgt = LANGS.get(family, (None, None))
    options = options or {}
    if family == "m2m100":
        return (M2M100Tokenizer.from_files(files, "source", src),
                M2M100Tokenizer.from_files(files, "target", tgt))
    return (HFTokenizer.from_files(family, dict(files), "source", src, **options),
            HFTokenizer.from_files(family, dict(files), "target", tgt, **options))


def write(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """family -> [(transformers' tokenizer, (our source, our target), what)], from the shipped
    files and from transformers' save_pretrained of them."""
    out = {}
    for family in FAMILIES:
        files = BUILDERS[family]()
        base = tmp_path_factory.mktemp(family)
        ref = reference(family, write(base / "shipped", files))
        out[family] = [(ref, ours(family, files), "shipped files")]
        if family != "m2m100":  # M2M100Tokenizer saves vocab.json + the model again
            saved = base / "saved"
            ref.save_pretrained(str(saved))
            config = json.loads((saved / "tokenizer_config.json").read_text())
            options = {k: config[k] for k in ("legacy_behaviour", "add_prefix_space",
                                              "clean_up_tokenization_spaces")
                       if isinstance(config.get(k), bool)}
            ref2 = reference(family, saved)
            mine = ours(family, {"tokenizer.json": (saved / "tokenizer.json").read_bytes()},
                        options)
            out[family].append((ref2, mine, "save_pretrained's tokenizer.json"))
    return out


def reference_decode(family, ref, ids, eos):
    """transformers' decode(skip_special_tokens=True) of ids cut where ours stops (the first
    </s>); for M2M100 without the side's own language token (transformers 5.23 keeps it as
    text, ours drops a side's start id as every tokenizer here does)."""
    if eos in ids:
        ids = ids[:ids.index(eos)]
    if family == "m2m100":
        ids = ids[1:]
    return ref.decode(ids, skip_special_tokens=True)


def check(family, pairs, text):
    for ref, (src, tgt), what in pairs[family]:
        enc = ref(text, text_target=text)
        got_src = src.encode(text, add_start=True, add_end=True)
        got_tgt = tgt.encode(text, add_start=True, add_end=True)
        assert got_src == enc["input_ids"], (what, "source", text)
        assert got_tgt == enc["labels"], (what, "target", text)
        for tok, ids in ((src, got_src), (tgt, got_tgt)):
            assert tok.decode(ids) == reference_decode(family, ref, ids, tok.eos_id), (what, text)


@pytest.mark.parametrize("family", FAMILIES)
def test_ids_and_specials_match_transformers(pairs, family):
    for ref, (src, _), what in pairs[family]:
        assert src.eos_id == ref.eos_token_id and src.pad_id == ref.pad_token_id
        assert src.unk_id == ref.unk_token_id
        if family in ("t5", "pegasus"):
            assert src.bos_id is None
        else:  # MBart50Tokenizer names <s> cls_token, not bos_token
            assert src.bos_id == ref.convert_tokens_to_ids("<s>") == 0
        for code, i in src.language_ids.items():
            if family == "m2m100":
                assert ref.get_lang_id(code) == i
            else:
                assert ref.convert_tokens_to_ids(code) == i, (what, code)
        if family not in ("m2m100", "nllb"):
            assert src.vocab_size == len(ref), what
        for text in ("", " ", "the black cat sleeps", "Zoë à Москва, 東京 🙂", "x</s>y <pad> z",
                     "  leading and   inner   spaces  ", "tabs\tand\nnewlines\r\nhere",
                     "\ufb01 ligature \u2460 circled \uff21\uff22\uff23 fullwidth"):
            check(family, pairs, text)


@pytest.mark.parametrize("family", FAMILIES)
@SETTINGS
@given(text=ANY)
def test_any_unicode_text(pairs, family, text):
    check(family, pairs, text)


@pytest.mark.parametrize("family", FAMILIES)
@SETTINGS
@given(text=MIXED)
def test_mixed_script_text(pairs, family, text):
    check(family, pairs, text)


@pytest.mark.parametrize("family", ["t5", "pegasus", "mbart50", "bart"])
def test_clean_up_tokenization_spaces(tmp_path, family):
    """tokenizer_config.json's clean_up_tokenization_spaces (true in many hub configs written by
    transformers 4) applies to decoding as transformers applies it: never to a BPE model."""
    files = BUILDERS[family]()
    src, tgt = LANGS.get(family, (None, None))
    cls = getattr(transformers, CLASSES[family])
    kwargs = {"src_lang": src, "tgt_lang": tgt} if src else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = cls.from_pretrained(str(write(tmp_path, files)), clean_up_tokenization_spaces=True,
                                  **kwargs)
    mine = HFTokenizer.from_files(family, files, "source", src, clean_up_tokenization_spaces=True)
    for text in ("a , b . c ? d ! it 's they 're I 'm we 've don 't", "Hello , world !"):
        ids = mine.encode(text, add_start=True, add_end=True)
        assert ids == ref(text)["input_ids"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert mine.decode(ids) == ref.decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("family", ["bart", "mbart50", "t5", "pegasus", "nllb"])
def test_older_tokenizer_json_layouts(tmp_path, family):
    """tokenizer.json as older hub files write it (Metaspace with add_prefix_space, a
    RobertaProcessing post-processor) gives transformers' ids too: the pipeline is the class's,
    only the vocabulary and rules come from the file."""
    src, tgt = LANGS.get(family, (None, None))
    doc = json.loads(ours(family, BUILDERS[family]())[0].model_bytes)
    if family != "bart":
        doc["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
        doc["decoder"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
    doc["post_processor"] = {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                             "trim_offsets": True, "add_prefix_space": family != "bart"}
    files = {"tokenizer.json": json.dumps(doc).encode()}
    ref = reference(family, write(tmp_path, files))
    mine = HFTokenizer.from_files(family, files, "source", src)
    for text in ("Hello,  world! Привет 東京 ﬁ", "", " x ", "a\tb\nc"):
        assert mine.encode(text, add_start=True, add_end=True) == ref(text)["input_ids"]


SPM_SYMBOLS = {"user_defined_symbols": ["<sep>", "@@", "Hello"], "control_symbols": ["<ctl>"]}
SPM_FAMILIES = {"t5": ("spiece.model", {"pad_id": 0, "eos_id": 1, "unk_id": 2, "bos_id": -1}),
                "pegasus": ("spiece.model", {"pad_id": 0, "eos_id": 1, "unk_id": 2, "bos_id": -1}),
                "mbart": ("sentencepiece.bpe.model", {}),
                "mbart50": ("sentencepiece.bpe.model", {})}


@pytest.fixture(scope="module")
def symbol_pairs(tmp_path_factory):
    """SentencePiece models with user-defined and control pieces: transformers makes them added
    tokens (not special / special) for T5 and mBART(-50), and drops them for Pegasus."""
    from hf_tiny import train_spm

    out = {}
    for family, (name, ids) in SPM_FAMILIES.items():
        files = {name: train_spm(**SPM_SYMBOLS, **ids)}
        ref = reference(family, write(tmp_path_factory.mktemp(family), files))
        out[family] = [(ref, ours(family, files), "SentencePiece model with symbols")]
    return out


@pytest.mark.parametrize("family", tuple(SPM_FAMILIES))
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from(["<sep>", "@@", "Hello", "<ctl>", "there", " ", "x"])
                     | st.sampled_from(FRAGMENTS), max_size=10).map("".join))
def test_sentencepiece_symbols(symbol_pairs, family, text):
    check(family, symbol_pairs, text)
