"""Reading the tokenizer files Hugging Face families ship, as untrusted data, with bounds.

Three formats, each read into plain Python values that :mod:`transformer.tokenizers.hf_backend`
hands to the ``tokenizers`` library (the library never parses a stranger's file itself):

* ``tokenizer.json`` (:func:`read_tokenizer_json`): at most MAX_TOKENIZER_JSON_BYTES, its values
  counted and its nesting measured on the text before it is parsed (at most MAX_JSON_STRINGS
  strings, MAX_JSON_KEYS keys, MAX_JSON_NUMBERS numbers, MAX_JSON_ARRAYS arrays,
  MAX_JSON_OBJECTS objects, MAX_JSON_LITERALS true/false/null, MAX_TOKENIZER_JSON_DEPTH levels:
  what a vocabulary of limits.MAX_VOCAB pieces with MAX_MERGES merges and MAX_ADDED_TOKENS added
  tokens needs, so json.loads never builds more), then checked field by field: only the top-level keys
  tokenizer.json has; ``truncation`` and ``padding`` null; a normalizer, pre-tokenizer, decoder
  and post-processor each of a kind these families use (ALLOWED_KINDS; anything else is refused
  naming it); a ``BPE`` or ``Unigram`` model of at most MAX_VOCAB pieces (ids 0 .. n-1 each
  once, scores finite) and MAX_MERGES merges, each merge two pieces of the vocabulary whose
  join is one too; at most MAX_ADDED_TOKENS added tokens. A ``Precompiled`` normalizer's
  rules go through SentencePiece's own check (sentencepiece_model.check_charsmap).
* ``merges.txt`` (:func:`read_merges_txt`): "a b" lines after an optional "#version" line, at
  most MAX_MERGES_BYTES and MAX_MERGES_TXT lines (counted on the bytes before the text is split:
  a trained BPE's merge list makes one piece per merge), every piece in vocab.json.
* tokenizer_config.json (:func:`read_tokenizer_config`): the family its ``tokenizer_class``
  names, the languages and the few options these tokenizers take, each type-checked;
* SentencePiece models (:func:`read_sentencepiece`): at most MAX_SPM_BYTES and MAX_VOCAB pieces,
  checked by sentencepiece_model.check_sentencepiece_model (pieces and normalization rules
  valid UTF-8, rule tables SentencePiece can read safely) before anything runs them; what is
  returned is the pieces with their scores and types, the model type and the normalization
  rules (``precompiled_charsmap``).

vocab.json is read by :func:`transformer.tokenizers.spm_vocab.parse_vocab_json` (its keys counted
before it is parsed). Every malformed file is a TokenizerError naming the file and what is
wrong, never a traceback, and nothing is allocated in proportion to a count before the count
is checked.

The checks of a real vocabulary's hundreds of thousands of entries and merges run a column at a
time (the set of the entries' types and lengths, every piece and every merge's join looked up in
one pass) and go entry by entry only when one fails, to name the first, with the sentence an
entry-by-entry check gives; tokenizer.json's values are built and checked with the garbage
collector paused (base.gc_paused: NLLB-200's 363,240 merges are as many lists).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass, field
from itertools import chain, starmap
from operator import add

import numpy as np
from google.protobuf.message import DecodeError
from sentencepiece import sentencepiece_model_pb2

from transformer.core import limits
from transformer.tokenizers.base import TokenizerError, first_not_text, gc_paused, is_int
from transformer.tokenizers.hf_families import CLASS_FAMILY
from transformer.tokenizers.sentencepiece_model import (
    MAX_CHARSMAP_BYTES,
    check_charsmap,
    check_piece_lengths,
    check_sentencepiece_model,
)
from transformer.tokenizers.spm_vocab import check_vocab

__all__ = ["read_tokenizer_json", "read_merges_txt", "read_sentencepiece", "TokenizerJson",
           "read_tokenizer_config",
           "SentencePieceData", "ALLOWED_KINDS", "MAX_TOKENIZER_JSON_BYTES", "MAX_MERGES",
           "MAX_MERGES_BYTES", "MAX_SPM_BYTES", "MAX_ADDED_TOKENS", "MAX_TOKENIZER_JSON_DEPTH",
           "MAX_JSON_STRINGS", "MAX_JSON_KEYS", "MAX_JSON_NUMBERS", "MAX_JSON_ARRAYS",
           "MAX_JSON_OBJECTS", "MAX_JSON_LITERALS", "MAX_MERGES_TXT", "MAX_PIECE_CHARS"]

MAX_TOKENIZER_JSON_BYTES = limits.MAX_TOKENIZER_BYTES  # NLLB-200's tokenizer.json is ~17 MB
MAX_SPM_BYTES = limits.MAX_TOKENIZER_BYTES  # a 250k-piece SentencePiece model is ~5 MB
MAX_MERGES = 4 * limits.MAX_VOCAB  # merges of one BPE model (BART: 50,000; a BPE made from a
# SentencePiece vocabulary, as NLLB-200's, may list several per piece)
MAX_MERGES_BYTES = 16 * 2**20  # merges.txt (BART's is 456 KB)
MAX_MERGES_TXT = limits.MAX_VOCAB  # merges of a merges.txt: a trained byte-level BPE (BART,
# RoBERTa, GPT-2) makes one piece per merge, so it has fewer merges than pieces (BART: 50,000
# merges, 50,265 pieces)
MAX_ADDED_TOKENS = 4096  # tokenizer.json's added tokens (NLLB-200: 206, T5: 103, Pegasus: 106)
MAX_TOKENIZER_JSON_DEPTH = limits.MAX_JSON_DEPTH  # these families' files nest at most 6 deep
# Strings of one tokenizer.json: a piece per vocabulary entry, two per merge, a few hundred more.
MAX_JSON_STRINGS = 2 * limits.MAX_VOCAB + 2 * MAX_MERGES + 16 * MAX_ADDED_TOKENS
# The other values of one tokenizer.json, each kind bounded by what such a vocabulary needs (its
# few components take well under _JSON_SLACK of each): keys, a BPE vocabulary's pieces and about
# 8 per added token; numbers, a piece's id (BPE) or score (Unigram) and an added token's id;
# arrays, a Unigram piece's [piece, score] or a merge's [a, b]; objects and true/false/null, a
# few per added token. A million-entry vocabulary is refused by these counts, before json.loads
# builds its million entries (~200 MB).
_JSON_SLACK = 1024
MAX_JSON_KEYS = limits.MAX_VOCAB + 8 * MAX_ADDED_TOKENS + _JSON_SLACK
MAX_JSON_NUMBERS = limits.MAX_VOCAB + 2 * MAX_ADDED_TOKENS + _JSON_SLACK
MAX_JSON_ARRAYS = MAX_MERGES + 2 * MAX_ADDED_TOKENS + _JSON_SLACK
MAX_JSON_OBJECTS = 2 * MAX_ADDED_TOKENS + _JSON_SLACK
MAX_JSON_LITERALS = 8 * MAX_ADDED_TOKENS + _JSON_SLACK
MAX_PIECE_CHARS = 128  # one added token's or special token's text (the families' longest are
# T5's "<extra_id_99>" and NLLB's codes, 12 and 8; 4,096 added tokens of 1,024 characters grew a
# load by 330-370 MB, the `tokenizers` library's matcher holding each character: issue 37)

TOP_LEVEL_KEYS = {"version", "truncation", "padding", "added_tokens", "normalizer",
                  "pre_tokenizer", "post_processor", "decoder", "model"}
# The component kinds BART, mBART(-50), T5, M2M100, NLLB-200 and Pegasus files use (as shipped
# and as transformers saves them); "Sequence" holds others of the same table.
ALLOWED_KINDS = {
    "normalizer": ("Sequence", "Precompiled", "Replace"),
    "pre_tokenizer": ("Sequence", "ByteLevel", "Metaspace", "WhitespaceSplit"),
    "decoder": ("Sequence", "ByteLevel", "Metaspace"),
    "post_processor": ("Sequence", "TemplateProcessing", "RobertaProcessing", "ByteLevel"),
    "model": ("BPE", "Unigram"),
}
_SEQUENCE_FIELD = {"normalizer": "normalizers", "pre_tokenizer": "pretokenizers",
                   "decoder": "decoders", "post_processor": "processors"}

_SCAN_CHUNK = 4 * 2**20  # bytes of a JSON file scanned at a time (bounds the scan's own arrays)
_QUOTE, _COLON, _OPEN_ARRAY, _OPEN_OBJECT = (ord(c) for c in '":[{')


def _byte_table(chars: str, dtype=bool, value=True) -> np.ndarray:
    """A lookup table over the 256 byte values: ``value`` at the bytes of ``chars``."""
    table = np.zeros(256, dtype=dtype)
    table[[ord(c) for c in chars]] = value
    return table


_SPACES = b" \t\n\r"  # JSON's spaces (never counted: _outside_strings deletes them)
_SPACED_ESCAPE = re.compile(rb"\\[ \t\n\r]")  # a backslash before a space
_SEPARATOR = _byte_table(":,[")  # what comes before a value (outside strings and spaces)
_NUMBER_START = _byte_table("-0123456789NI")  # NaN and Infinity too: json.loads reads them
_LITERAL_START = _byte_table("tfn")
_DEPTH_STEP = _byte_table("{[", np.int8, 1) - _byte_table("}]", np.int8, 1)


@dataclass
class TokenizerJson:
    """What the families take from a tokenizer.json: the model's type and vocabulary (Unigram:
    a list of (piece, score); BPE: piece -> id), the BPE merges, the normalization rules of its
    Precompiled normalizer (or None) and its added tokens (dicts as tokenizer.json holds them,
    checked)."""
    model_type: str
    vocab: list | dict
    merges: list[tuple[str, str]] = field(default_factory=list)
    charsmap: bytes | None = None
    added_tokens: list[dict] = field(default_factory=list)
    unk_id: int | None = None


@dataclass
class SentencePieceData:
    """A checked SentencePiece model: its bytes, pieces [(piece, score, type)], model type
    ("unigram"/"bpe"/...), unk id and normalization rules (b"" when none)."""
    model_bytes: bytes
    pieces: list[tuple[str, float, int]]
    model_type: str
    unk_id: int
    charsmap: bytes


# ---------------------------------------------------------------------- generic helpers

def _as_bytes(data, name: str, cap: int) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TokenizerError(f"{name}: expected the file's bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise TokenizerError(f"{name}: the file is empty")
    if len(data) > cap:
        raise TokenizerError(f"{name}: the file has {len(data):,} bytes, more than the {cap:,} "
                             f"it may have")
    return data


def _as_text(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TokenizerError(f"{name}: not UTF-8 text (byte {e.start})") from None


def _outside_strings(data: bytes) -> np.ndarray:
    """The bytes of a JSON text outside its strings, without spaces, each string left as one
    '"' (its closing quote), with NumPy: escape pairs ("\\\\", then '\\"') are blanked, so
    that every quote left opens or closes a string, and every space byte (" \\t\\n\\r", outside
    strings or in them: no quote goes with them, so no string moves) is deleted in one pass
    (bytes.translate: a pretty-printed file halves), and whether a byte is inside a string
    is the parity of the quotes up to it (carried from chunk to chunk). Where a byte falls depends
    only on the bytes before it, so the counts of a broken file include those of any part
    json.loads would build."""
    # Deleting the spaces first leaves less to blank, and the same bytes where no backslash
    # stands before a space (an escape JSON does not have): then every backslash keeps the byte
    # after it.
    spaced = b"\\" in data and _SPACED_ESCAPE.search(data) is not None
    if not spaced:
        data = data.translate(None, _SPACES)
    if b"\\" in data:
        data = data.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    if spaced:
        data = data.translate(None, _SPACES)
    arr = np.frombuffer(data, dtype=np.uint8)
    parts, inside = [], 0
    for start in range(0, arr.size, _SCAN_CHUNK):
        chunk = arr[start:start + _SCAN_CHUNK]
        parity = np.bitwise_xor.accumulate((chunk == _QUOTE).view(np.uint8))
        parity ^= inside
        inside = int(parity[-1])
        parts.append(chunk[parity == 0])
    return np.concatenate(parts) if parts else arr


def _json_depth_and_strings(data: bytes, name: str) -> None:
    """Count the values and measure the nesting on the bytes, before the text is decoded and
    json.loads builds anything: a deeply nested file, or one with more strings, keys, numbers,
    arrays, objects or true/false/null than a vocabulary within the limits needs (MAX_JSON_*),
    is refused without parsing it. On the bytes outside strings (_outside_strings): strings are
    their closing quotes, keys the ":", arrays the "[", objects the "{", numbers and literals
    where a value starts after a ":", "," or "[", the nesting the running count of brackets."""
    outside = _outside_strings(data)
    starts = outside[1:][_SEPARATOR[outside[:-1]]]  # the first byte of each value after one
    counts = (
        ("strings", np.count_nonzero(outside == _QUOTE), MAX_JSON_STRINGS),
        ("keys", np.count_nonzero(outside == _COLON), MAX_JSON_KEYS),
        ("numbers", np.count_nonzero(_NUMBER_START[starts]), MAX_JSON_NUMBERS),
        ("arrays", np.count_nonzero(outside == _OPEN_ARRAY), MAX_JSON_ARRAYS),
        ("objects", np.count_nonzero(outside == _OPEN_OBJECT), MAX_JSON_OBJECTS),
        ("true, false or null values", np.count_nonzero(_LITERAL_START[starts]),
         MAX_JSON_LITERALS))
    del starts
    for what, count, bound in counts:
        if count > bound:
            raise TokenizerError(f"{name}: holds {count:,} {what}, more than the {bound:,} a "
                                 f"vocabulary of {limits.MAX_VOCAB:,} pieces with "
                                 f"{MAX_MERGES:,} merges and {MAX_ADDED_TOKENS:,} added tokens "
                                 f"needs")
    steps = _DEPTH_STEP[outside]
    steps = steps[steps != 0]
    if steps.size and int(np.cumsum(steps, dtype=np.int32).max()) > MAX_TOKENIZER_JSON_DEPTH:
        raise TokenizerError(f"{name}: JSON nested more than {MAX_TOKENIZER_JSON_DEPTH} levels "
                             f"deep")


def _loads(text: str, name: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TokenizerError(f"{name}: not valid JSON ({e.msg} at line {e.lineno}, "
                             f"column {e.colno})") from None
    except RecursionError:
        raise TokenizerError(f"{name}: JSON nested too deeply") from None
    except ValueError:  # an integer of more digits than Python converts
        raise TokenizerError(f"{name}: holds a number too long to read") from None


def _piece_text(value, what: str) -> str:
    if not isinstance(value, str):
        raise TokenizerError(f"{what}: expected a string, got {type(value).__name__}")
    if first_not_text([value]) is not None:
        raise TokenizerError(f"{what}: {value[:20]!r} holds a lone surrogate, which is not "
                             f"valid UTF-8")
    return value


# ---------------------------------------------------------------------- tokenizer.json

def read_tokenizer_json(data, name: str = "tokenizer.json") -> TokenizerJson:
    """tokenizer.json as data (see the module's docstring for what is checked). Its values are
    built and checked with the garbage collector paused (base.gc_paused: the counts bound them
    first)."""
    data = _as_bytes(data, name, MAX_TOKENIZER_JSON_BYTES)
    _json_depth_and_strings(data, name)
    text = _as_text(data, name)
    del data
    with gc_paused():
        return _checked_tokenizer_json(_loads(text, name), name)


def _checked_tokenizer_json(doc, name: str) -> TokenizerJson:
    if not isinstance(doc, dict):
        raise TokenizerError(f"{name}: expected a JSON object, got {type(doc).__name__}")
    unknown = sorted(set(doc) - TOP_LEVEL_KEYS)
    if unknown:
        raise TokenizerError(f"{name}: unknown field(s) {', '.join(map(repr, unknown[:5]))}")
    for key in ("truncation", "padding"):
        if doc.get(key) is not None:
            raise TokenizerError(f"{name}: sets {key}, which these tokenizers do not apply "
                                 f"(it must be null)")
    for part in ("normalizer", "pre_tokenizer", "decoder", "post_processor"):
        _check_component(doc.get(part), part, name, 0)
    model = doc.get("model")
    if not isinstance(model, dict):
        raise TokenizerError(f"{name}: has no model (expected a JSON object under 'model')")
    kind = model.get("type")
    if kind not in ALLOWED_KINDS["model"]:
        raise TokenizerError(f"{name}: model type {str(kind)[:40]!r} is not supported (only "
                             f"{', '.join(ALLOWED_KINDS['model'])})")
    out = (_read_bpe(model, name) if kind == "BPE" else _read_unigram(model, name))
    out.charsmap = _find_charsmap(doc.get("normalizer"), name)
    out.added_tokens = _read_added_tokens(doc.get("added_tokens", []), name)
    return out


def _check_component(comp, part: str, name: str, depth: int) -> None:
    if comp is None:
        return
    if not isinstance(comp, dict):
        raise TokenizerError(f"{name}: {part} must be a JSON object or null, got "
                             f"{type(comp).__name__}")
    kind = comp.get("type")
    if kind not in ALLOWED_KINDS[part]:
        raise TokenizerError(f"{name}: {part} of type {str(kind)[:40]!r} is not supported "
                             f"(only {', '.join(ALLOWED_KINDS[part])})")
    if kind == "Sequence":
        items = comp.get(_SEQUENCE_FIELD[part])
        if not isinstance(items, list) or len(items) > 16:
            raise TokenizerError(f"{name}: {part} Sequence must list at most 16 {part}s")
        for item in items:
            _check_component(item, part, name, depth + 1)


def _find_charsmap(normalizer, name: str) -> bytes | None:
    """The rules of the first Precompiled normalizer (at the top or in a Sequence), as
    transformers looks for them; None when there is none."""
    if normalizer is None:
        return None
    items = (normalizer.get("normalizers") if normalizer.get("type") == "Sequence"
             else [normalizer])
    for item in items:
        if item.get("type") == "Precompiled" and "precompiled_charsmap" in item:
            blob = item["precompiled_charsmap"]
            if blob is None:
                return None
            if not isinstance(blob, str) or len(blob) > 2 * MAX_CHARSMAP_BYTES:
                raise TokenizerError(f"{name}: the Precompiled normalizer's rules must be a "
                                     f"base64 string of at most {MAX_CHARSMAP_BYTES:,} bytes")
            try:
                raw = base64.b64decode(blob, validate=True)
            except (binascii.Error, ValueError):
                raise TokenizerError(f"{name}: the Precompiled normalizer's rules are not "
                                     f"base64") from None
            check_charsmap(raw, f"{name}: its Precompiled normalization rules")
            return raw or None
    return None


def _read_unigram(model: dict, name: str) -> TokenizerJson:
    vocab = model.get("vocab")
    if not isinstance(vocab, list) or not vocab:
        raise TokenizerError(f"{name}: the Unigram model's vocab must be a non-empty list of "
                             f"[piece, score] pairs")
    if len(vocab) > limits.MAX_VOCAB:
        raise TokenizerError(f"{name}: {len(vocab):,} pieces, more than the "
                             f"{limits.MAX_VOCAB:,} a vocabulary may have")
    pieces, scores = _unigram_entries(vocab)
    if pieces is None:  # the entry that is not [piece, finite score], named
        for i, item in enumerate(vocab):
            if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str)
                    or not isinstance(item[1], (int, float)) or isinstance(item[1], bool)
                    or not _finite(item[1])):
                raise TokenizerError(f"{name}: vocab entry {i} must be [piece, finite score], "
                                     f"got {str(item)[:60]}")
        pieces, scores = [p for p, _ in vocab], [float(s) for _, s in vocab]
    out = list(zip(pieces, scores))
    check_piece_lengths(pieces, name)
    if (k := first_not_text(pieces)) is not None:
        raise TokenizerError(f"{name}: the piece of id {k} holds a lone surrogate, which is "
                             f"not valid UTF-8")
    if len(set(pieces)) != len(pieces):
        seen = set()
        repeated = next(p for p in pieces if p in seen or seen.add(p))
        raise TokenizerError(f"{name}: the piece {repeated[:40]!r} appears more than once")
    unk = model.get("unk_id")
    if unk is not None and (not is_int(unk) or not 0 <= unk < len(out)):
        raise TokenizerError(f"{name}: unk_id {str(unk)[:20]} is not an id of the vocabulary")
    if model.get("byte_fallback"):
        raise TokenizerError(f"{name}: a Unigram model with byte_fallback is not supported")
    return TokenizerJson("Unigram", out, unk_id=unk)


def _unigram_entries(vocab: list) -> tuple[list | None, list | None]:
    """(pieces, scores as floats) of a Unigram vocabulary whose every entry is [str, finite
    int or float], checked a column at a time (a type's set, one pass of math.isfinite);
    (None, None) when one is not, for the entry-by-entry check to name it."""
    if set(map(type, vocab)) != {list} or set(map(len, vocab)) != {2}:
        return None, None
    pieces, scores = [p for p, _ in vocab], [s for _, s in vocab]
    if set(map(type, pieces)) != {str} or not set(map(type, scores)) <= {float, int}:
        return None, None
    try:
        scores = list(map(float, scores))
    except OverflowError:  # an int past a float's range, named by the loop
        return None, None
    return (pieces, scores) if all(map(math.isfinite, scores)) else (None, None)


def _finite(score: int | float) -> bool:
    """A finite float, or an int within a float's range (10**400 is neither)."""
    try:
        return math.isfinite(score)
    except OverflowError:
        return False


def _read_bpe(model: dict, name: str) -> TokenizerJson:
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise TokenizerError(f"{name}: the BPE model's vocab must be a non-empty JSON object "
                             f"mapping each piece to its id")
    check_vocab(vocab, f"{name}'s vocab")
    for key in ("dropout",):
        if model.get(key) not in (None, 0, 0.0):
            raise TokenizerError(f"{name}: a BPE model with {key} is not supported")
    if model.get("byte_fallback"):
        raise TokenizerError(f"{name}: a BPE model with byte_fallback is not supported")
    merges = model.get("merges", [])
    if not isinstance(merges, list):
        raise TokenizerError(f"{name}: the BPE model's merges must be a list")
    if len(merges) > MAX_MERGES:
        raise TokenizerError(f"{name}: {len(merges):,} merges, more than the {MAX_MERGES:,} "
                             f"allowed")
    pairs = _merge_pairs(merges, vocab)
    if pairs is None:  # the merge that is not two strings, or its piece that is not known, named
        pairs = []
        for i, m in enumerate(merges):
            if isinstance(m, str):
                parts = m.split(" ")
            elif isinstance(m, list):
                parts = m
            else:
                parts = None
            if (parts is None or len(parts) != 2 or not all(isinstance(p, str) for p in parts)):
                raise TokenizerError(f"{name}: merge {i} must be 'a b' or [a, b], got "
                                     f"{str(m)[:60]}")
            pairs.append((parts[0], parts[1]))
        check_merges(pairs, vocab, name)
    elif not all(map(vocab.__contains__, starmap(add, pairs))):
        check_merges(pairs, vocab, name)  # names the first merge whose join is not a piece
    return TokenizerJson("BPE", dict(vocab), merges=pairs)


def _merge_pairs(merges: list, vocab: dict) -> list[tuple[str, str]] | None:
    """The merges as (a, b) when all are [a, b] lists, or all "a b" strings, of two pieces of
    ``vocab`` (whose keys are strings: check_vocab), checked a column at a time (the sets of
    their types and lengths, then every piece looked up in one pass); None otherwise, for the
    merge-by-merge checks to name the first merge that is not."""
    kinds = set(map(type, merges))
    parts = (merges if kinds == {list} else
             [m.split(" ") for m in merges] if kinds == {str} else None)
    if parts is None or set(map(len, parts)) != {2}:
        return None
    pairs = list(map(tuple, parts))
    try:
        return pairs if all(map(vocab.__contains__, chain.from_iterable(pairs))) else None
    except TypeError:  # a list or an object in a merge
        return None


def check_merges(pairs: list[tuple[str, str]], vocab: dict, name: str, first: int = 0) -> None:
    """Each merge's two pieces and their join must be pieces of the vocabulary (the tokenizers
    library refuses the model otherwise, with a message of its own, or panics); ``first`` is the
    number of the first merge, for the sentence. All the pieces, then all the joins, are looked
    up in one pass each; only when one is missing are the merges gone through one by one, to
    name the first that fails."""
    known = vocab.__contains__
    if all(map(known, chain.from_iterable(pairs))) and all(map(known, starmap(add, pairs))):
        return
    for i, (a, b) in enumerate(pairs, start=first):
        for piece in (a, b, a + b):
            if piece not in vocab:
                raise TokenizerError(f"{name}: merge {i} ({a[:20]!r} {b[:20]!r}) uses "
                                     f"{piece[:40]!r}, which is not in the vocabulary")


def _read_added_tokens(items, name: str) -> list[dict]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise TokenizerError(f"{name}: added_tokens must be a list")
    if len(items) > MAX_ADDED_TOKENS:
        raise TokenizerError(f"{name}: {len(items):,} added tokens, more than the "
                             f"{MAX_ADDED_TOKENS:,} allowed")
    out, ids = [], set()
    for k, item in enumerate(items):
        what = f"{name}: added token {k}"
        if not isinstance(item, dict):
            raise TokenizerError(f"{what} must be a JSON object")
        tid, content = item.get("id"), item.get("content")
        if not is_int(tid) or not 0 <= tid < limits.MAX_VOCAB + MAX_ADDED_TOKENS:
            raise TokenizerError(f"{what}: id {str(tid)[:20]} is not a valid id")
        if tid in ids:
            raise TokenizerError(f"{what}: id {tid} is given twice")
        ids.add(tid)
        content = _piece_text(content, what)
        if not content or len(content) > MAX_PIECE_CHARS:
            raise TokenizerError(f"{what}: its text must have 1 to {MAX_PIECE_CHARS} characters")
        flags = {}
        for flag, default in (("single_word", False), ("lstrip", False), ("rstrip", False),
                              ("normalized", False), ("special", False)):
            value = item.get(flag, default)
            if not isinstance(value, bool):
                raise TokenizerError(f"{what}: {flag} must be true or false")
            flags[flag] = value
        out.append({"id": tid, "content": content, **flags})
    return out


# ---------------------------------------------------------------------- merges.txt

def read_merges_txt(data, vocab: dict, name: str = "merges.txt") -> list[tuple[str, str]]:
    """merges.txt: an optional "#version" first line, then one "a b" merge a line (an empty
    line, such as the final one, is skipped), every piece and join in ``vocab``. Its lines are
    counted on the bytes before the text is split (at most MAX_MERGES_TXT merges), and each
    merge is checked as it is read: a hostile file is refused before a list of its lines, or
    of its merges, is built."""
    data = _as_bytes(data, name, MAX_MERGES_BYTES)
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    merges = lines - data.startswith(b"#version")
    if merges > MAX_MERGES_TXT:
        raise TokenizerError(f"{name}: {merges:,} lines of merges, more than the "
                             f"{MAX_MERGES_TXT:,} merges allowed (a merges.txt makes one piece "
                             f"per merge, and a vocabulary has at most {limits.MAX_VOCAB:,})")
    text = _as_text(data, name)
    del data
    pairs = []
    for number, line in enumerate(text.split("\n"), start=1):
        if number == 1 and line.startswith("#version"):
            continue
        line = line.removesuffix("\r")
        if not line:
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise TokenizerError(f"{name}: line {number} ({line[:40]!r}) is not two pieces "
                                 f"separated by one space")
        check_merges([(parts[0], parts[1])], vocab, name, len(pairs))
        pairs.append((parts[0], parts[1]))
    return pairs


# ---------------------------------------------------------------------- SentencePiece models

_SPM_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


def read_sentencepiece(data, name: str) -> SentencePieceData:
    """A SentencePiece model file, checked (see the module's docstring)."""
    data = _as_bytes(data, name, MAX_SPM_BYTES)
    proto = sentencepiece_model_pb2.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError):
        raise TokenizerError(f"{name}: not a SentencePiece model") from None
    n = len(proto.pieces)
    if n == 0:
        raise TokenizerError(f"{name}: the SentencePiece model has no pieces")
    if n > limits.MAX_VOCAB:
        raise TokenizerError(f"{name}: the SentencePiece model has {n:,} pieces, more than the "
                             f"{limits.MAX_VOCAB:,} a vocabulary may have")
    check_sentencepiece_model(data, name)
    pieces = [(p.piece, float(p.score), int(p.type)) for p in proto.pieces]
    if not all(math.isfinite(score) for _, score, _ in pieces):
        i = next(i for i, (_, score, _) in enumerate(pieces) if not math.isfinite(score))
        raise TokenizerError(f"{name}: piece {i} has the score {proto.pieces[i].score}")
    if len({p for p, _, _ in pieces}) != n:
        raise TokenizerError(f"{name}: a piece appears more than once")
    kind = _SPM_TYPES.get(int(proto.trainer_spec.model_type), "unknown")
    unk = int(proto.trainer_spec.unk_id)
    if not 0 <= unk < n:
        raise TokenizerError(f"{name}: its unk id {unk} is not an id of its {n:,} pieces")
    charsmap = bytes(proto.normalizer_spec.precompiled_charsmap)
    if charsmap and len(charsmap) > MAX_CHARSMAP_BYTES:  # check_sentencepiece_model refused it
        raise TokenizerError(f"{name}: its normalization rules are too large")
    return SentencePieceData(data, pieces, kind, unk, charsmap)


# ---------------------------------------------------------------------- tokenizer_config.json

_CONFIG_BOOLS = ("legacy_behaviour", "add_prefix_space", "clean_up_tokenization_spaces")


def read_tokenizer_config(data, name: str = "tokenizer_config.json") -> dict:
    """What the tokenizers here take from tokenizer_config.json, checked: ``family`` (from
    ``tokenizer_class``, None when it names no family here), ``src_lang`` and ``tgt_lang``
    (str or None), ``options`` (huggingface.OPTIONS given as booleans), ``extra_ids`` (T5, an
    int in [0, 1000] or None), ``language_codes`` and ``num_madeup_words`` (M2M100, or None).
    Other fields are ignored. At most limits.MAX_JSON_BYTES and MAX_JSON_DEPTH deep."""
    data = _as_bytes(data, name, limits.MAX_JSON_BYTES)
    _json_depth_and_strings(data, name)
    text = _as_text(data, name)
    doc = _loads(text, name)
    if not isinstance(doc, dict):
        raise TokenizerError(f"{name}: expected a JSON object, got {type(doc).__name__}")

    def string(key):
        value = doc.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > 64):
            raise TokenizerError(f"{name}: {key} must be a short string, got {str(value)[:40]!r}")
        return value

    def integer(key, high):
        value = doc.get(key)
        if value is not None and (not is_int(value) or not 0 <= value <= high):
            raise TokenizerError(f"{name}: {key} must be an int in [0, {high}], got "
                                 f"{str(value)[:40]}")
        return value

    options = {}
    for key in _CONFIG_BOOLS:
        if key in doc and doc[key] is not None:
            if not isinstance(doc[key], bool):
                raise TokenizerError(f"{name}: {key} must be true or false, got "
                                     f"{str(doc[key])[:40]}")
            options[key] = doc[key]
    return {"family": CLASS_FAMILY.get(string("tokenizer_class")),
            "src_lang": string("src_lang"), "tgt_lang": string("tgt_lang"), "options": options,
            "extra_ids": integer("extra_ids", 1000),
            "language_codes": string("language_codes"),
            "num_madeup_words": integer("num_madeup_words", 1024)}
