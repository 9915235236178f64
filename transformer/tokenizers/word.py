"""Word-level tokenizer that reproduces ``keras.layers.TextVectorization`` (output_mode="int").

The vocabulary is the file ``TextVectorization.get_vocabulary()`` gives (one token per line, line i
is id i): ``""`` (padding, id 0) and ``"[UNK]"`` (every word not in the vocabulary, id 1) first.
Text is standardized as the layer was told, then split on whitespace as the layer does:

* ``tf.strings.lower`` (no encoding given, as TextVectorization calls it) lowercases ASCII
  letters only: "É" stays "É".
* punctuation stripping removes ``string.punctuation`` (ASCII only: "¿", "«" stay).
* ``tf.strings.split`` splits on ASCII whitespace only (space, \\t, \\n, \\v, \\f, \\r): a
  no-break space or an ideographic space is part of a word.

Standardizations (``STANDARDIZATIONS``):

``"lower_and_strip_punctuation"``  TextVectorization's default.
``"lower"``, ``"strip_punctuation"``, ``None``  the layer's other built-in choices.
``"keras_seq2seq"``  the Keras English-to-Spanish example's ``custom_standardization``:
    lowercase, strip ``string.punctuation + "¿"`` except "[" and "]" (so "[start]" and "[end]"
    survive as words).
``"keras_from_scratch"``  the "Transformer from scratch" English-to-French notebook's
    ``custom_standardization``: lowercase, strip ``string.punctuation`` except "[" and "]" ("¿"
    stays).

A model may have more embedding rows than the vocabulary has words: ``TextVectorization(max_tokens=
20000)`` adapted on a corpus of 15,000 words gives 15,000 words, while the notebooks size every
embedding and the output layer by ``max_tokens``. ``vocab_size`` is then the model's rows; ids from
``len(tokens)`` on have no word (text never gives them) and are shown as "[unused N]".

Start and end are words of the vocabulary when it has them (the example's target vocabulary holds
"[start]" and "[end]"; its source vocabulary has neither: then ``start_id``/``end_id`` are None).
"""

from __future__ import annotations

import re
import string

from transformer.tokenizers.base import (
    Tokenizer,
    TokenizerError,
    check_matches,
    check_spec_ids,
    check_text,
)
from transformer.tokenizers.vocab_file import MAX_VOCAB_LINES, read_vocab_lines, vocab_text

__all__ = ["WordTokenizer", "STANDARDIZATIONS", "PAD_TOKEN", "UNK_TOKEN", "PAD_NAME", "UNUSED_NAME"]

PAD_TOKEN, UNK_TOKEN = "", "[UNK]"  # TextVectorization's mask and OOV tokens (ids 0 and 1)
PAD_NAME = "[PAD]"  # how id 0 is shown (its vocabulary token is the empty string)
UNUSED_NAME = "[unused {}]"  # how an id past the vocabulary's words is shown (a row with no word)

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# TextVectorization's regex [!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\'] is string.punctuation.
_STRIP_PUNCTUATION = str.maketrans("", "", string.punctuation)
# The example: strip_chars = string.punctuation + "¿" without "[" and "]".
_STRIP_SEQ2SEQ = str.maketrans("", "", (string.punctuation + "¿").replace("[", "").replace("]", ""))
# The from-scratch notebook: strip_chars = string.punctuation without "[" and "]".
_STRIP_FROM_SCRATCH = str.maketrans("", "", string.punctuation.replace("[", "").replace("]", ""))
STANDARDIZATIONS = {  # name -> (lowercase ASCII, characters removed)
    "lower_and_strip_punctuation": (True, _STRIP_PUNCTUATION),
    "lower": (True, None),
    "strip_punctuation": (False, _STRIP_PUNCTUATION),
    "keras_seq2seq": (True, _STRIP_SEQ2SEQ),
    "keras_from_scratch": (True, _STRIP_FROM_SCRATCH),
    None: (False, None),
}
_WORD = re.compile(r"[^ \t\n\v\f\r]+")  # tf.strings.split: runs between ASCII whitespace


