"""A SentencePiece model with the ids of a vocab.json (what Marian's and M2M100's tokenizers are
made of, and BART's vocab.json + merges.txt shares): vocab.json read as data (parse_vocab_json,
check_vocab), a SentencePiece model loaded after its rules were checked (load_sentencepiece), and
the one data blob a checkpoint stores for both (pack, unpack: an uncompressed ZIP with exactly the
members MODEL_MEMBER and VOCAB_MEMBER, fixed timestamps, so the same files give the same bytes)."""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections import Counter

import sentencepiece as spm

from transformer.core import limits
from transformer.core.text import quoted
from transformer.tokenizers.base import TokenizerError, first_not_text, is_int
from transformer.tokenizers.sentencepiece_model import check_sentencepiece_model

__all__ = ["MAX_SPM_BYTES", "MAX_VOCAB_JSON_BYTES", "MAX_VOCAB_ENTRIES", "MODEL_MEMBER",
           "VOCAB_MEMBER", "parse_vocab_json", "check_vocab", "load_sentencepiece",
           "vocab_json_data", "pack", "unpack"]

MAX_SPM_BYTES = 64 * 1024 * 1024         # a SentencePiece model larger than this is refused
MAX_VOCAB_JSON_BYTES = 16 * 1024 * 1024  # so is a vocab.json larger than this
MAX_VOCAB_ENTRIES = limits.MAX_VOCAB      # or with more pieces than this
MODEL_MEMBER, VOCAB_MEMBER = "sentencepiece.model", "vocab.json"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


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
        out = dict(items)
        if len(out) != len(items):
            counts = Counter(k for k, _ in items)
            repeated = sorted(k for k, c in counts.items() if c > 1)[:3]
            raise TokenizerError(f"{name}: the piece(s) {repeated} appear more than once")
        return out

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


def load_sentencepiece(spm_bytes, name: str) -> spm.SentencePieceProcessor:
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


def vocab_json_data(vocab: dict[str, int]) -> bytes:
    return json.dumps(vocab, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def pack(spm_bytes: bytes, vocab_json_bytes: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        for member, data in ((MODEL_MEMBER, spm_bytes), (VOCAB_MEMBER, vocab_json_bytes)):
            zf.writestr(zipfile.ZipInfo(member, date_time=_ZIP_DATE), data)
    return out.getvalue()


def unpack(model_bytes: bytes) -> tuple[bytes, bytes]:
    """(SentencePiece model, vocab.json) from the blob ``pack`` writes."""
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
