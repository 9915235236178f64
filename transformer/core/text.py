"""Text as it enters the tokenizers: what a browser can send, made safe to tokenize.

A browser can send any Python string: lone surrogates ("\\ud800", from pasted text cut inside an
emoji's UTF-16 pair), control characters, NUL, noncharacters (U+FFFE, U+FFFF), megabytes of text.
The tokenizers' libraries (SentencePiece, Hugging Face ``tokenizers``) take UTF-8, and a lone
surrogate cannot be encoded as UTF-8: they raise on it. :func:`clean_text` is the one place every
text passes through before a tokenizer sees it (``Tokenizer.preprocess``, ``pieces``,
``piece_spans`` and ``encode`` all call it), and :func:`text_notes` says what it changed, in
sentences the app can show.

Cleaning keeps offsets: each lone surrogate becomes one U+FFFD (one character for one), so a
character offset into the cleaned text is the same offset into the text as typed. Only a text
longer than ``MAX_TEXT_CHARS`` changes length: it is cut to its first ``MAX_TEXT_CHARS``
characters (offsets into the part kept are unchanged). Control characters, NUL and
noncharacters are valid UTF-8 and are left alone (every tokenizer handles them).
"""

from __future__ import annotations

import re

__all__ = ["MAX_TEXT_CHARS", "REPLACEMENT", "WORD_START", "BYTE_LEVEL_START", "clean_text",
           "text_notes", "check_str"]

# Characters of one text a tokenizer reads: the longest model reads 16,384 pieces (the config's
# max_len limit), so a longer text only costs time; 100k characters tokenize in ~0.1 s.
MAX_TEXT_CHARS = 100_000
REPLACEMENT = "\ufffd"  # U+FFFD REPLACEMENT CHARACTER, what UTF-8 decoders put for bad bytes
# How pieces say "a space came before this piece": SentencePiece's mark, and a byte-level BPE's
# (GPT-2's alphabet writes the space byte as Ġ)
WORD_START = "\u2581"
BYTE_LEVEL_START = "\u0120"
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str every surrogate is a lone code unit


def check_str(text) -> str:
    """``text`` itself, or a TypeError when it is not a str (a caller's bug, not user text)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return text


def clean_text(text: str) -> tuple[str, list[str]]:
    """``(cleaned, notes)``: the text every tokenizer reads, and one sentence per change.

    Lone surrogates (which cannot be encoded as UTF-8) become U+FFFD, one for one, so offsets
    are kept; a text longer than ``MAX_TEXT_CHARS`` is cut to that many characters. ``notes`` is
    empty when the text is unchanged.
    """
    check_str(text)
    notes = []
    if len(text) > MAX_TEXT_CHARS:
        notes.append(f"The text has {len(text):,} characters; only its first "
                     f"{MAX_TEXT_CHARS:,} are read.")
        text = text[:MAX_TEXT_CHARS]
    text, replaced = _SURROGATE.subn(REPLACEMENT, text)
    if replaced:
        what = "1 character that cannot" if replaced == 1 else f"{replaced:,} characters that cannot"
        verb = "was" if replaced == 1 else "were"
        notes.append(f"{what} be encoded as UTF-8 (lone surrogates) {verb} replaced with "
                     f"{REPLACEMENT}.")
    return text, notes


def text_notes(text: str) -> list[str]:
    """What cleaning changes in ``text``, one sentence each ([] when nothing): for the app to
    show beside the sentence (for example in the sidebar)."""
    return clean_text(text)[1]


def quoted(name: str) -> str:
    """A name from a file, quoted for a sentence and cut to 80 characters."""
    return repr(name if len(name) <= 80 else name[:77] + "...")
