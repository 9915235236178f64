"""The ``tokenizers``-library pipelines of BART, mBART (cc25), mBART-50, T5, Pegasus and NLLB-200,
built the way transformers 5.23 builds them, from checked data (hf_files).

transformers' tokenizer classes for these families do not run the pipeline a tokenizer.json
describes: each takes only the vocabulary (and the BPE merges, and the normalization rules of a
``Precompiled`` normalizer) from tokenizer.json or from the SentencePiece model, and builds its own
normalizer, pre-tokenizer, model and decoder. So do we (FAMILIES: one entry per family):

============  =======  ============================================  ==================================
family        model    normalizer                                    pre-tokenizer / decoder
============  =======  ============================================  ==================================
``bart``      BPE      none                                          ByteLevel / ByteLevel
``mbart``     Unigram  none (the rules are not used)                 WhitespaceSplit + Metaspace
``mbart50``   Unigram  Precompiled (if any) + Replace(" {2,}", " ")  Metaspace / Metaspace
``t5``        Unigram  Precompiled (if any)                          WhitespaceSplit + Metaspace
``pegasus``   Unigram  Precompiled + Replace(" {2,}", " "), or       Metaspace / Metaspace
                       Replace("\\n", " ") + Replace(" {2,}", " ")
``nllb``      BPE      Precompiled + Replace(" {2,}", " "), or none  Metaspace / Metaspace
============  =======  ============================================  ==================================

(Metaspace: "▁", prepend_scheme "always", split. BART's BPE: no unk token, no fused unknowns;
NLLB's: unk "<unk>", fused. Unigram's unk: id 2 for T5, 3 for mBART and mBART-50, Pegasus's the
first "<unk>" of score 0 after id 0.)

The vocabulary from a SentencePiece model is laid out as transformers' converters lay it out:

* T5: the model's pieces, then ``<extra_id_{n-1}>`` .. ``<extra_id_0>`` (n = extra_ids, 100);
* Pegasus: ``<pad>``, ``</s>``, ``<mask_1>``, ``<mask_2>``, ``<unk_2>`` .. ``<unk_102>`` (score
  -100), then the model's pieces from id 2 (so ``<unk>`` is 105);
* mBART and mBART-50: ``<s>``, ``<pad>``, ``</s>``, ``<unk>``, the model's pieces from id 3 (the
  fairseq offset of 1), the family's language codes, ``<mask>``.

Then the special tokens are added as transformers adds them (AddedToken, special): those a
tokenizer.json lists (their ids as it gives them; from a SentencePiece model, its control pieces
as special and its user-defined pieces as not, except for Pegasus), then the family's named
specials and language codes it lacks. Text that holds one of them (a typed "</s>") is cut there as the
library does; decoding skips them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers
from tokenizers import Tokenizer as Backend
from tokenizers.models import BPE, Unigram

from transformer.core import limits
from transformer.tokenizers.base import TokenizerError
from transformer.tokenizers.hf_files import (
    MAX_ADDED_TOKENS,
    SentencePieceData,
    TokenizerJson,
)
from transformer.tokenizers.hf_languages import MBART50_CODES, MBART_CODES, NLLB_CODES

__all__ = ["Family", "FAMILIES", "build_backend", "vocab_from_sentencepiece"]


@dataclass(frozen=True)
class Family:
    """One family's tokenizer: its model type, named special tokens (name -> text), language
    codes and the layout of each side (see huggingface.HFTokenizer.side_layout)."""
    name: str
    model_type: str  # "BPE" or "Unigram"
    specials: tuple[tuple[str, str], ...]
    language_codes: tuple[str, ...] = ()
    default_source_language: str | None = None


_FAIRSEQ = (("bos", "<s>"), ("eos", "</s>"), ("unk", "<unk>"), ("pad", "<pad>"),
            ("mask", "<mask>"))
FAMILIES = {
    "bart": Family("bart", "BPE", _FAIRSEQ),
    "mbart": Family("mbart", "Unigram", _FAIRSEQ, MBART_CODES, "en_XX"),
    "mbart50": Family("mbart50", "Unigram", _FAIRSEQ, MBART50_CODES, "en_XX"),
    "t5": Family("t5", "Unigram", (("eos", "</s>"), ("unk", "<unk>"), ("pad", "<pad>"))),
    "pegasus": Family("pegasus", "Unigram", (("pad", "<pad>"), ("eos", "</s>"), ("unk", "<unk>"),
                                             ("mask", "<mask_2>"), ("mask_sent", "<mask_1>"))),
    "nllb": Family("nllb", "BPE", _FAIRSEQ, NLLB_CODES, "eng_Latn"),
}
PEGASUS_OFFSET = 103


def _metaspace_pre():
    return pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)


def _metaspace_dec():
    return decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)


def vocab_from_sentencepiece(family: Family, spm: SentencePieceData, *, extra_ids: int = 100,
                             name: str = "the SentencePiece model") -> list[tuple[str, float]]:
    """The Unigram vocabulary transformers' converter makes of a SentencePiece model."""
    if spm.model_type != "unigram":
        raise TokenizerError(f"{name}: a {family.name} tokenizer needs a unigram SentencePiece "
                             f"model, this one is {spm.model_type}")
    pieces = [(p, s) for p, s, _ in spm.pieces]
    if family.name == "t5":
        return pieces + [(f"<extra_id_{i}>", 0.0) for i in range(extra_ids - 1, -1, -1)]
    if family.name == "pegasus":
        head = [("<pad>", 0.0), ("</s>", 0.0), ("<mask_1>", 0.0), ("<mask_2>", 0.0)]
        head += [(f"<unk_{i}>", -100.0) for i in range(2, PEGASUS_OFFSET)]
        return head + pieces[2:]
    if family.name in ("mbart", "mbart50"):
        head = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
        return head + pieces[3:] + [(c, 0.0) for c in family.language_codes] + [("<mask>", 0.0)]
    raise TokenizerError(f"a {family.name} tokenizer is not built from a SentencePiece model "
                         f"here (give its tokenizer.json)")


