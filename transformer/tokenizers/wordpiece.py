"""WordPiece tokenizer that reproduces ``tensorflow_text.BertTokenizer`` (the TF tutorial's).

The tutorial "Neural machine translation with a Transformer and Keras" tokenizes with
``tf_text.BertTokenizer(vocab_path, lower_case=True)`` over a vocabulary file (one token per line,
line i is id i) that starts with the reserved tokens ``[PAD] [UNK] [START] [END]``, frames every
sentence with [START] ... [END], and detokenizes by joining the word pieces into words, dropping
the reserved tokens other than [UNK], and joining the words with a space.

The steps, as tensorflow_text's BasicTokenizer + WordpieceTokenizer do them:

1. ``lower_case``: Unicode NFKC case folding (ICU's NFKC_Casefold: default-ignorable characters
   removed, NFKC, full case folding), then NFD and every nonspacing mark (Mn) removed.
2. Control and format characters (Cc, Cf) become spaces.
3. Words: runs between ASCII whitespace [\\t\\n\\f\\r ]; every punctuation character (ASCII
   punctuation and symbols, Unicode P*) and every CJK ideograph is a word of its own.
4. WordPiece, greedy longest match first with "##" continuations; a word that cannot be covered,
   or longer than 100 UTF-8 bytes, is [UNK].

Hugging Face ``tokenizers`` does steps 3 and 4 (pre_tokenizers.Split with tensorflow_text's own
patterns, models.WordPiece) and the decoding (decoders.WordPiece). Its BertNormalizer and
BertPreTokenizer are not used because they differ from tensorflow_text: BertNormalizer lowercases
instead of NFKC case folding ("ß", "ﬁ", full-width "Ａ" differ) and deletes control characters
instead of splitting on them, and BertPreTokenizer splits on every Unicode space while
tensorflow_text splits on ASCII whitespace only. Step 1 and 2 are therefore Python's
``unicodedata`` (the test compares the ids with tensorflow_text's on many strings).
"""

from __future__ import annotations

import re
import unicodedata

from tokenizers import Regex, decoders, models, pre_tokenizers

from transformer.tokenizers.base import (
    Tokenizer,
    TokenizerError,
    as_id_list,
    byte_to_char_spans,
    check_bool,
    check_matches,
    check_spec_ids,
    check_text,
)
from transformer.tokenizers.vocab_file import read_vocab_lines, vocab_text

__all__ = ["WordPieceTokenizer", "RESERVED_TOKENS", "MAX_BYTES_PER_WORD"]

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")  # the tutorial's, in its order
MAX_BYTES_PER_WORD = 100  # tensorflow_text's default: a longer word is [UNK]
SUFFIX_INDICATOR = "##"

# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): NFKC_Casefold drops them.
_DEFAULT_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")
# tensorflow_text bert_tokenizer._DELIM_REGEX: the whitespace dropped, the rest kept as words.
_WHITESPACE = r"[\t\n\f\r ]+"  # RE2's \s
_KEPT_DELIMITERS = "|".join([
    r"[!-/]", r"[:-@]", r"[\[-`]", r"[{-~]", r"[\p{P}]",
    r"[\x{4E00}-\x{9FFF}]", r"[\x{3400}-\x{4DBF}]", r"[\x{20000}-\x{2A6DF}]",
    r"[\x{2A700}-\x{2B73F}]", r"[\x{2B740}-\x{2B81F}]", r"[\x{2B820}-\x{2CEAF}]",
    r"[\x{F900}-\x{FAFF}]", r"[\x{2F800}-\x{2FA1F}]",
])


