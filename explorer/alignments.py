"""Gold word alignments for the Head statistics page, and every cross-attention head scored
against them (AER, precision, recall: transformer.analysis.alignment), cached.

Two golds: the dates task's own (a model trained on it, metadata "task" = "dates": its
held-out dates, each with the alignment the generator recorded), and one a user uploads for any
model (Pharaoh text plus the sentence pairs as TSV). Either way each sentence pair is run with
its gold target teacher-forced (one padded pass per batch), each head's cross-attention read as
words the way the app merges pieces (argmax per target word), and the counts summed over the
sentences.

Words: whitespace words on both sides, the app's word merging (flow.simplify_tokens) giving them
from the pieces; for a dates model the target words are the ISO date's characters instead (its
target tokenizer writes one piece per character, the convention of
transformer.training.data.date_alignment), so an upload's target indices count characters there.
A sentence whose merged pieces do not make its gold words (the tokenizer cut it, or its merging
differs) is left out and named, never scored against the wrong words.

As in results.py, each public helper derives the cache key (the checkpoint's content hash and
the inputs) and the inner st.cache_data function receives the checkpoint unhashed. Every refusal
(AlignmentError, CorpusError, NumericalError) reaches the page as an error message, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from transformer import OpenedModel
from transformer.analysis.alignment import (
    MAX_ALIGNMENT_BYTES,
    AlignedPair,
    AlignmentError,
    HeadAlignment,
    aligned_pairs,
    alignment_statistics,
    rank_heads,
    word_alignment_maps,
)
from transformer.core import limits
from transformer.inference.maps import attention_maps
from transformer.inference.numerics import NumericalError
from transformer.training.data import CorpusError, held_out_date_alignments, read_parallel_tsv

BUILT_IN_PER_FORMAT = 4  # held-out dates per input format: 36 x 4 = 144, ~0.3 s on 2 cores
MAX_PAIRS = 512  # uploaded sentence pairs scored (each a forward pass, batched)
MAX_BATCH = 64  # sentences per padded pass
DATES_WORDS = (False, True)  # (target, source) merged: the dates model's ISO characters, words


@dataclass(frozen=True)
class Scores:
    """Every cross-attention head's scores against one gold set."""

    stats: dict  # alignment_statistics: "aer", "precision", "recall", counts; each (L, H)
    ranked: list[HeadAlignment]  # rank_heads: best aligner first
    scored: int  # sentences scored
    left_out: list[str]  # one sentence per pair left out (its words differ from the gold's)


def is_dates_model(ckpt: OpenedModel) -> bool:
    """Whether the model was trained on the dates task (its checkpoint's metadata says so):
    it has a built-in gold, and its target words are characters."""
    return ckpt.metadata.get("task") == "dates"


def merge_words(ckpt: OpenedModel) -> bool | tuple[bool, bool]:
    """How pieces become the words alignments index: (target, source) as word_alignment_maps
    takes it."""
    return DATES_WORDS if is_dates_model(ckpt) else True


def _seed(ckpt: OpenedModel) -> int:
    seed = ckpt.metadata.get("seed", 0)
    return seed if isinstance(seed, int) else 0


def built_in_description(ckpt: OpenedModel) -> str:
    """What the dates task's gold is, in a sentence (for the page)."""
    n = len(held_out_date_alignments(BUILT_IN_PER_FORMAT, seed=_seed(ckpt)))
    return (f"{n} held-out dates of the dates task ({BUILT_IN_PER_FORMAT} per input format, "
            f"drawn with the training seed), each with the alignment its generator recorded: "
            f"the words writing the year, month and day are sure links to those digits of the "
            f"ISO date (its 10 characters are the target words), the hyphens and \"the\" / "
            f"\"of\" possible links, the weekday none")