def _unigram_unk(family: Family, vocab: list[tuple[str, float]], name: str) -> int:
    if family.name == "t5":
        unk = 2
    elif family.name == "pegasus":
        unk = next((i for i in range(1, len(vocab)) if vocab[i] == ("<unk>", 0.0)), None)
        if unk is None:
            raise TokenizerError(f"{name}: a Pegasus vocabulary must hold '<unk>' with score 0 "
                                 f"after id 0")
    else:
        unk = 3
    if unk >= len(vocab):
        raise TokenizerError(f"{name}: the vocabulary has {len(vocab)} pieces, too few for "
                             f"the unknown piece's id {unk}")
    return unk


def build_backend(family: Family, data: TokenizerJson, *, name: str,
                  add_prefix_space: bool = False) -> Backend:
    """The family's pipeline over the checked vocabulary ``data`` (from tokenizer.json, or
    made from a SentencePiece model / vocab.json + merges.txt), with its special tokens added."""
    if data.model_type != family.model_type:
        raise TokenizerError(f"{name}: a {family.name} tokenizer has a {family.model_type} model, "
                             f"this file holds a {data.model_type} model")
    charsmap = data.charsmap
    try:
        if family.model_type == "Unigram":
            vocab = list(data.vocab)
            if family.name == "mbart50" and not any(p in family.language_codes
                                                    for p, _ in vocab):
                # MBart50Tokenizer, given a vocabulary without language codes, lays one out
                vocab = ([("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + vocab[3:]
                         + [(c, 0.0) for c in family.language_codes] + [("<mask>", 0.0)])
            if len(vocab) > limits.MAX_VOCAB:
                raise TokenizerError(f"{name}: {len(vocab):,} pieces, more than the "
                                     f"{limits.MAX_VOCAB:,} a vocabulary may have")
            unk = _unigram_unk(family, vocab, name)
            tk = Backend(Unigram(vocab, unk_id=unk, byte_fallback=False))
            replace_spaces = normalizers.Replace(Regex(r" {2,}"), " ")
            if family.name == "mbart":
                tk.normalizer = None
            elif family.name == "mbart50":
                parts = [replace_spaces]
                if charsmap:
                    parts = [normalizers.Precompiled(charsmap)] + parts
                tk.normalizer = normalizers.Sequence(parts)
            elif family.name == "t5":
                if charsmap:
                    tk.normalizer = normalizers.Precompiled(charsmap)
            elif family.name == "pegasus":
                first = (normalizers.Precompiled(charsmap) if charsmap
                         else normalizers.Replace(Regex(r"\n"), " "))
                tk.normalizer = normalizers.Sequence([first, replace_spaces])
            if family.name in ("mbart", "t5"):
                tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                            _metaspace_pre()])
            else:
                tk.pre_tokenizer = _metaspace_pre()
            tk.decoder = _metaspace_dec()
        elif family.name == "bart":
            tk = Backend(BPE(vocab=dict(data.vocab), merges=list(data.merges), dropout=None,
                             continuing_subword_prefix="", end_of_word_suffix="",
                             fuse_unk=False))
            tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
            tk.decoder = decoders.ByteLevel()
        else:  # nllb
            if "<unk>" not in data.vocab:
                raise TokenizerError(f"{name}: an NLLB vocabulary must hold '<unk>'")
            tk = Backend(BPE(vocab=dict(data.vocab), merges=list(data.merges), dropout=None,
                             unk_token="<unk>", fuse_unk=True, byte_fallback=False))
            if charsmap:
                tk.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap),
                                                      normalizers.Replace(Regex(r" {2,}"), " ")])
            tk.pre_tokenizer = _metaspace_pre()
            tk.decoder = _metaspace_dec()
    except TokenizerError:
        raise
    except Exception as err:  # the library's own refusal of data that passed our checks
        detail = " ".join(str(err).split())[:200]
        raise TokenizerError(f"{name}: the tokenizers library cannot build the "
                             f"{family.name} model ({detail})") from None
    _add_tokens(tk, family, data.added_tokens, name)
    return tk


