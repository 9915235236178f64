"""Subword tokenizer on BPEmb: standard BPEmb models or SentencePiece BPE models trained here.

Id layouts:

* ``kind="bpemb"`` (standard BPEmb model): ``<unk>=0``, ``<s>=1``, ``</s>=2``; the model has no
  pad piece, so pad gets the extra id ``piece_count`` and ``vocab_size = piece_count + 1``.
* ``kind="trained"``: ``<pad>=0``, ``<unk>=1``, ``<s>=2``, ``</s>=3``; ``vocab_size = piece_count``.
"""

from __future__ import annotations

import io
import re
import tempfile
from pathlib import Path
from typing import Iterable

import sentencepiece as spm
from bpemb import BPEmb

from transformer.tokenizers.base import (
    Tokenizer,
    TokenizerError,
    check_bool,
    check_matches,
    check_spec_ids,
    check_text,
    is_int,
    sentencepiece_spans,
)
from transformer.tokenizers.sentencepiece_model import check_sentencepiece_model

__all__ = ["BPEmbTokenizer", "DEFAULT_CACHE_DIR"]

# Same default as BPEmb(cache_dir=...); spelled out so error messages can name it.
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "bpemb"

KINDS = ("bpemb", "trained")
PAD_PIECE, UNK_PIECE, START_PIECE, END_PIECE = "<pad>", "<unk>", "<s>", "</s>"
_DIGIT = re.compile(r"\d")  # same pattern as BPEmb.preprocess: every Unicode digit


class BPEmbTokenizer(Tokenizer):
    """Subword tokenizer wrapping a segmentation-only ``bpemb.BPEmb``.

    Build it with :meth:`from_bpemb`, :meth:`train` or :meth:`Tokenizer.from_spec`.
    """

    def described(self) -> tuple[str, str]:
        if self.kind == "trained":
            return ("SentencePiece", "A SentencePiece BPE model trained on this model's "
                                     "training data (read through BPEmb).")
        return (f"BPEmb {self.lang}",
                f"BPEmb's pretrained SentencePiece model ({self.lang}, {self.vs:,} pieces).")

    SPEC_FIELDS = (
        "kind", "lang", "vs", "lowercase", "digits_to_zero",
        "pad_id", "start_id", "end_id", "unk_id", "vocab_size",
    )

    def __init__(self, bpemb: BPEmb, model_bytes: bytes, *, kind: str, lang: str | None,
                 vs: int | None, lowercase: bool, digits_to_zero: bool,
                 name: str = "SentencePiece model"):
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
        self.probe(name)

    # ----------------------------------------------------------------- text -> ids

    def _preprocess(self, text: str) -> str:
        """Apply the recorded lowercase / digits_to_zero options (as BPEmb.preprocess does)."""
        return _bpemb_preprocess(text, self.lowercase, self.digits_to_zero)

    def _pieces(self, text: str) -> list[str]:
        """Subword pieces of the preprocessed text, without specials."""
        return list(self.bpemb.encode(self._preprocess(text)))

    def _piece_ids(self, text: str) -> list[int]:
        return list(self.bpemb.spm.encode_as_ids(self._preprocess(text)))

    def _piece_spans(self, text: str) -> list[tuple[int, int]]:
        """Character ``(begin, end)`` of each piece in ``preprocess(text)``."""
        return sentencepiece_spans(self.bpemb.spm, self._preprocess(text))

    # ----------------------------------------------------------------- ids -> text

    def id_to_piece(self, i: int) -> str:
        """Piece string of id ``i`` ("<pad>", "<s>", "</s>", "<unk>" for the specials)."""
        i = self._check_id(i)
        if i == self.pad_id:
            return PAD_PIECE
        if i == self.unk_id:
            return UNK_PIECE
        return self.bpemb.spm.id_to_piece(i)

    def _decode_kept(self, ids: list[int]) -> str:
        """SentencePiece's text of the ids; unk decodes as " ⁇ "."""
        return self.bpemb.spm.decode_ids(ids) if ids else ""

    # ----------------------------------------------------------------- spec / loading

    def spec(self) -> dict:
        return {
            "kind": self.kind, "lang": self.lang, "vs": self.vs,
            "lowercase": self.lowercase, "digits_to_zero": self.digits_to_zero,
            "pad_id": self.pad_id, "start_id": self.start_id, "end_id": self.end_id,
            "unk_id": self.unk_id, "vocab_size": self.vocab_size,
        }

    @classmethod
    def _from_valid_spec(cls, spec: dict, model_bytes: bytes) -> "BPEmbTokenizer":
        _validate_spec(spec)
        name = "model_bytes (the SentencePiece model)"
        tok = cls(_bpemb_from_bytes(model_bytes, name), model_bytes, kind=spec["kind"],
                  lang=spec["lang"], vs=spec["vs"], lowercase=spec["lowercase"],
                  digits_to_zero=spec["digits_to_zero"], name=name)
        check_matches(spec, tok.spec(), ("vocab_size", "pad_id", "start_id", "end_id", "unk_id"),
                      "SentencePiece model")
        return tok

    @classmethod
    def from_bpemb(cls, lang: str, vs: int, *, cache_dir=None, lowercase: bool = True,
                   digits_to_zero: bool = True) -> "BPEmbTokenizer":
        """Standard BPEmb model for ``lang``/``vs``, from BPEmb's cache or downloaded into it.

        ``lowercase``/``digits_to_zero`` default to True because that is how BPEmb's models
        were trained.
        """
        if not isinstance(lang, str) or lang not in BPEmb.available_languages:
            raise TokenizerError(f"lang: {lang!r} is not a BPEmb language code (e.g. 'en')")
        if not is_int(vs):
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
        model_bytes = Path(bpemb.model_file).read_bytes()
        check_sentencepiece_model(model_bytes, f"BPEmb model {model_path}")
        return cls(bpemb, model_bytes, kind="bpemb", lang=lang, vs=vs, lowercase=lowercase,
                   digits_to_zero=digits_to_zero, name=f"BPEmb model {model_path}")

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, lowercase: bool = True,
              digits_to_zero: bool = False, split_digits: bool = True,
              seed: int = 0) -> "BPEmbTokenizer":
        """Train a SentencePiece BPE model on ``texts`` (preprocessed first), in memory.

        ``vocab_size`` is a soft limit (``hard_vocab_limit=False``) so small corpora work;
        ``split_digits`` makes every digit its own piece.
        """
        if not is_int(vocab_size) or vocab_size < 5:
            raise TokenizerError(f"vocab_size: expected an int >= 5, got {vocab_size!r}")
        count = 0

        def sentences():
            nonlocal count
            for t in texts:
                count += 1
                yield _bpemb_preprocess(t, lowercase, digits_to_zero)

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
        name = "the SentencePiece model just trained"
        return cls(_bpemb_from_bytes(model_bytes, name), model_bytes, kind="trained", lang=None,
                   vs=None, lowercase=lowercase, digits_to_zero=digits_to_zero, name=name)


