"""Marian (opus-mt) tokenizer: one side's SentencePiece model with the ids of ``vocab.json``.

As Hugging Face's ``MarianTokenizer`` does:

* pieces: a leading language code (">>fr<<", the text up to the first "<<" when it starts with
  ">>") is one piece, the rest is the side's SentencePiece model's
  ``encode(text, out_type=str)``;
* ids: every piece through ``vocab.json`` (piece -> id, shared by both sides in opus-mt models);
  a piece it lacks is ``<unk>``. The SentencePiece model's own ids are never used;
* ``encode(add_end=True)`` appends ``</s>`` (as MarianTokenizer always does); there is no start
  token on the source side; the decoder starts from the pad id (Marian's
  ``decoder_start_token_id``), so ``start_id == pad_id``;
* decode: ids -> pieces through the inverse vocabulary, the specials (pad, ``</s>``, ``<unk>``)
  dropped (``skip_special_tokens=True``), then the side's SentencePiece ``decode_pieces`` and every
  "▁" made a space. (MarianTokenizer decodes target ids with the target model.)

Not reproduced: MarianTokenizer also cuts a special token typed inside the text ("</s>", "<pad>")
out as one token; here it is ordinary text. Newer transformers releases map a piece that is not in
vocab.json to the SentencePiece model's own id; here (as in the older releases) it is ``<unk>``.

One tokenizer object per side (``side`` "source" or "target"). Its ``model_bytes`` is one data
blob holding the side's SentencePiece model and vocab.json: an uncompressed ZIP with exactly the
members ``MODEL_MEMBER`` and ``VOCAB_MEMBER`` (fixed timestamps, so the same files give the same
bytes).
"""

from __future__ import annotations

import functools

from transformer.tokenizers.base import (
    Tokenizer,
    TokenizerError,
    check_matches,
    check_spec_ids,
    check_text,
    gc_paused,
    sentencepiece_spans,
)
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

__all__ = ["MarianTokenizer", "SIDES", "PAD_TOKEN", "UNK_TOKEN", "END_TOKEN"]

SIDES = ("source", "target")
PAD_TOKEN, UNK_TOKEN, END_TOKEN = "<pad>", "<unk>", "</s>"