def _add_tokens(tk: Backend, family: Family, listed: list[dict], name: str) -> None:
    """The added tokens tokenizer.json lists (in id order, each at the id it gives), then the
    family's named specials and language codes that are not yet tokens of the vocabulary
    (special, at the next free ids), as transformers adds them. Each list goes to the library
    in one call (add_tokens honours each AddedToken's special): a call rebuilds the library's
    matchers, so a token a call made 3,800 added tokens take 16 s to open (issue 37)."""
    size = tk.get_vocab_size(with_added_tokens=True)
    given: dict[str, int] = {}  # content -> id, of the tokens listed so far
    tokens = []
    for item in sorted(listed, key=lambda t: t["id"]):
        content = item["content"]
        expected = given.get(content, tk.token_to_id(content))
        if expected is None and item["id"] != size:
            raise TokenizerError(f"{name}: the added token {content[:40]!r} has id "
                                 f"{item['id']}, but the next free id is {size}")
        if expected is not None and expected != item["id"]:
            raise TokenizerError(f"{name}: the added token {content[:40]!r} has id "
                                 f"{item['id']}, but the vocabulary gives it id {expected}")
        if expected is None:
            size += 1
        given[content] = item["id"]
        tokens.append(AddedToken(content, single_word=item["single_word"], lstrip=item["lstrip"],
                                 rstrip=item["rstrip"], normalized=item["normalized"],
                                 special=item["special"]))
    tk.add_tokens(tokens)
    moved = next((c for c, i in given.items() if tk.token_to_id(c) != i), None)
    if moved is not None:  # what the library did differs from the ids counted above
        raise TokenizerError(f"{name}: the added token {moved[:40]!r} has id {given[moved]}, "
                             f"but the tokenizers library gives it id {tk.token_to_id(moved)}")
    present = {t.content for t in tk.get_added_tokens_decoder().values()}
    wanted = [text for _, text in family.specials]
    if family.name == "t5":
        wanted += [t for t, _ in _vocab_items(tk) if t.startswith("<extra_id_")]
    elif family.name == "pegasus":
        wanted += [f"<unk_{i}>" for i in range(2, PEGASUS_OFFSET)]
    wanted += list(family.language_codes)  # NLLB's too: NllbTokenizer adds every code
    added, specials = 0, []
    for text in dict.fromkeys(wanted):
        if text in present:
            continue
        if tk.token_to_id(text) is None:
            added += 1
            if added > MAX_ADDED_TOKENS:
                raise TokenizerError(f"{name}: more than {MAX_ADDED_TOKENS} special tokens to add")
        lstrip = text == "<mask>" and family.name in ("mbart", "mbart50", "nllb")
        normalized = text == "<mask>" and family.name == "nllb"
        specials.append(AddedToken(text, lstrip=lstrip, normalized=normalized, special=True))
    if len(specials) > MAX_ADDED_TOKENS:  # pieces of the vocabulary made special count too: a
        # T5 vocabulary of 261,924 <extra_id_N> pieces took 600 MB and 7-14 s (issue 37)
        raise TokenizerError(f"{name}: {len(specials):,} special tokens, more than the "
                             f"{MAX_ADDED_TOKENS:,} a tokenizer may have")
    tk.add_special_tokens(specials)  # one call (T5's 100 <extra_id_N>, NLLB's 202 codes)


def _vocab_items(tk: Backend):
    return tk.get_vocab(with_added_tokens=False).items()
