"""The ``tokenizers``-library pipeline of a Hugging Face family's tokenizer (a TokenizerFamily
record, hf_families), built the way transformers 5.23 builds it, from checked data (hf_files).

(Metaspace: "▁", prepend_scheme "always", split. A Unigram model's unk id is the record's, or the
first "<unk>" of score 0 after id 0, Pegasus's.)

The vocabulary from a SentencePiece model is laid out as transformers' converters lay it out
(the record's sentencepiece_head, _skip and _tail): T5's pieces then ``<extra_id_{n-1}>`` ..
``<extra_id_0>`` (n = extra_ids, 100); Pegasus's ``<pad>``, ``</s>``, ``<mask_1>``,
``<mask_2>``, ``<unk_2>`` .. ``<unk_102>`` (score -100), then the model's pieces from id 2 (so
``<unk>`` is 105); mBART's and mBART-50's ``<s>``, ``<pad>``, ``</s>``, ``<unk>``, the model's
pieces from id 3 (the fairseq offset of 1), the family's language codes, ``<mask>``.

Then the special tokens are added as transformers adds them (AddedToken, special): those a
tokenizer.json lists (their ids as it gives them; from a SentencePiece model, its control pieces
as special and its user-defined pieces as not, where the record says so), then the family's named
specials, added specials and language codes it lacks. Text that holds one of them (a typed "</s>")
is cut there as the library does; decoding skips them.
"""

from __future__ import annotations

from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers
from tokenizers import Tokenizer as Backend
from tokenizers.models import BPE, Unigram

from transformer.core import limits
from transformer.tokenizers.base import TokenizerError
from transformer.tokenizers.hf_families import FAMILIES, TokenizerFamily
from transformer.tokenizers.hf_files import (
    MAX_ADDED_TOKENS,
    SentencePieceData,
    TokenizerJson,
)

__all__ = ["FAMILIES", "build_backend", "vocab_from_sentencepiece"]


def _metaspace_pre():
    return pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)


def _metaspace_dec():
    return decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)


def vocab_from_sentencepiece(family: TokenizerFamily, spm: SentencePieceData, *,
                             extra_ids: int = 100, name: str = "the SentencePiece model"
                             ) -> list[tuple[str, float]]:
    """The Unigram vocabulary transformers' converter makes of a SentencePiece model."""
    if spm.model_type != "unigram":
        raise TokenizerError(f"{name}: a {family.name} tokenizer needs a unigram SentencePiece "
                             f"model, this one is {spm.model_type}")
    if family.sentencepiece_head is None:
        raise TokenizerError(f"a {family.name} tokenizer is not built from a SentencePiece model "
                             f"here (give its tokenizer.json)")
    pieces = [(p, s) for p, s, _ in spm.pieces]
    return _laid_out(family, pieces, extra_ids)


def _laid_out(family: TokenizerFamily, pieces: list, extra_ids: int = 100) -> list:
    """The family's head, the pieces after its skip, and its tail (codes and <mask>, or the
    extra ids)."""
    tail = []
    if family.sentencepiece_tail == "codes_and_mask":
        tail = [(c, 0.0) for c in family.language_codes] + [("<mask>", 0.0)]
    elif family.sentencepiece_tail == "extra_ids":
        tail = [(f"<extra_id_{i}>", 0.0) for i in range(extra_ids - 1, -1, -1)]
    return list(family.sentencepiece_head or ()) + pieces[family.sentencepiece_skip:] + tail


def _unigram_unk(family: TokenizerFamily, vocab: list[tuple[str, float]], name: str) -> int:
    unk = family.unigram_unk
    if unk is None:
        unk = next((i for i in range(1, len(vocab)) if vocab[i] == ("<unk>", 0.0)), None)
        if unk is None:
            raise TokenizerError(f"{name}: a {family.title} vocabulary must hold '<unk>' with "
                                 f"score 0 after id 0")
    if unk >= len(vocab):
        raise TokenizerError(f"{name}: the vocabulary has {len(vocab)} pieces, too few for "
                             f"the unknown piece's id {unk}")
    return unk


def _normalizer(family: TokenizerFamily, charsmap):
    """The family's normalizer steps over the rules the files give (None: no normalizer)."""
    steps = []
    for step in family.normalizer:
        if step == "precompiled" and charsmap:
            steps.append(normalizers.Precompiled(charsmap))
        elif step == "precompiled_or_newlines":
            steps.append(normalizers.Precompiled(charsmap) if charsmap
                         else normalizers.Replace(Regex(r"\n"), " "))
        elif step == "collapse_spaces" or step == "collapse_spaces_with_rules" and charsmap:
            steps.append(normalizers.Replace(Regex(r" {2,}"), " "))
    if not steps:
        return None
    return normalizers.Sequence(steps) if len(family.normalizer) > 1 else steps[0]


