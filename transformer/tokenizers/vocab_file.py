"""Reading a one-token-per-line vocabulary file (line i is id i), as data, with size caps."""

from __future__ import annotations

__all__ = ["MAX_VOCAB_BYTES", "MAX_VOCAB_LINES", "read_vocab_lines", "vocab_text"]

from transformer.core import limits
from transformer.tokenizers.base import TokenizerError

MAX_VOCAB_BYTES = 16 * 1024 * 1024  # a vocabulary file larger than this is refused
MAX_VOCAB_LINES = limits.MAX_VOCAB  # so is one with more tokens than this


def read_vocab_lines(data, name: str = "vocabulary file") -> list[str]:
    """Tokens of a vocabulary file, one per line, as ``"\\n".join(tokens)`` writes it.

    A final newline, Windows line ends ("\\r\\n") and a UTF-8 byte-order mark are accepted. An
    empty, oversized or non-UTF-8 file, or one that repeats a token, is a TokenizerError naming
    ``name`` and the line.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TokenizerError(f"{name}: expected the file's bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise TokenizerError(f"{name}: the file is empty")
    if len(data) > MAX_VOCAB_BYTES:
        raise TokenizerError(f"{name}: the file has {len(data):,} bytes, more than the "
                             f"{MAX_VOCAB_BYTES:,} a vocabulary may have")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise TokenizerError(f"{name}: not UTF-8 text (byte {e.start} on line {line} is "
                             f"{data[e.start:e.start + 1]!r})") from None
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start another
    if len(lines) > MAX_VOCAB_LINES:
        raise TokenizerError(f"{name}: {len(lines):,} tokens, more than the "
                             f"{MAX_VOCAB_LINES:,} a vocabulary may have")
    lines = [line.removesuffix("\r") for line in lines]
    first_line = {}
    repeats = []
    for number, token in enumerate(lines, start=1):
        if token in first_line:
            repeats.append(f"line {number} repeats {token!r} of line {first_line[token]}")
        else:
            first_line[token] = number
    if repeats:
        more = f" (and {len(repeats) - 3} more)" if len(repeats) > 3 else ""
        raise TokenizerError(f"{name}: every token must be on one line only: "
                             + "; ".join(repeats[:3]) + more)
    return lines


def vocab_text(tokens: list[str]) -> bytes:
    """The file ``read_vocab_lines`` reads back as ``tokens`` (one per line, UTF-8)."""
    return "\n".join(tokens).encode("utf-8")
