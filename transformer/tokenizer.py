"""Subword tokenizer on BPEmb: standard BPEmb models or SentencePiece BPE models trained here.

Id layouts:

* ``kind="bpemb"`` (standard BPEmb model): ``<unk>=0``, ``<s>=1``, ``</s>=2``; the model has no
  pad piece, so pad gets the extra id ``piece_count`` and ``vocab_size = piece_count + 1``.
* ``kind="trained"``: ``<pad>=0``, ``<unk>=1``, ``<s>=2``, ``</s>=3``; ``vocab_size = piece_count``.
"""

from __future__ import annotations

import io
import operator
import re
import tempfile
from pathlib import Path
from typing import Iterable

import numpy as np
import sentencepiece as spm
from bpemb import BPEmb

__all__ = ["Tokenizer", "TokenizerError", "DEFAULT_CACHE_DIR"]

# Same default as BPEmb(cache_dir=...); spelled out so error messages can name it.
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "bpemb"

KINDS = ("bpemb", "trained")
SPEC_FIELDS = (
    "kind", "lang", "vs", "lowercase", "digits_to_zero",
    "pad_id", "start_id", "end_id", "unk_id", "vocab_size",
)
PAD_PIECE, UNK_PIECE, START_PIECE, END_PIECE = "<pad>", "<unk>", "<s>", "</s>"
_DIGIT = re.compile(r"\d")  # same pattern as BPEmb.preprocess: every Unicode digit


class TokenizerError(ValueError):
    """A tokenizer model or spec cannot be built, loaded or validated."""


