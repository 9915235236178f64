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

import io
import json
import re
import zipfile
from collections import Counter

import sentencepiece as spm

from transformer.core import limits
from transformer.core.text import quoted
from transformer.tokenizers.base import (
    Tokenizer,
    TokenizerError,
    check_matches,
    check_spec_ids,
    check_text,
    first_not_text,
    is_int,
    sentencepiece_spans,
)
from transformer.tokenizers.sentencepiece_model import check_sentencepiece_model

__all__ = ["MarianTokenizer", "SIDES", "MAX_SPM_BYTES", "MAX_VOCAB_JSON_BYTES",
           "MAX_VOCAB_ENTRIES", "PAD_TOKEN", "UNK_TOKEN", "END_TOKEN"]

SIDES = ("source", "target")
PAD_TOKEN, UNK_TOKEN, END_TOKEN = "<pad>", "<unk>", "</s>"
MAX_SPM_BYTES = 64 * 1024 * 1024         # a SentencePiece model larger than this is refused
MAX_VOCAB_JSON_BYTES = 16 * 1024 * 1024  # so is a vocab.json larger than this
MAX_VOCAB_ENTRIES = limits.MAX_VOCAB      # or with more pieces than this
MODEL_MEMBER, VOCAB_MEMBER = "sentencepiece.model", "vocab.json"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class MarianTokenizer(Tokenizer):
    """One side of a Marian model's tokenizer.

    Build it with :meth:`from_files` (the model's files) or :meth:`Tokenizer.from_spec`.
    """

    kind = "marian"
    SPEC_FIELDS = ("kind", "side", "pad_id", "unk_id", "start_id", "end_id", "vocab_size")

    def __init__(self, spm_bytes: bytes, vocab: dict[str, int], side: str, *,
                 spm_name: str = "SentencePiece model", vocab_name: str = "vocab.json"):
        if side not in SIDES:
            raise TokenizerError(f"side: must be one of {SIDES}, got {side!r}")
        self.side = side
        self.sp = _load_sentencepiece(spm_bytes, spm_name)
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
        self.model_bytes = _pack(bytes(spm_bytes), _vocab_json(self.vocab))
        self.probe(f"the {side} tokenizer ({spm_name} with {vocab_name})")

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
        return cls(spm_bytes, parse_vocab_json(vocab_json_bytes, vocab_name), side,
                   spm_name=spm_name, vocab_name=vocab_name)

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
        spm_bytes, vocab_json_bytes = _unpack(model_bytes)
        tok = cls(spm_bytes, parse_vocab_json(vocab_json_bytes, f"model_bytes' {VOCAB_MEMBER}"),
                  spec["side"], spm_name=f"model_bytes' {MODEL_MEMBER}",
                  vocab_name=f"model_bytes' {VOCAB_MEMBER}")
        check_matches(spec, tok.spec(), ("vocab_size",) + names, "vocabulary")
        return tok