# ------------------------------------------------------------------ scoring
def _maps(ckpt: OpenedModel, pairs: list[tuple[str, str]]) -> list[dict]:
    """OpenedModel.attention of every (source, target) pair with the target teacher-forced, in
    padded passes of at most MAX_BATCH sentences whose maps fit the model's maps budget."""
    source_ids = [ckpt.encode_source(source) for source, _ in pairs]
    output_ids = [ckpt.encode_target(target) for _, target in pairs]
    longest = max(max(map(len, source_ids)), max(map(len, output_ids)) + 1)
    one = limits.maps_copies() * limits.maps_bytes(ckpt.config, longest)
    size = max(1, min(MAX_BATCH, int(ckpt.budgets.maps_bytes // one)))
    maps: list[dict] = []
    for start in range(0, len(pairs), size):
        maps.extend(attention_maps(ckpt, source_ids[start:start + size],
                                   output_ids[start:start + size]))
    return maps


def _words_differ(ckpt: OpenedModel, maps: dict, gold, number: int) -> str | None:
    """A sentence saying how the model's words of one sentence differ from its gold's, or None
    when their counts agree on both sides."""
    _, target_words, source_words = word_alignment_maps(
        maps["cross"][:1, :1], maps["output_tokens"], maps["source_tokens"],
        merge_words=merge_words(ckpt), target_tokenizer=ckpt.target_tokenizer,
        source_tokenizer=ckpt.source_tokenizer)
    for side, model_words, gold_words in (("source", source_words, gold.source_words),
                                          ("target", target_words, gold.target_words)):
        if len(model_words) != len(gold_words):
            shown = " ".join(str(w) for w in model_words[:20])
            return (f"sentence {number}: the model's word merging makes {len(model_words)} "
                    f"{side} words ({shown}) where the alignment counts {len(gold_words)} "
                    f"({' '.join(gold_words[:20])})")
    return None


def _score(ckpt: OpenedModel, pairs: list[tuple[str, str]], golds: list) -> Scores:
    maps = _maps(ckpt, pairs)
    kept_maps, kept_golds, left_out = [], [], []
    for number, (one, gold) in enumerate(zip(maps, golds), start=1):
        differ = _words_differ(ckpt, one, gold, number)
        if differ is None:
            kept_maps.append(one)
            kept_golds.append(gold)
        else:
            left_out.append(differ)
    if not kept_maps:
        raise AlignmentError(f"no sentence can be scored: in every one the model's word "
                             f"merging does not give the alignment's words ({left_out[0]})")
    options = {"merge_words": merge_words(ckpt), "source_tokenizer": ckpt.source_tokenizer,
               "target_tokenizer": ckpt.target_tokenizer}
    return Scores(alignment_statistics(kept_maps, kept_golds, **options),
                  rank_heads(kept_maps, kept_golds, **options), len(kept_maps), left_out)


def built_in_golds(ckpt: OpenedModel) -> list:
    """The dates task's gold (DateAlignment each): the held-out dates of the training seed."""
    return held_out_date_alignments(BUILT_IN_PER_FORMAT, seed=_seed(ckpt))


def built_in(ckpt: OpenedModel) -> Scores:
    """Every head scored on the dates task's gold (built_in_golds); AlignmentError when the
    model's words are not the task's, NumericalError when it computes NaN."""
    return _built_in(ckpt.content_hash, _seed(ckpt), ckpt)


@st.cache_data(max_entries=16, show_spinner="Scoring every head's alignment of the dates…")
def _built_in(content_hash: str, seed: int, _ckpt: OpenedModel) -> Scores:
    golds = built_in_golds(_ckpt)
    return _score(_ckpt, [(g.source, g.target) for g in golds], golds)


def _text(data: str | bytes, what: str) -> bytes:
    """An upload or a text box's contents as bytes, at most MAX_ALIGNMENT_BYTES."""
    data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(data) > MAX_ALIGNMENT_BYTES:
        raise AlignmentError(f"the {what} are {len(data):,} bytes: at most "
                             f"{MAX_ALIGNMENT_BYTES:,} are read")
    return data


def uploaded_golds(ckpt: OpenedModel, pharaoh: str | bytes, pairs_tsv: str | bytes
                   ) -> tuple[list[tuple[str, str]], list[AlignedPair]]:
    """The sentence pairs (source<TAB>target per line) and their gold (Pharaoh text, line k
    with pair k), read as untrusted data: an AlignmentError for anything refused.
    For a dates model the gold's target words are the target's characters (spaces dropped)."""
    pairs_bytes = _text(pairs_tsv, "sentence pairs")
    try:
        corpus = read_parallel_tsv(pairs_bytes, name="the sentence pairs", strict=True)
    except CorpusError as err:
        raise AlignmentError(f"the sentence pairs cannot be read: {err}") from None
    if corpus.num_blank:
        raise AlignmentError(f"the sentence pairs have {corpus.num_blank} blank line(s): each "
                             f"line must be a pair, as each line of the alignments goes with "
                             f"the pair of the same line")
    if len(corpus.pairs) > MAX_PAIRS:
        raise AlignmentError(f"there are {len(corpus.pairs):,} sentence pairs: at most "
                             f"{MAX_PAIRS:,} are scored here (each is run through the model)")
    pairs = [(source, target) for source, target in corpus.pairs]
    worded = pairs
    if is_dates_model(ckpt):  # target words: the characters (see the module docstring)
        worded = [(source, " ".join(target.replace(" ", ""))) for source, target in pairs]
    return pairs, aligned_pairs(_text(pharaoh, "alignments"), worded)


def uploaded(ckpt: OpenedModel, pharaoh: str | bytes, pairs_tsv: str | bytes) -> Scores:
    """Every head scored on an uploaded gold (uploaded_golds); AlignmentError for anything
    refused."""
    return _uploaded(ckpt.content_hash, _text(pharaoh, "alignments"),
                     _text(pairs_tsv, "sentence pairs"), ckpt)


@st.cache_data(max_entries=16, show_spinner="Scoring every head's alignment of your sentences…")
def _uploaded(content_hash: str, pharaoh: bytes, pairs_tsv: bytes, _ckpt: OpenedModel) -> Scores:
    pairs, golds = uploaded_golds(_ckpt, pharaoh, pairs_tsv)
    return _score(_ckpt, pairs, golds)


def scores_or_error(function, *args) -> tuple[Scores | None, str | None]:
    """(function(*args), None), or (None, the sentence) when it refuses: the page shows the
    sentence (st.error) and keeps everything else."""
    try:
        return function(*args), None
    except (AlignmentError, NumericalError) as err:
        return None, str(err)
