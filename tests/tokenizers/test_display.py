"""transformer.tokenizers.display: byte-level BPE's pieces shown as the text they stand for."""

from types import SimpleNamespace

import pytest

from transformer.tokenizers.display import (
    WORD_START,
    byte_alphabet,
    byte_level_text,
    is_byte_level,
    shown_pieces,
)

BART = SimpleNamespace(kind="huggingface", family="bart")
T5 = SimpleNamespace(kind="huggingface", family="t5")
MARIAN = SimpleNamespace(kind="marian")


def test_the_alphabet_is_gpt2s_bytes_to_unicode():
    alphabet = byte_alphabet()
    assert sorted(alphabet) == list(range(256)) and len(set(alphabet.values())) == 256
    assert alphabet[ord(" ")] == "Ġ" and alphabet[ord("\n")] == "Ċ" and alphabet[ord("a")] == "a"
    assert alphabet[0xC3] == "Ã" and alphabet[0xA9] == "©"
    assert alphabet[0xAD] == "Ń"  # the soft hyphen, the last of the 68 bytes moved: U+0143


def test_the_alphabet_is_the_tokenizers_librarys():
    pre_tokenizers = pytest.importorskip("tokenizers.pre_tokenizers")
    assert set(byte_alphabet().values()) == set(pre_tokenizers.ByteLevel.alphabet())


@pytest.mark.parametrize("piece, shown", [
    ("Ġworld", "▁world"), ("world", "world"), ("Ġ", "▁"), ("ĠĠ", "▁▁"),
    ("Ã©", "é"), ("ĠcafÃ©", "▁café"), ("æĹ¥æľ¬", "日本"),
    ("æĹ", "<0xE6><0x97>"), ("¥", "<0xA5>"),  # bytes of a character split across pieces
    ("Ċ", "\\n"), ("ĉ", "\\t"),  # control characters as their escapes
    ("<s>", "<s>"), ("▁x", "▁x"), ("日", "日"),  # not in the byte alphabet: as it is
])
def test_byte_level_text(piece, shown):
    assert byte_level_text(piece) == shown


def test_only_byte_level_tokenizers_are_decoded():
    assert is_byte_level(BART) and not is_byte_level(T5) and not is_byte_level(MARIAN)
    pieces = ["<s>", "ĠcafÃ©", "Ġ", "æĹ¥æľ¬", "</s>"]
    assert shown_pieces(BART, pieces) == ["<s>", "▁café", "▁", "日本", "</s>"]
    assert shown_pieces(T5, ["▁Ã©", "Ġ"]) == ["▁Ã©", "Ġ"]  # a SentencePiece vocabulary's own
    assert shown_pieces(BART, ["Ã©", "Ã©"], keep=["Ã©"]) == ["Ã©", "Ã©"]


def test_shown_pieces_read_as_the_byte_level_decoder_reads_them():
    decoders = pytest.importorskip("tokenizers.decoders")
    alphabet = byte_alphabet()
    for text in ("Hello world", " café au lait", "日本語のテキスト", "a  b", "émoji 🙂 ok"):
        pieces = ["".join(alphabet[b] for b in word.encode("utf-8"))
                  for word in text.replace(" ", "\0 ").split("\0")]
        shown = shown_pieces(BART, pieces)
        assert "".join(shown).replace(WORD_START, " ") == decoders.ByteLevel().decode(pieces)