def parse_vocab_json(data, name: str = "vocab.json") -> dict[str, int]:
    """vocab.json as data: a JSON object piece -> id whose ids are 0 .. n-1, each once."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TokenizerError(f"{name}: expected the file's bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise TokenizerError(f"{name}: the file is empty")
    if len(data) > MAX_VOCAB_JSON_BYTES:
        raise TokenizerError(f"{name}: the file has {len(data):,} bytes, more than the "
                             f"{MAX_VOCAB_JSON_BYTES:,} a vocabulary may have")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TokenizerError(f"{name}: not UTF-8 text (byte {e.start})") from None

    # Count the keys before parsing: json.loads of a million short entries (14 MB, within the
    # byte cap) grows memory by ~290 MB before the count could refuse it. Each key is a string
    # followed by ":"; in a flat object of integer ids the scan never starts inside a string.
    keys = sum(1 for _ in _JSON_KEY.finditer(text))
    if keys > MAX_VOCAB_ENTRIES:
        raise TokenizerError(f"{name}: {keys:,} pieces, more than the {MAX_VOCAB_ENTRIES:,} a "
                             "vocabulary may have")

    def pairs(items):
        counts = Counter(k for k, _ in items)
        if len(counts) != len(items):
            repeated = sorted(k for k, c in counts.items() if c > 1)[:3]
            raise TokenizerError(f"{name}: the piece(s) {repeated} appear more than once")
        return dict(items)

    try:
        vocab = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as e:
        raise TokenizerError(f"{name}: not valid JSON ({e.msg} at line {e.lineno}, "
                             f"column {e.colno})") from None
    except RecursionError:
        raise TokenizerError(f"{name}: JSON nested too deeply") from None
    except ValueError as e:  # an integer of more digits than Python converts (4,300)
        if isinstance(e, TokenizerError):  # from pairs()
            raise
        raise TokenizerError(f"{name}: holds a number too long to be an id") from None
    if not isinstance(vocab, dict) or not vocab:
        raise TokenizerError(f"{name}: expected a non-empty JSON object mapping each piece to "
                             f"its id, got {type(vocab).__name__}")
    check_vocab(vocab, name)
    return vocab


_JSON_KEY = re.compile(r'"(?:[^"\\]|\\.)*"\s*:')  # a JSON string followed by a colon


def check_vocab(vocab: dict, name: str = "vocab.json") -> None:
    """Every key a piece (str), every id an int, the ids 0 .. n-1 each once."""
    if not isinstance(vocab, dict) or not vocab:
        raise TokenizerError(f"{name}: expected a non-empty mapping of pieces to ids")
    if len(vocab) > MAX_VOCAB_ENTRIES:
        raise TokenizerError(f"{name}: {len(vocab):,} pieces, more than the "
                             f"{MAX_VOCAB_ENTRIES:,} a vocabulary may have")
    pieces, ids = list(vocab), list(vocab.values())
    if not (set(map(type, pieces)) <= {str} and set(map(type, ids)) <= {int}):
        bad = [(p, i) for p, i in vocab.items() if not isinstance(p, str) or not is_int(i)]
        if bad:
            raise TokenizerError(f"{name}: every piece must be a string with an integer id; "
                                 f"{quoted(str(bad[0][0]))} has {str(bad[0][1])[:40]}")
    n = len(vocab)
    if (k := first_not_text(pieces)) is not None:  # JSON can spell one: "\ud800"
        raise TokenizerError(f"{name}: the piece of id {ids[k]} ({quoted(pieces[k])}) holds a "
                             f"lone surrogate, which is not valid UTF-8 text")
    # The ids 0 .. n-1 each once, checked as one array; the loop below only names the culprit.
    if min(ids) >= 0 and max(ids) < n and len(set(ids)) == n:
        return
    seen = {}
    for piece, i in vocab.items():
        if not 0 <= i < n:
            raise TokenizerError(f"{name}: the ids must be 0 .. {n - 1} (one per piece), but "
                                 f"{quoted(piece)} has id {str(i)[:40]}")
        if i in seen:
            raise TokenizerError(f"{name}: {quoted(seen[i])} and {quoted(piece)} both have id {i}")
        seen[i] = piece


def _split_language_code(text: str) -> tuple[list[str], str]:
    """MarianTokenizer.remove_language_code: ">>fr<< text" -> ([">>fr<<"], " text")."""
    if text.startswith(">>") and (end := text.find("<<")) != -1:
        return [text[:end + 2]], text[end + 2:]
    return [], text


def _load_sentencepiece(spm_bytes, name: str) -> spm.SentencePieceProcessor:
    if not isinstance(spm_bytes, (bytes, bytearray, memoryview)):
        raise TokenizerError(f"{name}: expected the file's bytes, got {type(spm_bytes).__name__}")
    spm_bytes = bytes(spm_bytes)
    if not spm_bytes:
        raise TokenizerError(f"{name}: the file is empty")
    if len(spm_bytes) > MAX_SPM_BYTES:
        raise TokenizerError(f"{name}: the file has {len(spm_bytes):,} bytes, more than the "
                             f"{MAX_SPM_BYTES:,} a SentencePiece model may have")
    try:
        sp = spm.SentencePieceProcessor(model_proto=spm_bytes)
    except RuntimeError:
        raise TokenizerError(f"{name}: not a SentencePiece model") from None
    if sp.get_piece_size() <= 0:
        raise TokenizerError(f"{name}: the SentencePiece model has no pieces")
    if sp.get_piece_size() > limits.MAX_VOCAB:
        raise TokenizerError(f"{name}: the SentencePiece model has {sp.get_piece_size():,} "
                             f"pieces, more than the {limits.MAX_VOCAB:,} a vocabulary may have")
    # Loading runs no rule; the check comes before the first sentence (the probe) does.
    check_sentencepiece_model(spm_bytes, name)
    return sp


def _vocab_json(vocab: dict[str, int]) -> bytes:
    return json.dumps(vocab, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _pack(spm_bytes: bytes, vocab_json_bytes: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        for member, data in ((MODEL_MEMBER, spm_bytes), (VOCAB_MEMBER, vocab_json_bytes)):
            zf.writestr(zipfile.ZipInfo(member, date_time=_ZIP_DATE), data)
    return out.getvalue()


def _unpack(model_bytes: bytes) -> tuple[bytes, bytes]:
    """(SentencePiece model, vocab.json) from the blob ``_pack`` writes."""
    what = f"model_bytes (a ZIP holding {MODEL_MEMBER} and {VOCAB_MEMBER})"
    try:
        zf = zipfile.ZipFile(io.BytesIO(model_bytes))
    except (zipfile.BadZipFile, ValueError):
        raise TokenizerError(f"{what}: not a ZIP archive") from None
    with zf:
        infos = zf.infolist()
        names = sorted(i.filename for i in infos)
        if names != sorted((MODEL_MEMBER, VOCAB_MEMBER)):
            raise TokenizerError(f"{what}: has the members {names}")
        limits = {MODEL_MEMBER: MAX_SPM_BYTES, VOCAB_MEMBER: MAX_VOCAB_JSON_BYTES}
        for info in infos:
            if info.compress_type != zipfile.ZIP_STORED:
                raise TokenizerError(f"{what}: {info.filename} is compressed; it must be stored")
            if info.file_size > limits[info.filename]:
                raise TokenizerError(f"{what}: {info.filename} has {info.file_size:,} bytes, "
                                     f"more than {limits[info.filename]:,}")
        try:
            return zf.read(MODEL_MEMBER), zf.read(VOCAB_MEMBER)
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise TokenizerError(f"{what}: cannot be read ({e})") from None
