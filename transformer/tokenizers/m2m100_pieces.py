"""M2M100 tokenizer: the SentencePiece model (sentencepiece.bpe.model) with the ids of vocab.json,
and the language tokens after them, as transformers' (slow, Python) ``M2M100Tokenizer`` does:

* the text is first cut at the special tokens it holds (``<s>``, ``</s>``, ``<pad>``,
  ``<unk>``: the earliest, then the longest, as transformers' trie cuts), each one piece; the
  rest goes through the SentencePiece model's ``encode(text, out_type=str)``. transformers 5.23
  registers no language token as special, so a typed ``__de__`` is ordinary text here too;
* ids: a language token ``__xx__`` is ``len(vocab.json)`` + the index of ``xx`` in the language
  list (``language_codes`` "m2m100": 100 codes, or "wmt21": 8; hf_families.M2M100_CODES);
  every other piece goes through vocab.json, ``<unk>`` when it lacks it. After the language
  tokens come ``num_madeup_words`` (8) ids transformers names ``<unk>``;
* ``encode(add_start=True, add_end=True)``: ``__src__`` X ``</s>`` on the source side and
  ``__tgt__`` X ``</s>`` on the target side (``tok(text)`` / ``tok(text_target=text)``);
  ``start_id`` is the side's language token (the forced first token of a translation into that
  language: ``language_ids[code]``), ``end_id`` the ``</s>`` id;
* decode: the specials dropped (``skip_special_tokens=True``), SentencePiece's
  ``decode`` of the rest, stripped; it stops at the first ``</s>``. A language token is
  decoded as its text, as transformers 5.23 does ("__fr__ Bonjour"), except this side's own
  (``start_id``), which is dropped as every tokenizer here drops its start id: transformers'
  decode of a translation begins with "__fr__ ", ours does not.

A model whose embedding has more rows than these ids (``padded_vocab_size``, or
:meth:`M2M100Tokenizer.pad_vocabulary`; the hub's M2M100 models have none) has ids from
``own_vocab_size`` to ``vocab_size`` that no text gives, named ``[unused N]`` (base.UNUSED_NAME)
and decoded as the made-up words are, "<unk>", as transformers decodes an id it has no token for;
the spec records the padded size (``padded_vocab_size``, left out when there is no padding).

``model_bytes``: the SentencePiece model and vocab.json in one uncompressed ZIP, as Marian's
(spm_vocab.pack).
"""

from __future__ import annotations

import copy
import functools
import operator
import re

from transformer.core.text import clean_text
from transformer.tokenizers.base import (
    UNUSED_NAME,
    Tokenizer,
    TokenizerError,
    check_matches,
    check_padded_vocab_size,
    check_spec_ids,
    check_text,
    gc_paused,
    is_int,
    sentencepiece_spans,
)
from transformer.tokenizers.hf_families import M2M100_CODES
from transformer.tokenizers.hf_files import read_sentencepiece
from transformer.tokenizers.spm_vocab import (
    MODEL_MEMBER,
    VOCAB_MEMBER,
    check_vocab,
    load_sentencepiece,
    pack,
    parse_vocab_json,
    unpack,
    vocab_json_data,
)

__all__ = ["M2M100Tokenizer", "SIDES", "SPM_FILE", "MAX_MADEUP_WORDS"]

SIDES = ("source", "target")
SPM_FILE = "sentencepiece.bpe.model"
NAMED = (("bos", "<s>"), ("eos", "</s>"), ("pad", "<pad>"), ("unk", "<unk>"))
MAX_MADEUP_WORDS = 1024


