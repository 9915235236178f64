"""Checking a SentencePiece model file as data, before SentencePiece runs it.

SentencePiece (0.2.x) trusts its model file. Two parts of it can hurt a server that loads a
stranger's model:

* a piece that is not valid UTF-8 loads, and then ``id_to_piece`` or ``decode`` raises
  UnicodeDecodeError when that piece comes up;
* a normalization rule (the ``precompiled_charsmap`` of the normalizer and denormalizer: a
  Darts-clone double-array trie over input bytes and a blob of NUL-separated output strings) is
  followed without bounds checks: an output that is not valid UTF-8 makes every sentence holding
  the rule's input raise UnicodeDecodeError, and a trie whose offsets point outside itself, or
  with more than 32 rules along one input, makes the C++ code read outside its memory.

:func:`check_sentencepiece_model` reads the model with the protobuf schema SentencePiece ships
(``sentencepiece.sentencepiece_model_pb2``) and refuses either, with a TokenizerError naming the
file. The trie is walked breadth first with NumPy, one input byte a level, over every
transition SentencePiece could take for any input byte: each read must land inside the trie, no
input may match more than 32 rules or a rule longer than 256 bytes, and each rule's output must
lie inside the blob and decode as UTF-8. Checking SentencePiece's own tables (~240 KB) takes
~0.1 s.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np
from google.protobuf.message import DecodeError
from sentencepiece import sentencepiece_model_pb2

from transformer.core import limits
from transformer.tokenizers.base import TokenizerError, is_text

__all__ = ["check_sentencepiece_model", "check_charsmap", "MAX_CHARSMAP_BYTES",
           "MAX_RULES_PER_PREFIX", "MAX_RULE_BYTES", "MAX_RULE_OUTPUT_BYTES"]

# A normalization rule table larger than this is refused: SentencePiece's own (nmt_nfkc, nfkc_cf)
# are ~240 KB; checking costs ~256 steps per trie node.
MAX_CHARSMAP_BYTES = 2 * 2**20
# Normalizer::kMaxTrieResultsSize: SentencePiece keeps this many rule matches for one input
# position in a fixed stack array (and reads past it when a trie holds more).
MAX_RULES_PER_PREFIX = 32
# The longest input one rule may match: SentencePiece's own are at most a few characters.
MAX_RULE_BYTES = 256
# The longest output of one rule: NFKC's longest (U+FDFA, 18 Arabic characters) is 33 bytes. A
# rule that turned one character into a megabyte made a typed text of 100 such characters take
# 2 GB and abort the process (issue 37's fuzzer); at 64 bytes the app's 100,000 typed
# characters normalize to at most 6.4 MB.
MAX_RULE_OUTPUT_BYTES = 64

_LEAF_LABEL_MASK = (1 << 31) | 0xFF  # DoubleArrayUnit::label()
_VALUE_MASK = (1 << 31) - 1  # DoubleArrayUnit::value()
_BYTES = np.arange(256, dtype=np.int64)
_CHUNK = 4096  # bases walked at once


_PASSED: OrderedDict = OrderedDict()  # sha256 of models that passed the check, most recent last
MAX_REMEMBERED = 64  # models whose check is not repeated (a checkpoint holds two)
_PASSED_LOCK = threading.Lock()


def check_sentencepiece_model(model_bytes: bytes, name: str) -> None:
    """Refuse a SentencePiece model whose pieces or normalization rules are not valid UTF-8, or
    whose rule tables SentencePiece would read outside of (a TokenizerError naming ``name``).

    The same bytes always pass or fail alike, so a model that passed is remembered by its
    sha256 (the MAX_REMEMBERED most recent) and not parsed again: reopening a checkpoint, or
    another checkpoint with the same tokenizer (the bundled epochs), skips the check."""
    digest = hashlib.sha256(model_bytes).digest()
    with _PASSED_LOCK:
        if digest in _PASSED:
            _PASSED.move_to_end(digest)
            return
    _check(model_bytes, name)
    with _PASSED_LOCK:
        _PASSED[digest] = True
        while len(_PASSED) > MAX_REMEMBERED:
            _PASSED.popitem(last=False)


def _check(model_bytes: bytes, name: str) -> None:
    proto = sentencepiece_model_pb2.ModelProto()
    try:
        proto.ParseFromString(bytes(model_bytes))
    except (DecodeError, ValueError, RuntimeError):
        raise TokenizerError(f"{name}: not a SentencePiece model") from None
    for i, piece in enumerate(proto.pieces):
        # protobuf gives a proto2 string field that is not valid UTF-8 as bytes.
        if not isinstance(piece.piece, str):
            raise TokenizerError(f"{name}: piece {i} ({bytes(piece.piece)[:20]!r}) is not valid "
                                 f"UTF-8 text")
        if not is_text(piece.piece):
            raise TokenizerError(f"{name}: piece {i} ({piece.piece[:20]!r}) holds a lone "
                                 f"surrogate, which is not valid UTF-8")
    if proto.trainer_spec.model_type in (0, 1):  # UNIGRAM (the default): a lattice of pieces
        check_piece_lengths([p.piece for p in proto.pieces if p.type in (0, 1)], name)
    for field, what in (("normalizer_spec", "normalization rules"),
                        ("denormalizer_spec", "denormalization rules")):
        if proto.HasField(field):
            check_charsmap(bytes(getattr(proto, field).precompiled_charsmap),
                           f"{name}: its {what}")


def check_piece_lengths(pieces, name: str) -> None:
    """A Unigram vocabulary's pieces at most limits.MAX_UNIGRAM_PIECE_CHARS characters long:
    tokenizing a text costs its length times the longest piece's."""
    pieces = list(pieces)
    if max(map(len, pieces), default=0) <= limits.MAX_UNIGRAM_PIECE_CHARS:
        return
    longest = max(pieces, key=len)  # the first of the longest, named
    if len(longest) > limits.MAX_UNIGRAM_PIECE_CHARS:
        raise TokenizerError(f"{name}: the piece {longest[:20]!r}... has {len(longest):,} "
                             f"characters; a Unigram piece may have at most "
                             f"{limits.MAX_UNIGRAM_PIECE_CHARS} (tokenizing a text costs its "
                             f"length times the longest piece's)")


