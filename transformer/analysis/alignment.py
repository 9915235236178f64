"""How well attention heads align words: AER, precision and recall against gold alignments.

An alignment is a set of links (j, i): source word j goes with target word i, both 0-based. A
gold alignment has sure links S and possible links P (P includes S: a link an annotator found
ambiguous is possible only). Against a predicted alignment A (Och & Ney 2000, "Improved
Statistical Alignment Models"; 2003, "A Systematic Comparison of Various Statistical Alignment
Models"):

    precision = |A & P| / |A|        recall = |A & S| / |S|
    AER       = 1 - (|A & S| + |A & P|) / (|A| + |S|)

AER is 0 for a prediction that finds every sure link and claims nothing outside P, 1 for one
that shares nothing with P. The empty cases, where a ratio would be 0/0: precision is 1 when
A is empty (no wrong link claimed), recall is 1 when S is empty (nothing to find), and AER is 0
when both A and S are empty (nothing to find, nothing claimed). Over a corpus the four counts are
summed over the sentences first (as Och & Ney score a test set), so long sentences weigh more.

Gold alignments come from Pharaoh text (parse_pharaoh: "0-0 1-2 2?1" per sentence, "-" sure,
"?" possible; what GIZA++, fast_align and the gold sets of the shared tasks write), paired with
their sentence pairs (aligned_pairs: indices count the whitespace-separated words of each side,
checked against them). The text is an upload from a stranger: its bytes, lines, links and
indices are bounded (MAX_ALIGNMENT_*), and every refusal is an AlignmentError.

The alignment a head predicts: its cross-attention (T, N) over pieces, special tokens hidden and
pieces merged into words as the app shows them (flow.simplify_tokens), then each target word
linked to the source word it attends to most (argmax; a row with no weight left gives no link).
rank_heads scores every head of every layer over a set of sentences and ranks them by AER.

Which target word a row of cross-attention stands for (`rows`): "output", the token it predicts
(maps["output_tokens"]: the attention of the step that writes the word, as Garg et al. 2019
read alignments), or "target", the decoder input of that row (maps["target_tokens"]: the step
after, the "shift" of Chen et al. 2020, "Accurate Word Alignment Induction from Neural Machine
Translation").

NumPy only (no TensorFlow, Streamlit or Plotly). Maps are the dicts OpenedModel.attention
returns: "cross" (L_dec, H, T, N), "source_tokens", "target_tokens", "output_tokens".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from transformer.analysis.flow import SPECIAL_TOKENS, drop_tokens, simplify_tokens
from transformer.core.limits import MAX_INPUT_TOKENS, MB
from transformer.core.text import BYTE_LEVEL_START, WORD_START

__all__ = ["MAX_ALIGNMENT_BYTES", "MAX_ALIGNMENT_SENTENCES", "MAX_LINKS",
           "MAX_LINKS_PER_SENTENCE", "MAX_WORD_INDEX", "ROWS", "AlignedPair", "AlignmentError",
           "AlignmentScores", "GoldAlignment", "HeadAlignment", "aligned_pairs",
           "alignment_error_rate", "alignment_scores", "alignment_statistics",
           "argmax_alignment", "corpus_alignment_scores", "head_alignment", "parse_pharaoh",
           "rank_heads", "word_alignment_maps"]

# What one uploaded alignment file may hold. Real gold sets are small: the Hansards set has 447
# sentences, the Europarl German-English one 508, ~20k links in all.
MAX_ALIGNMENT_BYTES = 2 * MB  # ~10,000 sentences of ~30 links
MAX_ALIGNMENT_SENTENCES = 10_000  # lines; each sentence costs a forward pass to score
MAX_LINKS_PER_SENTENCE = 4_096  # 64 x 64 words all linked
MAX_LINKS = 200_000  # links of the whole file (~30 MB as Python sets)
MAX_WORD_INDEX = MAX_INPUT_TOKENS - 1  # a model reads at most MAX_INPUT_TOKENS pieces, so words
ROWS = ("output", "target")  # what a cross-attention row stands for (see the module docstring)
BARE_MARKS = (WORD_START, BYTE_LEVEL_START)  # a piece that is only "a space came before"

_LINK = re.compile(r"([0-9]+)([-?])([0-9]+)", re.ASCII)
_SHOWN = 40  # characters of a token or sentence quoted in an error


class AlignmentError(ValueError):
    """An alignment file or the sentences it goes with cannot be used, in an error message a user
    understands."""


# ---------------------------------------------------------------------------- scores

Link = tuple[int, int]  # (source word index, target word index)


def _links(pairs: Iterable, name: str) -> frozenset[Link]:
    """pairs as a frozenset of (int, int), each index >= 0 (a caller's bug otherwise)."""
    out = set()
    for pair in pairs:
        try:
            j, i = pair
        except (TypeError, ValueError):
            raise TypeError(f"{name} must hold (source index, target index) pairs, got "
                            f"{pair!r}") from None
        if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in (j, i)):
            raise TypeError(f"{name} holds {pair!r}: indices must be integers")
        if j < 0 or i < 0:
            raise ValueError(f"{name} holds {pair!r}: indices must be >= 0")
        out.add((int(j), int(i)))
    return frozenset(out)


