"""Tiny tokenizer files of the Hugging Face families, built here with sentencepiece and tokenizers
(one thread, a fixed seed), laid out as each family ships them, for the tests of
transformer.tokenizers.huggingface and transformer.tokenizers.m2m100_pieces."""

from __future__ import annotations

import io
import json

import sentencepiece as spm

CORPUS = [
    "Hello, world! The quick brown fox jumps over the lazy dog.", "the black cat sleeps",
    "le chat noir dort sur le tapis", "Café déjà vu, naïve señor, Zürich, Straße",
    "Привет, мир! Как дела? Москва большая.", "東京は2021年3月5日です。我喜欢读书。",
    "مرحبا بالعالم", "שלום עולם", "😀 👍🏽 emoji ❤️", "0123456789 numbers and $%&",
    "Friday, March 5, 2021 at 10:45", "Ελληνικά γράμματα, Καλημέρα κόσμε", "हिन्दी भाषा",
    "한국어 문장입니다", "where is the big red car?", "où est la grande voiture rouge ?",
]
# A few codes of each family (the vocabularies hold them as real models do).
MBART_LANGS = ("en_XX", "ro_RO", "de_DE")
NLLB_LANGS = ("eng_Latn", "fra_Latn", "rus_Cyrl", "zho_Hans")


def train_spm(model_type: str = "unigram", vocab_size: int = 260, **ids) -> bytes:
    spm.set_random_generator_seed(1)
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 10), model_writer=out, vocab_size=vocab_size,
        model_type=model_type, num_threads=1, character_coverage=1.0, hard_vocab_limit=False,
        minloglevel=2, **ids)
    return out.getvalue()


def t5_files() -> dict[str, bytes]:
    """spiece.model as T5's: <pad> 0, </s> 1, <unk> 2, no <s> (Pegasus's is laid out alike)."""
    return {"spiece.model": train_spm(pad_id=0, eos_id=1, unk_id=2, bos_id=-1)}


def pegasus_files() -> dict[str, bytes]:
    return t5_files()


def mbart_files() -> dict[str, bytes]:
    """sentencepiece.bpe.model as fairseq's (a unigram model despite the name): <unk> 0,
    <s> 1, </s> 2."""
    return {"sentencepiece.bpe.model": train_spm()}


def m2m100_files() -> dict[str, bytes]:
    """sentencepiece.bpe.model (BPE) and vocab.json: <s> 0, <pad> 1, </s> 2, <unk> 3, then the
    model's pieces (one Cyrillic piece left out, so it becomes <unk>)."""
    model = train_spm("bpe")
    sp = spm.SentencePieceProcessor(model_proto=model)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    left_out = max(sp.encode("Москва большая", out_type=str), key=len)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for p in pieces[3:]:
        if p != left_out:
            vocab.setdefault(p, len(vocab))
    return {"sentencepiece.bpe.model": model,
            "vocab.json": json.dumps(vocab, ensure_ascii=False, indent=1).encode()}


def bart_files() -> dict[str, bytes]:
    """vocab.json + merges.txt of a byte-level BPE (as facebook/bart-*'s: <s> 0, <pad> 1,
    </s> 2, <unk> 3, <mask> last)."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(CORPUS, vocab_size=340, min_frequency=2,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>"], show_progress=False)
    vocab = dict(sorted(bpe.get_vocab().items(), key=lambda kv: kv[1]))
    vocab["<mask>"] = len(vocab)
    merges = json.loads(bpe.to_str())["model"]["merges"]
    lines = ["#version: 0.2"] + [m if isinstance(m, str) else " ".join(m) for m in merges]
    return {"vocab.json": json.dumps(vocab, ensure_ascii=False).encode(),
            "merges.txt": ("\n".join(lines) + "\n").encode()}


def nllb_files() -> dict[str, bytes]:
    """tokenizer.json as NLLB-200's: a BPE model over Metaspace words (<s> 0, <pad> 1, </s> 2,
    <unk> 3), SentencePiece's normalization rules, the language codes and <mask> as added
    special tokens after the vocabulary."""
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import AddedToken, Regex, Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(t5_files()["spiece.model"])
    tok = Tokenizer(BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(bytes(proto.normalizer_spec.precompiled_charsmap)),
        normalizers.Replace(Regex(r" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.train_from_iterator(CORPUS, BpeTrainer(
        vocab_size=300, min_frequency=2, show_progress=False,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>"]))
    tok.add_special_tokens(list(NLLB_LANGS) + [AddedToken("<mask>", lstrip=True,
                                                          normalized=True, special=True)])
    return {"tokenizer.json": tok.to_str().encode()}


BUILDERS = {"bart": bart_files, "mbart": mbart_files, "mbart50": mbart_files, "t5": t5_files,
            "pegasus": pegasus_files, "nllb": nllb_files, "m2m100": m2m100_files}
# family -> (source language, target language) used by the tests
LANGS = {"mbart": ("en_XX", "ro_RO"), "mbart50": ("en_XX", "ro_RO"),
         "nllb": ("eng_Latn", "fra_Latn"), "m2m100": ("en", "fr")}