def _bpemb_preprocess(text: str, lowercase: bool, digits_to_zero: bool) -> str:
    check_text(text)
    if lowercase:
        text = text.lower()
    if digits_to_zero:
        text = _DIGIT.sub("0", text)
    return text


def _bpemb_from_bytes(model_bytes: bytes, name: str) -> BPEmb:
    """Load SentencePiece model bytes through BPEmb(model_file=...) via a temporary file, after
    checking them as data (check_sentencepiece_model)."""
    if not model_bytes:
        raise TokenizerError("model_bytes: empty SentencePiece model")
    with tempfile.TemporaryDirectory(prefix="tokenizer-") as tmp:
        path = Path(tmp) / "model.model"
        path.write_bytes(model_bytes)
        try:
            # BPEmb 0.3.6 asserts emb_file is not None whenever lang is None, even with
            # segmentation_only=True (which never reads it), so pass the model path again.
            bpemb = BPEmb(model_file=path, emb_file=path, segmentation_only=True,
                          preprocess=False)
        except (RuntimeError, OSError):  # the library's message names our temporary file
            raise TokenizerError("model_bytes: not a valid SentencePiece model") from None
    # Loading runs no rule; the check comes before the first sentence (the probe) does.
    check_sentencepiece_model(model_bytes, name)
    return bpemb


def _validate_spec(spec: dict) -> None:
    """Types and ranges of a bpemb/trained spec (its fields are already checked)."""
    kind = spec["kind"]
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
    check_bool(spec, "lowercase")
    check_bool(spec, "digits_to_zero")
    check_spec_ids(spec, ("pad_id", "start_id", "end_id", "unk_id"))