class Tokenizer:
    """Subword tokenizer wrapping a segmentation-only ``bpemb.BPEmb``.

    Build it with :meth:`from_bpemb`, :meth:`train` or :meth:`from_spec`.
    """

    def __init__(self, bpemb: BPEmb, model_bytes: bytes, *, kind: str, lang: str | None,
                 vs: int | None, lowercase: bool, digits_to_zero: bool):
        if kind not in KINDS:
            raise TokenizerError(f"kind: must be one of {KINDS}, got {kind!r}")
        sp = bpemb.spm
        n = sp.get_piece_size()
        self.kind = kind
        self.lang = lang
        self.vs = vs
        self.lowercase = bool(lowercase)
        self.digits_to_zero = bool(digits_to_zero)
        self.bpemb = bpemb
        self.model_bytes = bytes(model_bytes)
        self.unk_id = sp.unk_id()
        self.start_id = sp.bos_id()
        self.end_id = sp.eos_id()
        # Standard BPEmb models have no pad piece: pad is one id past the model's pieces.
        extra_pad = sp.pad_id() < 0
        self.pad_id = n if extra_pad else sp.pad_id()
        self.vocab_size = n + 1 if extra_pad else n
        ids = {"unk_id": self.unk_id, "start_id": self.start_id, "end_id": self.end_id}
        missing = [name for name, i in ids.items() if i < 0]
        if missing:
            raise TokenizerError(f"SentencePiece model has no {', '.join(missing)}")
        if len({self.pad_id, self.unk_id, self.start_id, self.end_id}) != 4:
            raise TokenizerError("SentencePiece model's pad/start/end/unk ids are not distinct")

    def __repr__(self) -> str:
        s = self.spec()
        return "Tokenizer(" + ", ".join(f"{k}={s[k]!r}" for k in SPEC_FIELDS) + ")"

    # ----------------------------------------------------------------- text -> ids

    def preprocess(self, text: str) -> str:
        """Apply the recorded lowercase / digits_to_zero options (as BPEmb.preprocess does)."""
        return _preprocess(text, self.lowercase, self.digits_to_zero)

    def pieces(self, text: str) -> list[str]:
        """Subword pieces of the preprocessed text, without specials."""
        return list(self.bpemb.encode(self.preprocess(text)))

    def encode(self, text: str, *, add_start: bool = False, add_end: bool = False,
               max_len: int | None = None) -> list[int]:
        """Ids of the preprocessed text; ``max_len`` truncates the pieces, keeping start/end."""
        ids = list(self.bpemb.spm.encode_as_ids(self.preprocess(text)))
        n_special = int(bool(add_start)) + int(bool(add_end))
        if max_len is not None:
            max_len = operator.index(max_len)
            if max_len < n_special:
                raise ValueError(f"max_len={max_len} leaves no room for the start/end ids")
            ids = ids[:max_len - n_special]
        return ([self.start_id] if add_start else []) + ids + ([self.end_id] if add_end else [])

    def piece_spans(self, text: str) -> list[tuple[int, int]]:
        """Character ``(begin, end)`` of each piece in ``preprocess(text)``.

        A piece made only of the ``▁`` SentencePiece adds (or of part of a character that
        normalization expanded, like "ﬁ") gets an empty span.
        """
        sp = self.bpemb.spm
        text = self.preprocess(text)
        if hasattr(sp, "encode_as_offset_mapping"):
            # sentencepiece 0.2.3 (the pinned one) refuses the immutable proto; its offset
            # mapping replaces it and already gives character offsets.
            return [(int(b), int(e)) for b, e in sp.encode_as_offset_mapping(text)["offsets"]]
        # Older sentencepiece: the immutable proto's begin/end are UTF-8 byte offsets.
        proto = sp.encode_as_immutable_proto(text)
        return _byte_to_char_spans(text, [(p.begin, p.end) for p in proto.pieces])

    # ----------------------------------------------------------------- ids -> text

    def id_to_piece(self, i: int) -> str:
        """Piece string of id ``i`` ("<pad>", "<s>", "</s>", "<unk>" for the specials)."""
        i = self._check_id(i)
        if i == self.pad_id:
            return PAD_PIECE
        if i == self.unk_id:
            return UNK_PIECE
        return self.bpemb.spm.id_to_piece(i)

    def ids_to_pieces(self, ids) -> list[str]:
        """Piece string of every id, specials included."""
        return [self.id_to_piece(i) for i in _as_id_list(ids)]

    def decode(self, ids) -> str:
        """Text of ``ids``: drops pad and start, stops at the first end; unk decodes as " ⁇ "."""
        kept = []
        for i in _as_id_list(ids):
            i = self._check_id(i)
            if i == self.end_id:
                break
            if i not in (self.pad_id, self.start_id):
                kept.append(i)
        return self.bpemb.spm.decode_ids(kept) if kept else ""

    def _check_id(self, i) -> int:
        try:
            i = operator.index(i)
        except TypeError:
            raise ValueError(f"token id must be an integer, got {i!r}") from None
        if not 0 <= i < self.vocab_size:
            raise ValueError(f"token id {i} out of range [0, {self.vocab_size})")
        return i

    # ----------------------------------------------------------------- spec / loading

    def spec(self) -> dict:
        """JSON-able description; with ``model_bytes`` it rebuilds the tokenizer (see from_spec)."""
        return {
            "kind": self.kind, "lang": self.lang, "vs": self.vs,
            "lowercase": self.lowercase, "digits_to_zero": self.digits_to_zero,
            "pad_id": self.pad_id, "start_id": self.start_id, "end_id": self.end_id,
            "unk_id": self.unk_id, "vocab_size": self.vocab_size,
        }

    @classmethod
    def from_spec(cls, spec: dict, model_bytes: bytes) -> "Tokenizer":
        """Rebuild a tokenizer from ``spec()`` and the SentencePiece model bytes."""
        spec = _validate_spec(spec)
        if not isinstance(model_bytes, (bytes, bytearray, memoryview)):
            raise TokenizerError(f"model_bytes: expected bytes, got {type(model_bytes).__name__}")
        tok = cls(_bpemb_from_bytes(bytes(model_bytes)), model_bytes, kind=spec["kind"],
                  lang=spec["lang"], vs=spec["vs"], lowercase=spec["lowercase"],
                  digits_to_zero=spec["digits_to_zero"])
        got = tok.spec()
        for name in ("vocab_size", "pad_id", "start_id", "end_id", "unk_id"):
            if got[name] != spec[name]:
                raise TokenizerError(
                    f"{name}: spec says {spec[name]} but the SentencePiece model gives {got[name]}")
        return tok

    @classmethod
    def from_bpemb(cls, lang: str, vs: int, *, cache_dir=None, lowercase: bool = True,
                   digits_to_zero: bool = True) -> "Tokenizer":
        """Standard BPEmb model for ``lang``/``vs``, from BPEmb's cache or downloaded into it.

        ``lowercase``/``digits_to_zero`` default to True because that is how BPEmb's models
        were trained.
        """
        if not isinstance(lang, str) or lang not in BPEmb.available_languages:
            raise TokenizerError(f"lang: {lang!r} is not a BPEmb language code (e.g. 'en')")
        if isinstance(vs, bool) or not isinstance(vs, int):
            raise TokenizerError(f"vs: expected int, got {vs!r}")
        available = sorted(BPEmb.available_vocab_sizes(lang))
        if vs not in available:
            raise TokenizerError(f"vs: BPEmb has no vs={vs} model for {lang!r}; "
                                 f"available: {available}")
        cache_dir = Path(DEFAULT_CACHE_DIR if cache_dir is None else cache_dir).expanduser()
        model_path = cache_dir / BPEmb.model_tpl.format(lang=lang, vs=vs)
        try:
            # vs_fallback=False: BPEmb would otherwise silently swap in another vocab size.
            bpemb = BPEmb(lang=lang, vs=vs, cache_dir=cache_dir, segmentation_only=True,
                          preprocess=False, vs_fallback=False)
        except OSError as e:  # requests' errors are OSErrors too
            if model_path.exists():
                raise TokenizerError(f"cannot read BPEmb model {model_path}: {e}") from None
            url = BPEmb.base_url + BPEmb.model_tpl.format(lang=lang, vs=vs)
            raise TokenizerError(
                f"BPEmb model file {model_path} is missing from the cache folder {cache_dir} "
                f"and could not be downloaded from {url} ({type(e).__name__}). "
                f"Connect to the network once, or copy the file there.") from None
        except RuntimeError as e:  # sentencepiece's "could not parse ModelProto"
            raise TokenizerError(f"cannot load BPEmb model {model_path}: {e}") from None
        return cls(bpemb, Path(bpemb.model_file).read_bytes(), kind="bpemb", lang=lang, vs=vs,
                   lowercase=lowercase, digits_to_zero=digits_to_zero)

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, lowercase: bool = True,
              digits_to_zero: bool = False, split_digits: bool = True,
              seed: int = 0) -> "Tokenizer":
        """Train a SentencePiece BPE model on ``texts`` (preprocessed first), in memory.

        ``vocab_size`` is a soft limit (``hard_vocab_limit=False``) so small corpora work;
        ``split_digits`` makes every digit its own piece.
        """
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 5:
            raise TokenizerError(f"vocab_size: expected an int >= 5, got {vocab_size!r}")
        count = 0

        def sentences():
            nonlocal count
            for t in texts:
                count += 1
                yield _preprocess(t, lowercase, digits_to_zero)

        writer = io.BytesIO()
        # This sentencepiece has no random_seed training flag; the global seed is its knob.
        spm.set_random_generator_seed(int(seed))
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=sentences(), model_writer=writer, model_type="bpe",
                vocab_size=vocab_size, hard_vocab_limit=False, character_coverage=1.0,
                split_digits=bool(split_digits), num_threads=1,
                pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece=PAD_PIECE,
                unk_piece=UNK_PIECE, bos_piece=START_PIECE, eos_piece=END_PIECE,
                minloglevel=2)
        except RuntimeError as e:
            if count == 0:
                raise TokenizerError("texts: the training corpus is empty") from None
            raise TokenizerError(f"SentencePiece training failed: {e}") from None
        model_bytes = writer.getvalue()
        return cls(_bpemb_from_bytes(model_bytes), model_bytes, kind="trained", lang=None,
                   vs=None, lowercase=lowercase, digits_to_zero=digits_to_zero)