class M2M100Tokenizer(Tokenizer):
    """One side (and language) of an M2M100 tokenizer (see the module)."""

    kind = "m2m100"
    prefix_start = True
    title = "M2M100"  # in sentences
    CONFIG_OPTIONS = ("language_codes", "num_madeup_words")  # read of tokenizer_config.json

    def described(self) -> tuple[str, str]:
        return ("SentencePiece", "M2M100's tokenizer: a SentencePiece model "
                                 "(sentencepiece.bpe.model), pieces numbered by vocab.json.")
    SPEC_FIELDS = ("kind", "side", "language", "language_codes", "num_madeup_words", "pad_id",
                   "unk_id", "start_id", "end_id", "vocab_size")
    OPTIONAL_SPEC_FIELDS = ("padded_vocab_size",)  # given when the model has unused rows

    def __init__(self, spm_bytes: bytes, vocab: dict[str, int], side: str,
                 language: str | None = None, *, language_codes: str = "m2m100",
                 num_madeup_words: int = 8, spm_name: str = SPM_FILE,
                 vocab_name: str = "vocab.json", padded_vocab_size: int | None = None):
        if side not in SIDES:
            raise TokenizerError(f"side: must be one of {SIDES}, got {side!r}")
        if language_codes not in M2M100_CODES:
            raise TokenizerError(f"language_codes: must be one of {tuple(M2M100_CODES)}, got "
                                 f"{str(language_codes)[:40]!r}")
        if not is_int(num_madeup_words) or not 0 <= num_madeup_words <= MAX_MADEUP_WORDS:
            raise TokenizerError(f"num_madeup_words: expected an int in [0, "
                                 f"{MAX_MADEUP_WORDS}], got {num_madeup_words!r}"[:200])
        read_sentencepiece(spm_bytes, spm_name)  # bounds, then the rules checked
        self.sp = load_sentencepiece(spm_bytes, spm_name)
        check_vocab(vocab, vocab_name)
        self.side, self.language_codes = side, language_codes
        self.num_madeup_words = num_madeup_words
        self.vocab = dict(vocab)
        missing = [t for _, t in NAMED if t not in self.vocab]
        if missing:
            raise TokenizerError(f"{vocab_name}: has no {', '.join(missing)} (an M2M100 "
                                 f"vocabulary has <s>, </s>, <pad> and <unk>)")
        ids = {role: self.vocab[text] for role, text in NAMED}
        self.bos_id, self.eos_id, self.pad_id, self.unk_id = (ids["bos"], ids["eos"],
                                                              ids["pad"], ids["unk"])
        n = len(self.vocab)
        codes = M2M100_CODES[language_codes]
        self.language_tokens = {c: f"__{c}__" for c in codes}
        self.language_ids = {c: n + i for i, c in enumerate(codes)}
        self.vocab_size = n + len(codes) + num_madeup_words
        self.own_vocab_size = self.vocab_size  # the ids the tokenizer names
        self.pieces_by_id = [""] * self.vocab_size
        for piece, i in self.vocab.items():
            self.pieces_by_id[i] = piece
        for c, i in self.language_ids.items():
            self.pieces_by_id[i] = self.language_tokens[c]
        for k in range(num_madeup_words):
            self.pieces_by_id[n + len(codes) + k] = "<unk>"  # transformers' name for them
        # the tokens the text is cut at, and their ids
        # (transformers 5.23 registers no language token as a special token: a typed "__de__"
        # is text, and decoding keeps a language token as its text)
        self._special_ids = {t: self.vocab[t] for _, t in NAMED}
        tokens = sorted(self._special_ids, key=lambda t: (-len(t), t))
        self._split = re.compile("|".join(map(re.escape, tokens)))
        self._skipped = set(self._special_ids.values())
        self._special_texts = set(self._special_ids)
        self._take_language(language)
        self._spm_bytes = bytes(spm_bytes)
        if padded_vocab_size is not None:
            self.pad_vocabulary(padded_vocab_size)
        self.probe(f"the {side} M2M100 tokenizer ({spm_name} with {vocab_name})")

    def _take_language(self, language: str | None) -> None:
        """The side's language (English when None; one of the vocabulary's codes) and the ids
        put around a text."""
        language = "en" if language is None else language
        if not isinstance(language, str) or language not in self.language_ids:
            raise TokenizerError(f"language: {str(language)[:40]!r} is not one of the "
                                 f"{self.language_codes} language codes")
        self.language = language
        self.prefix_ids = [self.language_ids[language]]
        self.suffix_ids = [self.eos_id]
        self.start_id, self.end_id = self.prefix_ids[0], self.eos_id

    @functools.cached_property
    def model_bytes(self) -> bytes:
        """The SentencePiece model and vocab.json in one ZIP (spm_vocab.pack), made when first
        asked for (a checkpoint's save: writing vocab.json took 0.2 s of every open)."""
        return pack(self._spm_bytes, vocab_json_data(self.vocab))

    def other_side(self, side: str, language: str | None = None) -> "M2M100Tokenizer":
        """The tokenizer of the pair's other side: this one's model, vocabulary and pieces (the
        same files make both sides), with its own side and language, whose texts are probed
        (every id's piece and decoding are the shared ones, probed once)."""
        if side not in SIDES:
            raise TokenizerError(f"side: must be one of {SIDES}, got {side!r}")
        other = copy.copy(self)
        other.side = side
        other._take_language(language)
        other.probe(f"the {side} M2M100 tokenizer", every_id=False)
        return other

    def pad_vocabulary(self, size: int) -> None:
        """Serve a model whose embedding has ``size`` rows, at least the tokenizer's ids: ids
        from ``own_vocab_size`` to ``size`` are unused (named UNUSED_NAME, never encoded,
        decoded as "<unk>"); ``vocab_size`` becomes ``size``. A TokenizerError for a size below
        the tokenizer's ids or above limits.MAX_VOCAB."""
        size = check_padded_vocab_size(size, self.own_vocab_size)
        self.pieces_by_id = self.pieces_by_id[:self.own_vocab_size] + [
            UNUSED_NAME.format(i) for i in range(self.own_vocab_size, size)]
        self.vocab_size = size

    @classmethod
    def from_files(cls, files: dict, side: str, language: str | None = None,
                   *, padded_vocab_size: int | None = None, **options) -> "M2M100Tokenizer":
        """From the model's files (name -> bytes): vocab.json and sentencepiece.bpe.model.
        ``options``: ``language_codes`` ("m2m100"/"wmt21"), ``num_madeup_words`` (8);
        ``padded_vocab_size``: the model's rows, when more (pad_vocabulary)."""
        if not isinstance(files, dict) or any(f not in files for f in ("vocab.json", SPM_FILE)):
            given = sorted(map(str, files))[:6] if isinstance(files, dict) else files
            raise TokenizerError(f"an M2M100 tokenizer needs vocab.json and {SPM_FILE}; given "
                                 f"{given!r}"[:300])
        unknown = sorted(set(map(str, options)) - {"language_codes", "num_madeup_words"})
        if unknown:
            raise TokenizerError(f"options: unknown option(s) {', '.join(map(repr, unknown[:5]))} "
                                 f"(known: language_codes, num_madeup_words)")
        with gc_paused():  # the vocabulary's and the model's pieces (base.gc_paused)
            vocab = parse_vocab_json(files["vocab.json"], "vocab.json")
            tok = cls(files[SPM_FILE], vocab, side, language,
                      padded_vocab_size=padded_vocab_size, **options)
            del vocab
        return tok

    # ----------------------------------------------------------------- text -> ids

    def _chunks(self, text: str):
        """(start, chunk, is_special) over the text, cut at the special tokens."""
        pos = 0
        for m in self._split.finditer(text):
            if m.start() > pos:
                yield pos, text[pos:m.start()], False
            yield m.start(), m.group(), True
            pos = m.end()
        if pos < len(text):
            yield pos, text[pos:], False

    def _preprocess(self, text: str) -> str:
        return check_text(text)

    def _pieces(self, text: str) -> list[str]:
        out = []
        for _, chunk, special in self._chunks(check_text(text)):
            out.extend([chunk] if special else self.sp.encode(chunk, out_type=str))
        return out

    def _piece_spans(self, text: str) -> list[tuple[int, int]]:
        out = []
        for start, chunk, special in self._chunks(check_text(text)):
            if special:
                out.append((start, start + len(chunk)))
            else:
                out.extend((start + b, start + e) for b, e in sentencepiece_spans(self.sp, chunk))
        return out

    def _piece_ids(self, text: str) -> list[int]:
        out = []
        for _, chunk, special in self._chunks(check_text(text)):
            if special:
                out.append(self._special_ids[chunk])
            else:
                out.extend(self.vocab.get(p, self.unk_id)
                           for p in self.sp.encode(chunk, out_type=str))
        return out

    def encode(self, text: str, *, add_start: bool = False, add_end: bool = False,
               max_len: int | None = None) -> list[int]:
        """Ids of the text; ``add_start``: the side's language token, ``add_end``: ``</s>``
        (both: transformers' ids); ``max_len`` truncates the pieces, keeping them."""
        prefix = self.prefix_ids if add_start else []
        suffix = self.suffix_ids if add_end else []
        ids = self._piece_ids(clean_text(text)[0])
        if max_len is not None:
            max_len = operator.index(max_len)
            if max_len < len(prefix) + len(suffix):
                raise ValueError(f"max_len={max_len} leaves no room for the special ids")
            ids = ids[:max_len - len(prefix) - len(suffix)]
        return list(prefix) + ids + list(suffix)

    # ----------------------------------------------------------------- ids -> text

    def id_to_piece(self, i: int) -> str:
        return self.pieces_by_id[self._check_id(i)]

    def ids_to_pieces(self, ids) -> list[str]:
        pieces = self.pieces_by_id
        return [pieces[i] for i in self._checked_ids(ids)]

    def _decode_kept(self, ids: list[int]) -> str:
        """M2M100Tokenizer.convert_tokens_to_string of the non-special pieces (an unused id is
        "<unk>", transformers' token for an id it has none for): SentencePiece's decode of the
        pieces between those that name a special token, which stay as they are."""
        own, table, skipped = self.own_vocab_size, self.pieces_by_id, self._skipped
        pieces = [table[i] if i < own else "<unk>" for i in ids if i not in skipped]
        specials = self._special_texts
        out, start = "", 0
        for k in [k for k, piece in enumerate(pieces) if piece in specials]:
            out += self.sp.decode(pieces[start:k]) + pieces[k]
            start = k + 1
        return (out + self.sp.decode(pieces[start:])).strip()

    # ----------------------------------------------------------------- spec / loading

    def spec(self) -> dict:
        """What a checkpoint stores with model_bytes: ``vocab_size`` is the tokenizer's own
        ids, ``padded_vocab_size`` (only when larger) the model's rows."""
        spec = {"kind": self.kind, "side": self.side, "language": self.language,
                "language_codes": self.language_codes, "num_madeup_words": self.num_madeup_words,
                "pad_id": self.pad_id, "unk_id": self.unk_id, "start_id": self.start_id,
                "end_id": self.end_id, "vocab_size": self.own_vocab_size}
        if self.vocab_size > self.own_vocab_size:
            spec["padded_vocab_size"] = self.vocab_size
        return spec

    @classmethod
    def _from_valid_spec(cls, spec: dict, model_bytes: bytes) -> "M2M100Tokenizer":
        for key in ("side", "language", "language_codes"):
            if not isinstance(spec[key], str):
                raise TokenizerError(f"{key}: expected a string, got {type(spec[key]).__name__}")
        names = ("pad_id", "unk_id", "start_id", "end_id")
        check_spec_ids(spec, names)
        padded = spec.get("padded_vocab_size")
        if padded is not None:
            check_padded_vocab_size(padded, spec["vocab_size"])
        spm_bytes, vocab_json_bytes = unpack(model_bytes)
        tok = cls(spm_bytes, parse_vocab_json(vocab_json_bytes, f"model_bytes' {VOCAB_MEMBER}"),
                  spec["side"], spec["language"], language_codes=spec["language_codes"],
                  num_madeup_words=spec["num_madeup_words"],
                  spm_name=f"model_bytes' {MODEL_MEMBER}",
                  vocab_name=f"model_bytes' {VOCAB_MEMBER}", padded_vocab_size=padded)
        check_matches(spec, tok.spec(), ("vocab_size",) + names, "vocabulary")
        return tok