@dataclass(frozen=True)
class AlignmentScores:
    """The four counts of Och & Ney's measures, and the measures (see the module docstring).
    Scores of several sentences add up (+) into the scores of the corpus."""

    predicted: int  # |A|
    sure: int  # |S|
    predicted_sure: int  # |A & S|
    predicted_possible: int  # |A & P|

    @property
    def aer(self) -> float:
        total = self.predicted + self.sure
        return 0.0 if total == 0 else 1.0 - (self.predicted_sure + self.predicted_possible) / total

    @property
    def precision(self) -> float:
        return 1.0 if self.predicted == 0 else self.predicted_possible / self.predicted

    @property
    def recall(self) -> float:
        return 1.0 if self.sure == 0 else self.predicted_sure / self.sure

    def __add__(self, other: AlignmentScores) -> AlignmentScores:
        return AlignmentScores(self.predicted + other.predicted, self.sure + other.sure,
                               self.predicted_sure + other.predicted_sure,
                               self.predicted_possible + other.predicted_possible)


def alignment_scores(predicted, sure, possible=None) -> AlignmentScores:
    """AER, precision and recall of a predicted alignment A against sure links S and possible
    links P: sets (any iterables) of (source word index, target word index). P includes S; sure
    links are counted as possible whether or not `possible` lists them (None: no possible link
    besides the sure ones)."""
    predicted, sure = _links(predicted, "predicted"), _links(sure, "sure")
    possible = _links(possible if possible is not None else (), "possible") | sure
    return AlignmentScores(len(predicted), len(sure), len(predicted & sure),
                           len(predicted & possible))


def alignment_error_rate(predicted, sure, possible=None) -> float:
    """AER = 1 - (|A & S| + |A & P|) / (|A| + |S|), in [0, 1] (see alignment_scores; 0 when A
    and S are both empty)."""
    return alignment_scores(predicted, sure, possible).aer


def corpus_alignment_scores(alignments: Iterable[tuple]) -> AlignmentScores:
    """The scores of a corpus: (predicted, sure, possible) per sentence, the counts summed."""
    total = AlignmentScores(0, 0, 0, 0)
    for predicted, sure, possible in alignments:
        total += alignment_scores(predicted, sure, possible)
    return total


# ---------------------------------------------------------------------------- gold alignments

@dataclass(frozen=True)
class GoldAlignment:
    """One sentence's gold links: sure, and possible (which includes sure)."""

    sure: frozenset[Link]
    possible: frozenset[Link]

    def __post_init__(self):
        object.__setattr__(self, "sure", _links(self.sure, "sure"))
        object.__setattr__(self, "possible", _links(self.possible, "possible") | self.sure)