def check_charsmap(blob: bytes, what: str) -> None:
    """A ``precompiled_charsmap``: uint32 trie size, the Darts-clone trie, the output strings.

    Empty means no rules (SentencePiece then leaves the text as it is)."""
    if not blob:
        return
    if len(blob) > MAX_CHARSMAP_BYTES:
        raise TokenizerError(f"{what} take {len(blob):,} bytes, more than the "
                             f"{MAX_CHARSMAP_BYTES:,} allowed")
    trie_bytes = int.from_bytes(blob[:4], "little") if len(blob) > 4 else 0
    if not 4 <= trie_bytes <= len(blob) - 4:  # SentencePiece itself only checks the upper end
        raise TokenizerError(f"{what} are broken (the table's header gives {trie_bytes:,} "
                             f"bytes of trie in {len(blob):,})")
    if trie_bytes % 4:
        # The trie is 4-byte units. SentencePiece reads the outputs from 4 + trie_bytes, the
        # tokenizers library from 4 + 4 * (trie_bytes // 4): the two would normalize one text
        # differently, and the library panics where its offset falls inside a character.
        raise TokenizerError(f"{what} are broken (the table's header gives {trie_bytes:,} "
                             f"bytes of trie, not a whole number of 4-byte units)")
    units = np.frombuffer(blob, dtype="<u4", count=trie_bytes // 4, offset=4).astype(np.int64)
    values = _rule_outputs(units, what)
    _check_outputs(values, blob[4 + trie_bytes:], what)


def _offset(unit: np.ndarray) -> np.ndarray:
    """DoubleArrayUnit::offset()."""
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


def _rule_outputs(units: np.ndarray, what: str) -> np.ndarray:
    """Walk every path SentencePiece's commonPrefixSearch can take through the trie, one input
    byte a level; the offsets of the rules' outputs (sorted, each once).

    Darts-clone shares identical subtrees (it is built from a DAWG), so one base can be reached
    by several paths: each level keeps every base once, with the most rules matched on the way.
    """
    n = len(units)
    # After reading a node, SentencePiece moves to node ^ offset(node): the base from which the
    # next byte's transition is read (at base ^ byte) and where a rule's value is stored.
    bases = np.array([_offset(units[0])], dtype=np.int64)
    rules = np.zeros(1, dtype=np.int64)  # the most rules matched on a path to each base
    values = [np.zeros(0, dtype=np.int64)]
    walked = 0
    for _ in range(MAX_RULE_BYTES + 1):
        if not bases.size:
            return np.unique(np.concatenate(values))
        walked += bases.size
        if walked > max(4 * n, 4096):
            raise TokenizerError(f"{what} are broken (the trie has far more paths than nodes)")
        if (bases | 0xFF).max() >= n:
            raise TokenizerError(f"{what} are broken (the trie points past its end)")
        next_bases, next_rules = [], []
        for chunk in range(0, bases.size, _CHUNK):  # bounds the (bases, 256) arrays' memory
            b, r = bases[chunk:chunk + _CHUNK], rules[chunk:chunk + _CHUNK]
            targets = b[:, None] ^ _BYTES[None, :]  # (bases, 256): every byte's transition
            hit = (units[targets] & _LEAF_LABEL_MASK) == _BYTES[None, :]
            node_units = units[targets[hit]]
            node_bases = targets[hit] ^ _offset(node_units)
            leaf = ((node_units >> 8) & 1).astype(bool)
            if leaf.any():
                if node_bases[leaf].max() >= n:
                    raise TokenizerError(f"{what} are broken (a rule points past the trie's "
                                         f"end)")
                values.append(units[node_bases[leaf]] & _VALUE_MASK)
            next_bases.append(node_bases)
            next_rules.append(np.broadcast_to(r[:, None], hit.shape)[hit] + leaf)
        bases, rules = np.concatenate(next_bases), np.concatenate(next_rules)
        if rules.size and rules.max() > MAX_RULES_PER_PREFIX:
            raise TokenizerError(f"{what} are broken (more than {MAX_RULES_PER_PREFIX} rules "
                                 f"match one input)")
        # Each base once, with the most rules of the paths reaching it.
        order = np.lexsort((-rules, bases))
        bases, rules = bases[order], rules[order]
        first = np.ones(bases.size, dtype=bool)
        first[1:] = bases[1:] != bases[:-1]
        bases, rules = bases[first], rules[first]
    raise TokenizerError(f"{what} are broken (a rule's input is longer than {MAX_RULE_BYTES} "
                         f"bytes)")


def _check_outputs(values: np.ndarray, outputs: bytes, what: str) -> None:
    """Every rule's output (the NUL-terminated string at its offset) lies in the blob, is at
    most MAX_RULE_OUTPUT_BYTES long and is valid UTF-8 (an offset inside a character starts
    with a continuation byte: invalid too)."""
    if values.size and values.max() >= len(outputs):
        raise TokenizerError(f"{what} are broken (a rule's output lies past the table's end)")
    if _outputs_fit(values, outputs):
        return
    for start in values.tolist():  # the first output that does not, named
        end = outputs.find(b"\0", start, start + MAX_RULE_OUTPUT_BYTES + 1)
        if end < 0 and len(outputs) - start > MAX_RULE_OUTPUT_BYTES:
            raise TokenizerError(f"{what} hold a rule whose output is longer than the "
                                 f"{MAX_RULE_OUTPUT_BYTES} bytes one rule may write (one "
                                 "character would become that much text)")
        text = outputs[start:end if end >= 0 else len(outputs)]
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            raise TokenizerError(f"{what} hold an output that is not valid UTF-8 "
                                 f"({text[:20]!r})") from None


def _outputs_fit(values: np.ndarray, outputs: bytes) -> bool:
    """What _check_outputs checks, for all the outputs at once: each output (up to the first NUL
    from its offset, or the end) at most MAX_RULE_OUTPUT_BYTES long, and valid UTF-8, which it is
    when the bytes from the first output to the last one's end decode (a NUL, one byte, never
    falls inside a character) and no output starts with a continuation byte. False when either
    fails (or other bytes in between do not decode), for the output-by-output check."""
    if not values.size:
        return True
    arr = np.frombuffer(outputs, dtype=np.uint8)
    nuls = np.flatnonzero(arr == 0)
    after = np.searchsorted(nuls, values)  # the first NUL at or after each offset
    ends = np.append(nuls, len(outputs))[after]
    if (ends - values).max() > MAX_RULE_OUTPUT_BYTES or ((arr[values] & 0xC0) == 0x80).any():
        return False
    try:
        outputs[int(values.min()):int(ends.max())].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