def _preprocess(text: str, lowercase: bool, digits_to_zero: bool) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    if lowercase:
        text = text.lower()
    if digits_to_zero:
        text = _DIGIT.sub("0", text)
    return text


def _bpemb_from_bytes(model_bytes: bytes) -> BPEmb:
    """Load SentencePiece model bytes through BPEmb(model_file=...) via a temporary file."""
    if not model_bytes:
        raise TokenizerError("model_bytes: empty SentencePiece model")
    with tempfile.TemporaryDirectory(prefix="tokenizer-") as tmp:
        path = Path(tmp) / "model.model"
        path.write_bytes(model_bytes)
        try:
            # BPEmb 0.3.6 asserts emb_file is not None whenever lang is None, even with
            # segmentation_only=True (which never reads it), so pass the model path again.
            return BPEmb(model_file=path, emb_file=path, segmentation_only=True,
                         preprocess=False)
        except (RuntimeError, OSError):  # the library's message names our temporary file
            raise TokenizerError("model_bytes: not a valid SentencePiece model") from None


def _validate_spec(spec) -> dict:
    if not isinstance(spec, dict):
        raise TokenizerError(f"spec: expected dict, got {type(spec).__name__}")
    unknown = sorted(set(spec) - set(SPEC_FIELDS), key=str)
    if unknown:
        raise TokenizerError(f"spec: unknown field(s) {', '.join(map(repr, unknown))}")
    missing = [k for k in SPEC_FIELDS if k not in spec]
    if missing:
        raise TokenizerError(f"spec: missing field(s) {', '.join(map(repr, missing))}")

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    kind = spec["kind"]
    if kind not in KINDS:
        raise TokenizerError(f"kind: must be one of {KINDS}, got {kind!r}")
    if kind == "bpemb":
        if not isinstance(spec["lang"], str) or not spec["lang"]:
            raise TokenizerError(f"lang: expected a language code, got {spec['lang']!r}")
        if not is_int(spec["vs"]) or spec["vs"] <= 0:
            raise TokenizerError(f"vs: expected a positive int, got {spec['vs']!r}")
    else:
        for name in ("lang", "vs"):
            if spec[name] is not None:
                raise TokenizerError(f"{name}: must be None for kind='trained', "
                                     f"got {spec[name]!r}")
    for name in ("lowercase", "digits_to_zero"):
        if not isinstance(spec[name], bool):
            raise TokenizerError(f"{name}: expected bool, got {spec[name]!r}")
    if not is_int(spec["vocab_size"]) or spec["vocab_size"] <= 0:
        raise TokenizerError(f"vocab_size: expected a positive int, got {spec['vocab_size']!r}")
    for name in ("pad_id", "start_id", "end_id", "unk_id"):
        if not is_int(spec[name]) or not 0 <= spec[name] < spec["vocab_size"]:
            raise TokenizerError(f"{name}: expected an int in [0, vocab_size), "
                                 f"got {spec[name]!r}")
    return dict(spec)


def _as_id_list(ids) -> list:
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D sequence of ids, got shape {arr.shape}")
    return arr.tolist()


def _byte_to_char_spans(text: str, spans) -> list[tuple[int, int]]:
    """Turn UTF-8 byte offsets into character offsets of ``text``."""
    char_at = []  # char_at[byte offset] = char offset
    for ci, ch in enumerate(text):
        char_at.extend([ci] * len(ch.encode("utf-8")))
    char_at.append(len(text))
    return [(char_at[b], char_at[e]) for b, e in spans]