class WordTokenizer(Tokenizer):
    """One id per word, as TextVectorization(vocabulary=..., standardize=...) gives them.

    Build it with :meth:`from_vocabulary` (the user's file) or :meth:`Tokenizer.from_spec`.
    """

    kind = "word"
    word_mark = (None, None)  # every piece is a word

    def described(self) -> tuple[str, str]:
        return "Word-level", "One id per word, as Keras TextVectorization gives them."
    SPEC_FIELDS = ("kind", "standardize", "pad_id", "unk_id", "start_id", "end_id",
                   "vocab_size")

    def __init__(self, tokens: list[str], *,
                 standardize: str | None = "lower_and_strip_punctuation",
                 start_token: str | None = None, end_token: str | None = None,
                 name: str = "vocabulary file", vocab_size: int | None = None):
        if standardize not in STANDARDIZATIONS:
            raise TokenizerError(f"standardize: must be one of {tuple(STANDARDIZATIONS)}, "
                                 f"got {standardize!r}")
        if tokens[:2] != [PAD_TOKEN, UNK_TOKEN]:
            raise TokenizerError(
                f"{name}: a TextVectorization vocabulary starts with the empty line (padding, "
                f"id 0) and then {UNK_TOKEN} (id 1), as get_vocabulary() gives it; this one "
                f"starts with {tokens[:2]!r}")
        self.tokens = list(tokens)
        self.index = {token: i for i, token in enumerate(self.tokens)}
        self.standardize = standardize
        self.lowercase, self._strip = STANDARDIZATIONS[standardize]
        self.vocab_size = len(self.tokens) if vocab_size is None else vocab_size
        if not len(self.tokens) <= self.vocab_size <= MAX_VOCAB_LINES:
            raise TokenizerError(
                f"{name}: vocab_size {self.vocab_size} must be at least the vocabulary's "
                f"{len(self.tokens)} words (the model's rows) and at most {MAX_VOCAB_LINES:,}")
        self.pad_id, self.unk_id = 0, 1
        self.start_id = self._special_id(start_token, "start", name)
        self.end_id = self._special_id(end_token, "end", name)
        if self.start_id is not None and self.start_id == self.end_id:
            raise TokenizerError(f"the start and end tokens must differ, both are {start_token!r}")
        self.model_bytes = vocab_text(self.tokens)
        self.probe(name)

    def _special_id(self, token, what, name):
        if token is None:
            return None
        if not isinstance(token, str):
            raise TokenizerError(f"{what}_token: expected a word or None, got {token!r}")
        i = self.index.get(token)
        if i is None or i < 2:
            raise TokenizerError(f"{name}: the {what} token {token!r} is not a word of the "
                                 f"vocabulary")
        return i

    @classmethod
    def from_vocabulary(cls, data: bytes, *,
                        standardize: str | None = "lower_and_strip_punctuation",
                        start_token: str | None = None, end_token: str | None = None,
                        name: str = "vocabulary file", vocab_size: int | None = None
                        ) -> "WordTokenizer":
        """The tokenizer of a TextVectorization vocabulary file (its bytes).

        ``standardize``: the layer's (see STANDARDIZATIONS). ``start_token``/``end_token``: the
        words that start and end a target sentence ("[start]"/"[end]" in the Keras example), or
        None. ``name`` names the file in error messages. ``vocab_size``: the model's embedding
        rows, when they are more than the file's words (see the module's docstring).
        """
        return cls(read_vocab_lines(data, name), standardize=standardize,
                   start_token=start_token, end_token=end_token, name=name,
                   vocab_size=vocab_size)

    # ----------------------------------------------------------------- text -> ids

    def _preprocess(self, text: str) -> str:
        """The standardized text, as TextVectorization standardizes it."""
        check_text(text)
        if self.lowercase:
            text = text.translate(_ASCII_LOWER)
        if self._strip is not None:
            text = text.translate(self._strip)
        return text

    def _pieces(self, text: str) -> list[str]:
        """The words of the standardized text."""
        return _WORD.findall(self._preprocess(text))

    def _piece_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _WORD.finditer(self._preprocess(text))]

    def _piece_ids(self, text: str) -> list[int]:
        return [self.index.get(word, self.unk_id) for word in self._pieces(text)]

    # ----------------------------------------------------------------- ids -> text

    def id_to_piece(self, i: int) -> str:
        """The vocabulary's word of id ``i`` ("[PAD]" for padding, whose word is "", and
        "[unused N]" for a row past the vocabulary's words)."""
        i = self._check_id(i)
        if i == self.pad_id:
            return PAD_NAME
        return self.tokens[i] if i < len(self.tokens) else UNUSED_NAME.format(i)

    def _decode_kept(self, ids: list[int]) -> str:
        """The words joined by one space (unknown words are "[UNK]")."""
        return " ".join(self.tokens[i] if i < len(self.tokens) else UNUSED_NAME.format(i)
                        for i in ids)

    # ----------------------------------------------------------------- spec / loading

    def spec(self) -> dict:
        return {"kind": self.kind, "standardize": self.standardize, "pad_id": self.pad_id,
                "unk_id": self.unk_id, "start_id": self.start_id, "end_id": self.end_id,
                "vocab_size": self.vocab_size}

    @classmethod
    def _from_valid_spec(cls, spec: dict, model_bytes: bytes) -> "WordTokenizer":
        if spec["standardize"] not in STANDARDIZATIONS:
            raise TokenizerError(f"standardize: must be one of {tuple(STANDARDIZATIONS)}, "
                                 f"got {spec['standardize']!r}")
        check_spec_ids(spec, ("pad_id", "unk_id", "start_id", "end_id"),
                       optional=("start_id", "end_id"))
        for name, value in (("pad_id", 0), ("unk_id", 1)):
            if spec[name] != value:
                raise TokenizerError(f"{name}: must be {value} in a TextVectorization "
                                     f"vocabulary, got {spec[name]!r}")
        tokens = read_vocab_lines(model_bytes, "model_bytes (the vocabulary)")
        if len(tokens) > spec["vocab_size"]:
            raise TokenizerError(f"vocab_size: spec says {spec['vocab_size']} but the "
                                 f"vocabulary has {len(tokens)} tokens")
        start, end = (None if spec[k] is None or spec[k] >= len(tokens) else tokens[spec[k]]
                      for k in ("start_id", "end_id"))
        tok = cls(tokens, standardize=spec["standardize"], start_token=start, end_token=end,
                  name="model_bytes (the vocabulary)", vocab_size=spec["vocab_size"])
        check_matches(spec, tok.spec(), ("start_id", "end_id"), "vocabulary")
        return tok