@dataclass(frozen=True)
class AlignedPair(GoldAlignment):
    """A sentence pair and its gold links (indices into source_words and target_words)."""

    source: str = ""
    target: str = ""

    @property
    def source_words(self) -> tuple[str, ...]:
        return tuple(self.source.split())

    @property
    def target_words(self) -> tuple[str, ...]:
        return tuple(self.target.split())


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _decode(data: str | bytes) -> str:
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        if len(data) > MAX_ALIGNMENT_BYTES:
            raise AlignmentError(f"the alignment file is {len(data):,} bytes: at most "
                                 f"{MAX_ALIGNMENT_BYTES:,} are read")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AlignmentError(f"the alignment file is not UTF-8 text (byte {exc.start} "
                                 f"cannot be read)") from None
    elif not isinstance(data, str):
        raise TypeError(f"alignment text must be str or bytes, got {type(data).__name__}")
    elif len(data) > MAX_ALIGNMENT_BYTES:
        raise AlignmentError(f"the alignment text has {len(data):,} characters: at most "
                             f"{MAX_ALIGNMENT_BYTES:,} are read")
    return data.removeprefix("\ufeff")


def parse_pharaoh(data: str | bytes) -> list[GoldAlignment]:
    """Pharaoh text (str, or bytes of UTF-8) -> one GoldAlignment per line.

    Each line holds one sentence's links separated by spaces: "j-i" a sure link, "j?i" a
    possible one (source word j, target word i, from 0). A blank line is a sentence without
    links; a final newline ends the last line (it starts no sentence); CRLF and a BOM are
    accepted. A link given both ways is sure. Refused (AlignmentError, naming the line): more
    than MAX_ALIGNMENT_BYTES, MAX_ALIGNMENT_SENTENCES lines, MAX_LINKS_PER_SENTENCE links in a
    line or MAX_LINKS in all, a token that is not a link, an index above MAX_WORD_INDEX."""
    text = _decode(data)
    lines = text.count("\n") + 1 - text.endswith("\n")
    if lines > MAX_ALIGNMENT_SENTENCES:
        raise AlignmentError(f"the alignment file has {lines:,} lines: at most "
                             f"{MAX_ALIGNMENT_SENTENCES:,} sentences are read")
    out, total = [], 0
    for number, line in enumerate(text.split("\n")[:lines] if text else [], start=1):
        tokens = line.split()
        if len(tokens) > MAX_LINKS_PER_SENTENCE:
            raise AlignmentError(f"line {number} has {len(tokens):,} links: at most "
                                 f"{MAX_LINKS_PER_SENTENCE:,} per sentence are read")
        total += len(tokens)
        if total > MAX_LINKS:
            raise AlignmentError(f"the alignment file has more than {MAX_LINKS:,} links (line "
                                 f"{number}): at most {MAX_LINKS:,} are read")
        sure, possible = set(), set()
        for token in tokens:
            match = _LINK.fullmatch(token)
            if match is None:
                raise AlignmentError(f"line {number}: {_shown(token)} is not a link: a link is "
                                     f"two word indices, such as 0-2 (sure) or 0?2 (possible)")
            j, mark, i = match.groups()
            for index in (j, i):
                if len(index) > len(str(MAX_WORD_INDEX)) or int(index) > MAX_WORD_INDEX:
                    raise AlignmentError(f"line {number}: word index {_shown(index)} in "
                                         f"{_shown(token)} is larger than any sentence a model "
                                         f"reads (indices up to {MAX_WORD_INDEX})")
            (sure if mark == "-" else possible).add((int(j), int(i)))
        out.append(GoldAlignment(frozenset(sure), frozenset(possible)))
    return out


