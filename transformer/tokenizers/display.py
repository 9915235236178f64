"""How a tokenizer's pieces are shown to people: byte-level BPE's pieces turned back into text.

A byte-level BPE (BART's, GPT-2's) writes every byte of the UTF-8 text as one character of GPT-2's
byte alphabet (``bytes_to_unicode``): printable ASCII and most of Latin-1 as themselves, the other
bytes as U+0100 and up, so a space is "Ġ" and "é" (bytes C3 A9) is "Ã©". Its pieces read as
"Ġworld" and "ĠcafÃ©". ``shown_pieces`` maps them back: the bytes a piece stands for, decoded,
with SentencePiece's word-start mark "▁" for each space (so every family's pieces read alike:
"▁world", "▁café"); a byte that is part of a character split across pieces shows as "<0xE6>"
(SentencePiece's way of naming a lone byte), a control character as its escape ("\\n").

Only the display changes: the pieces themselves (``ids_to_pieces``, the vocabulary) stay what the
tokenizer holds. Tokenizers of other kinds, and pieces that are not in the byte alphabet (a
special or added token such as "<s>"), are shown as they are.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from transformer.core.text import BYTE_LEVEL_START, WORD_START

__all__ = ["WORD_START", "BYTE_LEVEL_START", "byte_alphabet", "is_byte_level",
           "byte_level_text", "shown_pieces"]



@functools.cache
def byte_alphabet() -> dict[int, str]:
    """GPT-2's bytes_to_unicode: byte -> the character a byte-level BPE writes it as (the
    printable bytes "!".."~", "¡".."¬", "®".."ÿ" as themselves, the other 68 as U+0100 on)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in kept]
    return {**{b: chr(b) for b in kept}, **{b: chr(256 + n) for n, b in enumerate(others)}}


@functools.cache
def _char_bytes() -> dict[str, int]:
    return {char: byte for byte, char in byte_alphabet().items()}


def is_byte_level(tokenizer) -> bool:
    """Whether the tokenizer's pieces are byte-level BPE (a Hugging Face tokenizer whose
    family's record pre-tokenizes byte by byte: hf_families)."""
    from transformer.tokenizers.hf_families import FAMILIES

    family = FAMILIES.get(getattr(tokenizer, "family", None))
    return (getattr(tokenizer, "kind", None) == "huggingface" and family is not None
            and family.pre_tokenizer == "byte_level")


def byte_level_text(piece: str) -> str:
    """A byte-level piece as the text it stands for: its bytes decoded as UTF-8, each space as
    WORD_START, a byte that does not make a character alone as "<0xE6>", a control character as
    its escape. A piece with a character outside the byte alphabet is returned as it is."""
    table = _char_bytes()
    if not all(char in table for char in piece):
        return piece
    text = bytes(table[char] for char in piece).decode("utf-8", errors="surrogateescape")
    return "".join(_shown_char(char) for char in text)


def _shown_char(char: str) -> str:
    if char == " ":
        return WORD_START
    if "\udc80" <= char <= "\udcff":  # surrogateescape's stand-in for an undecodable byte
        return f"<0x{ord(char) - 0xDC00:02X}>"
    if not char.isprintable():  # "\n", "\t", other control and format characters
        return char.encode("unicode_escape").decode("ascii")
    return char


def shown_pieces(tokenizer, pieces: Sequence[str], keep: Iterable[str] = ()) -> list[str]:
    """The pieces as people read them: a byte-level tokenizer's pieces as byte_level_text (those
    in `keep`, such as its special pieces, as they are); any other tokenizer's unchanged."""
    pieces = [str(p) for p in pieces]
    if not is_byte_level(tokenizer):
        return pieces
    keep = set(keep)
    return [p if p in keep else byte_level_text(p) for p in pieces]