def build_backend(family: TokenizerFamily, data: TokenizerJson, *, name: str,
                  add_prefix_space: bool = False) -> tuple[Backend, dict[str, int]]:
    """The family's pipeline over the checked vocabulary ``data`` (from tokenizer.json, or
    made from a SentencePiece model / vocab.json + merges.txt), with its special tokens added,
    and its model's vocabulary (piece -> id) as the library's model holds it: the BPE
    vocabulary given, or the Unigram pieces at their places in the list (a repeated piece at its
    last), as the library maps them. With the added tokens
    (``get_added_tokens_decoder``) that is the library's ``get_vocab(with_added_tokens=True)``,
    without reading its 256,000 pieces back (0.16 s for NLLB-200's)."""
    if data.model_type != family.model_type:
        raise TokenizerError(f"{name}: a {family.name} tokenizer has a {family.model_type} model, "
                             f"this file holds a {data.model_type} model")
    try:
        if family.model_type == "Unigram":
            vocab = list(data.vocab)
            pieces = [p for p, _ in vocab]
            if family.lay_out_codes and frozenset(family.language_codes).isdisjoint(pieces):
                vocab = _laid_out(family, vocab)  # as the family's tokenizer lays one out
                pieces = [p for p, _ in vocab]
            if len(vocab) > limits.MAX_VOCAB:
                raise TokenizerError(f"{name}: {len(vocab):,} pieces, more than the "
                                     f"{limits.MAX_VOCAB:,} a vocabulary may have")
            unk = _unigram_unk(family, vocab, name)
            tk = Backend(Unigram(vocab, unk_id=unk, byte_fallback=False))
            model_vocab = dict(zip(pieces, range(len(pieces))))
        else:
            unk = family.bpe_options.get("unk_token")
            if unk is not None and unk not in data.vocab:
                raise TokenizerError(f"{name}: an {family.title} vocabulary must hold {unk!r}")
            model_vocab = dict(data.vocab)
            tk = Backend(BPE(vocab=model_vocab, merges=list(data.merges), dropout=None,
                             **family.bpe_options))
        normalizer = _normalizer(family, data.charsmap)
        if normalizer is not None:
            tk.normalizer = normalizer
        if family.pre_tokenizer == "byte_level":
            tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
            tk.decoder = decoders.ByteLevel()
        else:
            tk.pre_tokenizer = (_metaspace_pre() if family.pre_tokenizer == "metaspace" else
                                pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                         _metaspace_pre()]))
            tk.decoder = _metaspace_dec()
    except TokenizerError:
        raise
    except Exception as err:  # the library's own refusal of data that passed our checks
        detail = " ".join(str(err).split())[:200]
        raise TokenizerError(f"{name}: the tokenizers library cannot build the "
                             f"{family.name} model ({detail})") from None
    _add_tokens(tk, family, data.added_tokens, name)
    return tk, model_vocab


def _add_tokens(tk: Backend, family: TokenizerFamily, listed: list[dict], name: str) -> None:
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
    wanted = [text for _, text in family.specials] + list(family.added_specials)
    if family.adds_extra_ids:
        wanted += [t for t, _ in _vocab_items(tk) if t.startswith("<extra_id_")]
    wanted += list(family.language_codes)  # NLLB's too: NllbTokenizer adds every code
    added, specials = 0, []
    for text in dict.fromkeys(wanted):
        if text in present:
            continue
        if tk.token_to_id(text) is None:
            added += 1
            if added > MAX_ADDED_TOKENS:
                raise TokenizerError(f"{name}: more than {MAX_ADDED_TOKENS} special tokens to add")
        lstrip = text == "<mask>" and family.mask_lstrip
        normalized = text == "<mask>" and family.mask_normalized
        specials.append(AddedToken(text, lstrip=lstrip, normalized=normalized, special=True))
    if len(specials) > MAX_ADDED_TOKENS:  # pieces of the vocabulary made special count too: a
        # T5 vocabulary of 261,924 <extra_id_N> pieces took 600 MB and 7-14 s (issue 37)
        raise TokenizerError(f"{name}: {len(specials):,} special tokens, more than the "
                             f"{MAX_ADDED_TOKENS:,} a tokenizer may have")
    tk.add_special_tokens(specials)  # one call (T5's 100 <extra_id_N>, NLLB's 202 codes)


def _vocab_items(tk: Backend):
    return tk.get_vocab(with_added_tokens=False).items()