class MarianTokenizer(Tokenizer):
    """One side of a Marian model's tokenizer.

    Build it with :meth:`from_files` (the model's files) or :meth:`Tokenizer.from_spec`.
    """

    kind = "marian"

    def described(self) -> tuple[str, str]:
        return ("SentencePiece", "Marian's tokenizer: a SentencePiece model per side "
                                 "(source.spm, target.spm), pieces numbered by vocab.json.")
    SPEC_FIELDS = ("kind", "side", "pad_id", "unk_id", "start_id", "end_id", "vocab_size")

    def __init__(self, spm_bytes: bytes, vocab: dict[str, int], side: str, *,
                 spm_name: str = "SentencePiece model", vocab_name: str = "vocab.json"):
        if side not in SIDES:
            raise TokenizerError(f"side: must be one of {SIDES}, got {side!r}")
        self.side = side
        self.sp = load_sentencepiece(spm_bytes, spm_name)
        check_vocab(vocab, vocab_name)
        self.vocab = dict(vocab)
        self.pieces_by_id = [""] * len(self.vocab)
        for piece, i in self.vocab.items():
            self.pieces_by_id[i] = piece
        missing = [t for t in (PAD_TOKEN, UNK_TOKEN, END_TOKEN) if t not in self.vocab]
        if missing:
            raise TokenizerError(f"{vocab_name}: has no {', '.join(missing)} (a Marian "
                                 f"vocabulary has {PAD_TOKEN}, {UNK_TOKEN} and {END_TOKEN})")
        self.pad_id = self.vocab[PAD_TOKEN]
        self.unk_id = self.vocab[UNK_TOKEN]
        self.end_id = self.vocab[END_TOKEN]
        self.start_id = self.pad_id  # Marian's decoder_start_token_id
        self.vocab_size = len(self.vocab)
        self._specials = {self.pad_id, self.unk_id, self.end_id}
        self._spm_bytes = bytes(spm_bytes)
        self.probe(f"the {side} tokenizer ({spm_name} with {vocab_name})")

    @functools.cached_property
    def model_bytes(self) -> bytes:
        """The side's SentencePiece model and vocab.json in one ZIP (spm_vocab.pack), made when
        first asked for (a checkpoint's save: writing vocab.json took 0.1 s a side of every
        open)."""
        return pack(self._spm_bytes, vocab_json_data(self.vocab))

    @classmethod
    def from_files(cls, spm_bytes: bytes, vocab_json_bytes: bytes, side: str, *,
                   spm_name: str | None = None,
                   vocab_name: str = "vocab.json") -> "MarianTokenizer":
        """The ``side`` ("source"/"target") tokenizer from the bytes of that side's
        SentencePiece model (source.spm / target.spm) and of vocab.json.

        ``spm_name``/``vocab_name`` name the files in error messages (default: "source.spm" or
        "target.spm", and "vocab.json").
        """
        if side not in SIDES:
            raise TokenizerError(f"side: must be one of {SIDES}, got {side!r}")
        spm_name = f"{side}.spm" if spm_name is None else spm_name
        with gc_paused():  # the vocabulary's pieces (base.gc_paused)
            vocab = parse_vocab_json(vocab_json_bytes, vocab_name)
            tok = cls(spm_bytes, vocab, side, spm_name=spm_name, vocab_name=vocab_name)
            del vocab
        return tok

    # ----------------------------------------------------------------- text -> ids

    def _preprocess(self, text: str) -> str:
        """The text (SentencePiece normalizes inside the model; spans index into the text)."""
        return check_text(text)

    def _pieces(self, text: str) -> list[str]:
        code, rest = _split_language_code(check_text(text))
        return code + self.sp.encode(rest, out_type=str)

    def _piece_spans(self, text: str) -> list[tuple[int, int]]:
        code, rest = _split_language_code(check_text(text))
        shift = len(code[0]) if code else 0
        spans = [(b + shift, e + shift) for b, e in sentencepiece_spans(self.sp, rest)]
        return [(0, shift)] * len(code) + spans

    def _piece_ids(self, text: str) -> list[int]:
        return [self.vocab.get(piece, self.unk_id) for piece in self._pieces(text)]

    # ----------------------------------------------------------------- ids -> text

    def id_to_piece(self, i: int) -> str:
        return self.pieces_by_id[self._check_id(i)]

    def ids_to_pieces(self, ids) -> list[str]:
        pieces = self.pieces_by_id
        return [pieces[i] for i in self._checked_ids(ids)]

    def decode(self, ids) -> str:
        """Text of ``ids`` as MarianTokenizer.decode(ids, skip_special_tokens=True) gives it;
        stops at the first ``</s>``."""
        return super().decode(ids)

    def _decode_kept(self, ids: list[int]) -> str:
        pieces = [self.pieces_by_id[i] for i in ids if i not in self._specials]
        return self.sp.decode_pieces(pieces).replace("▁", " ").strip()

    # ----------------------------------------------------------------- spec / loading

    def spec(self) -> dict:
        return {"kind": self.kind, "side": self.side, "pad_id": self.pad_id,
                "unk_id": self.unk_id, "start_id": self.start_id, "end_id": self.end_id,
                "vocab_size": self.vocab_size}

    @classmethod
    def _from_valid_spec(cls, spec: dict, model_bytes: bytes) -> "MarianTokenizer":
        if spec["side"] not in SIDES:
            raise TokenizerError(f"side: must be one of {SIDES}, got {str(spec['side'])[:40]!r}")
        names = ("pad_id", "unk_id", "start_id", "end_id")
        check_spec_ids(spec, names)
        spm_bytes, vocab_json_bytes = unpack(model_bytes)
        tok = cls(spm_bytes, parse_vocab_json(vocab_json_bytes, f"model_bytes' {VOCAB_MEMBER}"),
                  spec["side"], spm_name=f"model_bytes' {MODEL_MEMBER}",
                  vocab_name=f"model_bytes' {VOCAB_MEMBER}")
        check_matches(spec, tok.spec(), ("vocab_size",) + names, "vocabulary")
        return tok


def _split_language_code(text: str) -> tuple[list[str], str]:
    """MarianTokenizer.remove_language_code: ">>fr<< text" -> ([">>fr<<"], " text")."""
    if text.startswith(">>") and (end := text.find("<<")) != -1:
        return [text[:end + 2]], text[end + 2:]
    return [], text