def aligned_pairs(alignments: str | bytes | Sequence[GoldAlignment],
                  pairs: Sequence[tuple[str, str]]) -> list[AlignedPair]:
    """Gold alignments (Pharaoh text, see parse_pharaoh, or parsed) paired with their sentence
    pairs (source, target), line k with pair k, e.g. the pairs of a TSV corpus read with
    transformer.training.data.read_parallel_tsv(strict=True) (which skips blank lines: refuse a
    corpus with num_blank > 0, or the lines would shift) or list(zip(sources, targets)).

    Refused (AlignmentError): a different number of sentences and pairs, more than
    MAX_ALIGNMENT_SENTENCES pairs, a link to a word the sentence does not have (indices count
    the whitespace-separated words of each side)."""
    if len(pairs) > MAX_ALIGNMENT_SENTENCES:
        raise AlignmentError(f"there are {len(pairs):,} sentence pairs: at most "
                             f"{MAX_ALIGNMENT_SENTENCES:,} are read")
    if isinstance(alignments, (str, bytes, bytearray, memoryview)):
        alignments = parse_pharaoh(alignments)
    if len(alignments) != len(pairs):
        raise AlignmentError(f"the alignments have {len(alignments):,} sentences but there are "
                             f"{len(pairs):,} sentence pairs: each line of the alignments goes "
                             f"with the sentence pair of the same line")
    out = []
    for number, (gold, pair) in enumerate(zip(alignments, pairs), start=1):
        source, target = (str(side) for side in pair)
        aligned = AlignedPair(gold.sure, gold.possible, source=source, target=target)
        sides = (("source", 0, aligned.source_words, source),
                 ("target", 1, aligned.target_words, target))
        for side, position, words, text in sides:
            largest = max((link[position] for link in aligned.possible), default=-1)
            if largest >= len(words):
                j, i = max(aligned.possible, key=lambda link: link[position])
                mark = "-" if (j, i) in aligned.sure else "?"
                raise AlignmentError(f"sentence {number}: link {j}{mark}{i} names {side} word "
                                     f"{largest}, but the {side} {_shown(text)} has "
                                     f"{len(words)} words (counted from 0)")
        out.append(aligned)
    return out


# ---------------------------------------------------------------------------- what heads predict

def _merge_flags(merge_words: bool | tuple[bool, bool]) -> tuple[bool, bool]:
    return (merge_words, merge_words) if isinstance(merge_words, bool) else tuple(merge_words)


def word_alignment_maps(cross, target_tokens: Sequence[str], source_tokens: Sequence[str], *,
                        merge_words: bool | tuple[bool, bool] = True, target_tokenizer=None,
                        source_tokenizer=None, special: Sequence[str] = SPECIAL_TOKENS
                        ) -> tuple[np.ndarray, list[str], list[str]]:
    """Cross-attention (..., T, N) over pieces -> (..., T_w, N_w) over the words alignments
    index, with the words: special tokens hidden (rows renormalised) and pieces merged into
    words as the app merges them (flow.simplify_tokens: a target word's row is the mean of its
    pieces' rows, a source word's column the sum of its pieces' columns).

    merge_words: both sides, or (target side, source side). A side not merged keeps each piece
    as a word, less the bare word marks ("▁" or "Ġ" alone, which write no character): e.g. the
    dates model's target "▁ 2 0 2 1 - 0 3 - 0 5", whose words are the ISO date's characters."""
    weights, target_words, source_words = simplify_tokens(
        cross, target_tokens, source_tokens, hide_special=True, merge_words=merge_words,
        special=special, query_tokenizer=target_tokenizer, key_tokenizer=source_tokenizer)
    merge_target, merge_source = _merge_flags(merge_words)
    keep_rows = [merge_target or word not in BARE_MARKS for word in target_words]
    keep_cols = [merge_source or word not in BARE_MARKS for word in source_words]
    if not all(keep_rows) or not all(keep_cols):
        weights = drop_tokens(weights, np.array(keep_rows, bool), np.array(keep_cols, bool))
        target_words = [w for w, keep in zip(target_words, keep_rows) if keep]
        source_words = [w for w, keep in zip(source_words, keep_cols) if keep]
    return weights, target_words, source_words