class WordPieceTokenizer(Tokenizer):
    """WordPiece over a vocabulary file, as tensorflow_text.BertTokenizer tokenizes.

    Build it with :meth:`from_vocabulary` (the user's file) or :meth:`Tokenizer.from_spec`.
    """

    kind = "wordpiece"
    word_mark = ("##", "continue")

    def described(self) -> tuple[str, str]:
        return "WordPiece", "WordPiece, as tensorflow_text's BertTokenizer splits."
    SPEC_FIELDS = ("kind", "lower_case", "pad_id", "unk_id", "start_id", "end_id", "vocab_size")

    def __init__(self, tokens: list[str], *, lower_case: bool = True,
                 pad_token: str = "[PAD]", unk_token: str = "[UNK]",
                 start_token: str = "[START]", end_token: str = "[END]",
                 name: str = "vocabulary file"):
        if not isinstance(lower_case, bool):
            raise TokenizerError(f"lower_case: expected bool, got {lower_case!r}")
        self.tokens = list(tokens)
        index = {token: i for i, token in enumerate(self.tokens)}
        ids = {}
        for what, token in (("pad", pad_token), ("unk", unk_token), ("start", start_token),
                            ("end", end_token)):
            if token not in index:
                raise TokenizerError(
                    f"{name}: the {what} token {token!r} is not in the vocabulary (the "
                    f"tutorial's vocabulary starts with the reserved tokens "
                    f"{' '.join(RESERVED_TOKENS)})")
            ids[what] = index[token]
        if len(set(ids.values())) != 4:
            raise TokenizerError(f"the pad, unk, start and end tokens must differ, got {ids}")
        self.pad_id, self.unk_id = ids["pad"], ids["unk"]
        self.start_id, self.end_id = ids["start"], ids["end"]
        self.lowercase = lower_case
        self.vocab_size = len(self.tokens)
        self.model_bytes = vocab_text(self.tokens)
        # HF's own limit counts characters; the byte limit (at most as many characters) rules.
        self._model = models.WordPiece(vocab=index, unk_token=unk_token,
                                       continuing_subword_prefix=SUFFIX_INDICATOR,
                                       max_input_chars_per_word=MAX_BYTES_PER_WORD)
        self._pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(_WHITESPACE), behavior="removed"),
            pre_tokenizers.Split(Regex(_KEPT_DELIMITERS), behavior="isolated"),
        ])
        self._decoder = decoders.WordPiece(prefix=SUFFIX_INDICATOR, cleanup=False)
        self.probe(name)

    @classmethod
    def from_vocabulary(cls, data: bytes, *, lower_case: bool = True, pad_token: str = "[PAD]",
                        unk_token: str = "[UNK]", start_token: str = "[START]",
                        end_token: str = "[END]",
                        name: str = "vocabulary file") -> "WordPieceTokenizer":
        """The tokenizer of a WordPiece vocabulary file (its bytes), as
        ``tf_text.BertTokenizer(vocab_file, lower_case=lower_case)`` reads it. The four special
        tokens must be lines of the file; ``name`` names the file in error messages."""
        return cls(read_vocab_lines(data, name), lower_case=lower_case, pad_token=pad_token,
                   unk_token=unk_token, start_token=start_token, end_token=end_token, name=name)

    # ----------------------------------------------------------------- text -> ids

    def _preprocess(self, text: str) -> str:
        """The text after steps 1-2 (case folding, accents and control characters)."""
        check_text(text)
        if self.lowercase:
            text = _DEFAULT_IGNORABLE.sub("", text)
            text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
            text = "".join(c for c in unicodedata.normalize("NFD", text)
                           if unicodedata.category(c) != "Mn")
        return "".join(" " if unicodedata.category(c) in ("Cc", "Cf") else c for c in text)

    def _wordpieces(self, text: str) -> list[tuple[int, str, tuple[int, int]]]:
        """(id, piece, span in preprocess(text)) of every word piece."""
        out = []
        for word, (begin, _) in self._pre_tokenizer.pre_tokenize_str(self._preprocess(text)):
            if len(word.encode("utf-8")) > MAX_BYTES_PER_WORD:
                out.append((self.unk_id, self.tokens[self.unk_id], (begin, begin + len(word))))
                continue
            tokens = self._model.tokenize(word)
            # The model's offsets are UTF-8 byte offsets in the word.
            spans = byte_to_char_spans(word, [t.offsets for t in tokens])
            out.extend((t.id, t.value, (begin + b, begin + e)) for t, (b, e) in zip(tokens, spans))
        return out

    def _pieces(self, text: str) -> list[str]:
        """Word pieces ("##" marks a piece that continues a word; [UNK] a whole unknown word)."""
        return [piece for _, piece, _ in self._wordpieces(text)]

    def _piece_spans(self, text: str) -> list[tuple[int, int]]:
        return [span for _, _, span in self._wordpieces(text)]

    def _piece_ids(self, text: str) -> list[int]:
        return [i for i, _, _ in self._wordpieces(text)]

    # ----------------------------------------------------------------- ids -> text

    def id_to_piece(self, i: int) -> str:
        return self.tokens[self._check_id(i)]

    def decode(self, ids) -> str:
        """Text of ids as the tutorial detokenizes them (up to the first [END]): word pieces
        joined into words ("##" pieces to the word before), the words that are [PAD] or
        [START] dropped ([UNK] stays), the words joined by a space."""
        tokens = []
        for i in as_id_list(ids):
            i = self._check_id(i)
            if i == self.end_id:
                break
            tokens.append(self.tokens[i])
        dropped = {self.tokens[self.pad_id], self.tokens[self.start_id]}
        words = self._decoder.decode(tokens).split(" ") if tokens else []
        return " ".join(w for w in words if w and w not in dropped)

    # ----------------------------------------------------------------- spec / loading

    def spec(self) -> dict:
        return {"kind": self.kind, "lower_case": self.lowercase, "pad_id": self.pad_id,
                "unk_id": self.unk_id, "start_id": self.start_id, "end_id": self.end_id,
                "vocab_size": self.vocab_size}

    @classmethod
    def _from_valid_spec(cls, spec: dict, model_bytes: bytes) -> "WordPieceTokenizer":
        check_bool(spec, "lower_case")
        names = ("pad_id", "unk_id", "start_id", "end_id")
        check_spec_ids(spec, names)
        tokens = read_vocab_lines(model_bytes, "model_bytes (the vocabulary)")
        if len(tokens) != spec["vocab_size"]:
            raise TokenizerError(f"vocab_size: spec says {spec['vocab_size']} but the "
                                 f"vocabulary has {len(tokens)} tokens")
        if len({spec[n] for n in names}) != 4:
            raise TokenizerError(f"pad_id, unk_id, start_id and end_id must differ, got "
                                 f"{[spec[n] for n in names]}")
        pad, unk, start, end = (tokens[spec[n]] for n in names)
        tok = cls(tokens, lower_case=spec["lower_case"], pad_token=pad, unk_token=unk,
                  start_token=start, end_token=end, name="model_bytes (the vocabulary)")
        check_matches(spec, tok.spec(), names, "vocabulary")
        return tok