def _argmax_links(word_maps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(..., T_w, N_w) -> (each target word's argmax source word (..., T_w), whether the row
    has any weight to link with (..., T_w))."""
    if word_maps.shape[-1] == 0:
        shape = word_maps.shape[:-1]
        return np.zeros(shape, int), np.zeros(shape, bool)
    return word_maps.argmax(axis=-1), word_maps.max(axis=-1) > 0


def argmax_alignment(word_map) -> frozenset[Link]:
    """(T_w, N_w) word-level attention -> {(j, i)}: each target word i linked to the source word
    j it attends to most (the first on a tie); a row with no weight gives no link."""
    word_map = np.asarray(word_map, dtype=float)
    if word_map.ndim != 2:
        raise ValueError(f"word_map must be (target words, source words), got shape "
                         f"{word_map.shape}")
    best, linked = _argmax_links(word_map)
    return frozenset((int(j), i) for i, (j, ok) in enumerate(zip(best, linked)) if ok)


def _row_tokens(maps: Mapping, rows: str) -> list[str]:
    if rows not in ROWS:
        raise ValueError(f"rows must be one of {ROWS}, got {rows!r}")
    key = f"{rows}_tokens"
    if key not in maps:
        raise ValueError(f"the maps have no {key!r} (rows={rows!r} needs them)")
    return [str(t) for t in maps[key]]


def head_alignment(maps: Mapping, layer: int, head: int, *, rows: str = "output",
                   merge_words: bool | tuple[bool, bool] = True, target_tokenizer=None,
                   source_tokenizer=None) -> frozenset[Link]:
    """The word alignment one cross-attention head predicts for one sentence: maps["cross"]
    [layer, head] (T, N) through word_alignment_maps, then argmax_alignment. rows: which
    tokens the rows stand for (ROWS, see the module docstring)."""
    cross = np.asarray(maps["cross"], dtype=float)  # (layers, heads, T, N)
    word_map, _, _ = word_alignment_maps(
        cross[layer, head], _row_tokens(maps, rows), maps["source_tokens"],
        merge_words=merge_words, target_tokenizer=target_tokenizer,
        source_tokenizer=source_tokenizer)
    return argmax_alignment(word_map)


# ---------------------------------------------------------------------------- every head ranked

@dataclass(frozen=True)
class HeadAlignment:
    """One head's alignment scores over a set of sentences (counts summed, see the module
    docstring)."""

    layer: int
    head: int
    aer: float
    precision: float
    recall: float


def _gold_matrix(links: frozenset[Link], n_target: int, n_source: int) -> np.ndarray:
    matrix = np.zeros((n_target, n_source), bool)  # (target words, source words)
    for j, i in links:
        matrix[i, j] = True
    return matrix


def _sentence_counts(maps: Mapping, gold, number: int, rows: str, merge_words,
                     target_tokenizer, source_tokenizer) -> np.ndarray:
    """(4, L, H): |A|, |S|, |A & S|, |A & P| of every cross-attention head on one sentence."""
    cross = np.asarray(maps["cross"], dtype=float)
    if cross.ndim != 4:
        raise ValueError(f"maps['cross'] must be (layers, heads, queries, keys), got shape "
                         f"{cross.shape}")
    word_maps, target_words, source_words = word_alignment_maps(
        cross, _row_tokens(maps, rows), maps["source_tokens"], merge_words=merge_words,
        target_tokenizer=target_tokenizer, source_tokenizer=source_tokenizer)
    n_target, n_source = len(target_words), len(source_words)  # word_maps (L, H, T_w, N_w)
    for side, words, position in (("source", source_words, 0), ("target", target_words, 1)):
        expected = getattr(gold, f"{side}_words", None)
        largest = max((link[position] for link in gold.possible), default=-1)
        if (expected is not None and len(expected) != len(words)) or largest >= len(words):
            needed = len(expected) if expected is not None else f"at least {largest + 1}"
            raise AlignmentError(
                f"sentence {number}: the gold alignment has {needed} {side} words but the "
                f"model's {side} pieces make {len(words)} ({_quoted_words(words)}): the "
                f"alignment's words and the model's word merging differ")
    sure = _gold_matrix(gold.sure, n_target, n_source)  # (T_w, N_w)
    possible = _gold_matrix(gold.possible, n_target, n_source)
    best, linked = _argmax_links(word_maps)  # (L, H, T_w) each
    rows_index = np.arange(n_target)
    predicted_sure = sure[rows_index, best] & linked if n_source else np.zeros_like(linked)
    predicted_possible = possible[rows_index, best] & linked if n_source else predicted_sure
    return np.stack([linked.sum(-1), np.full(linked.shape[:2], len(gold.sure)),
                     predicted_sure.sum(-1), predicted_possible.sum(-1)])


def _quoted_words(words: Sequence[str], most: int = 20) -> str:
    """Words as quoted in an error: the first `most`, space-separated."""
    words = [str(w) for w in words]
    return " ".join(words[:most] + (["..."] if len(words) > most else []))


def alignment_statistics(list_of_maps: Sequence[Mapping], golds: Sequence, *,
                         rows: str = "output", merge_words: bool | tuple[bool, bool] = True,
                         target_tokenizer=None, source_tokenizer=None
                         ) -> dict[str, np.ndarray]:
    """Every cross-attention head's alignment scores over a set of sentences: "aer",
    "precision" and "recall", each (L, H), from the counts summed over the sentences (also
    returned: "predicted", "sure", "predicted_sure", "predicted_possible", (L, H) ints).

    list_of_maps: one OpenedModel.attention dict per sentence (the gold target teacher-forced,
    so that the target words are the gold's); golds: one per sentence, anything with `sure` and
    `possible` link sets (GoldAlignment, AlignedPair, the dates task's DateAlignment). Where a
    gold has source_words / target_words, their counts must equal the model's word counts (else
    the indices would point at other words); in any case every gold index must fit them
    (AlignmentError naming the sentence)."""
    if len(list_of_maps) != len(golds):
        raise ValueError(f"{len(list_of_maps)} maps but {len(golds)} gold alignments")
    if not list_of_maps:
        raise ValueError("no sentences to score")
    counts = None
    for number, (maps, gold) in enumerate(zip(list_of_maps, golds), start=1):
        one = _sentence_counts(maps, gold, number, rows, merge_words, target_tokenizer,
                               source_tokenizer)
        if counts is not None and one.shape != counts.shape:
            raise ValueError(f"sentence {number} has {one.shape[1:]} (layers, heads) but the "
                             f"first has {counts.shape[1:]}")
        counts = one if counts is None else counts + one
    predicted, sure, predicted_sure, predicted_possible = counts  # (L, H) each
    total = predicted + sure
    return {
        "aer": np.where(total > 0, 1.0 - (predicted_sure + predicted_possible)
                        / np.maximum(total, 1), 0.0),
        "precision": np.where(predicted > 0, predicted_possible / np.maximum(predicted, 1), 1.0),
        "recall": np.where(sure > 0, predicted_sure / np.maximum(sure, 1), 1.0),
        "predicted": predicted, "sure": sure, "predicted_sure": predicted_sure,
        "predicted_possible": predicted_possible,
    }


def rank_heads(list_of_maps: Sequence[Mapping], golds: Sequence, **options
               ) -> list[HeadAlignment]:
    """Every (layer, head) of the cross-attention, best aligner first: by AER, then recall
    (higher first), then layer and head. options: those of alignment_statistics."""
    stats = alignment_statistics(list_of_maps, golds, **options)
    n_layers, n_heads = stats["aer"].shape
    heads = [HeadAlignment(layer, head, float(stats["aer"][layer, head]),
                           float(stats["precision"][layer, head]),
                           float(stats["recall"][layer, head]))
             for layer in range(n_layers) for head in range(n_heads)]
    return sorted(heads, key=lambda h: (h.aer, -h.recall, h.layer, h.head))
