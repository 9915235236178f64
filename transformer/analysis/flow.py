"""Aggregations of attention maps: over heads, through layers (rollout), from source to target,
without special tokens, and over the subword pieces of a word.

NumPy only (no TensorFlow, Streamlit or Plotly), so notebooks and the app share it. Every
function takes the arrays OpenedModel.attention returns: "encoder" (L_enc, H, N, N), "decoder"
(L_dec, H, T, T), "cross" (L_dec, H, T, N); rows are queries, columns keys, rows sum to 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from transformer.core.text import WORD_START

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<unk>")
HEAD_REDUCTIONS = ("mean", "max")

__all__ = ["HEAD_REDUCTIONS", "SPECIAL_TOKENS", "attention_rollout", "drop_tokens", "head_max",
           "has_word_boundaries", "head_mean", "merge_subwords", "normalise_rows",
           "simplify_tokens", "source_to_target_flow", "word_groups", "word_starts"]


def _check_4d(weights, name="weights") -> np.ndarray:
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 4:
        raise ValueError(f"{name} must be (layers, heads, queries, keys), got shape "
                         f"{weights.shape}")
    return weights


def head_mean(weights) -> np.ndarray:
    """(L, H, q, k) -> (L, q, k): the average head of each layer (rows still sum to 1)."""
    return _check_4d(weights).mean(axis=1)


def head_max(weights) -> np.ndarray:
    """(L, H, q, k) -> (L, q, k): per cell, the strongest head of each layer (rows need not
    sum to 1: a key any one head attends to stands out)."""
    return _check_4d(weights).max(axis=1)


def _reduce_heads(weights, head_reduce: str) -> np.ndarray:
    if head_reduce == "mean":
        return head_mean(weights)
    if head_reduce == "max":
        return head_max(weights)
    raise ValueError(f"head_reduce must be one of {HEAD_REDUCTIONS}, got {head_reduce!r}")


def normalise_rows(matrix) -> np.ndarray:
    """Each row (last axis) divided by its sum; a row summing to 0 stays 0 (never NaN)."""
    matrix = np.asarray(matrix, dtype=float)
    total = matrix.sum(axis=-1, keepdims=True)
    return np.divide(matrix, total, out=np.zeros_like(matrix), where=total > 0)


def attention_rollout(weights, *, residual: bool = True, head_reduce: str = "mean") -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers").

    weights (L, H, n, n) of one self-attention stack. Per layer the heads are reduced
    (A = mean, or max, over heads); with residual=True the skip connection is counted as half
    of the mixing, A' = 0.5 A + 0.5 I; rows are then renormalised. The rollout multiplies the
    layers, later layers on the left: R_l = A'_l @ ... @ A'_0. Returns (L, n, n): R_l after each
    layer; the last is the full rollout, row i = how much token i's final representation draws
    on each input token. Products of lower-triangular maps stay lower-triangular, so the
    decoder's causal structure is kept.
    """
    weights = _check_4d(weights)
    if weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"rollout needs self-attention (square maps), got {weights.shape[-2]} "
                         f"queries and {weights.shape[-1]} keys")
    maps = _reduce_heads(weights, head_reduce)  # (L, n, n)
    if residual:
        maps = 0.5 * maps + 0.5 * np.eye(maps.shape[-1])
    maps = normalise_rows(maps)
    rollouts = np.empty_like(maps)
    current = np.eye(maps.shape[-1])
    for layer, mixing in enumerate(maps):
        current = mixing @ current
        rollouts[layer] = current
    return rollouts


def source_to_target_flow(encoder_weights, cross_weights, *, layer: int = -1,
                          residual: bool = True, head_reduce: str = "mean",
                          decoder_rollout=None) -> np.ndarray:
    """(T, N): how much each target position draws, through the encoder, on each source token.

    flow = C @ R_enc, where R_enc (N, N) is the full encoder rollout (attention_rollout of
    encoder_weights (L_enc, H, N, N)) and C (T, N) is the cross-attention of decoder layer
    `layer` of cross_weights (L_dec, H, T, N), reduced over heads and row-normalised. Both are
    row-stochastic, so every row of the flow sums to 1.

    An approximation: it follows one cross-attention layer only and ignores how the decoder's
    own self-attention mixes target positions. Pass decoder_rollout (T, T), e.g. a rollout of
    the decoder's self-attention, to include it: flow = R_dec @ C @ R_enc.
    """
    encoder_weights = _check_4d(encoder_weights, "encoder_weights")
    cross_weights = _check_4d(cross_weights, "cross_weights")
    n_source, n_layers = encoder_weights.shape[-1], cross_weights.shape[0]
    if cross_weights.shape[-1] != n_source:
        raise ValueError(f"cross_weights have {cross_weights.shape[-1]} source keys but the "
                         f"encoder has {n_source} tokens")
    if not -n_layers <= layer < n_layers:
        raise ValueError(f"layer {layer} is out of range for {n_layers} decoder layers")
    encoder_rollout = attention_rollout(encoder_weights, residual=residual,
                                        head_reduce=head_reduce)[-1]  # (N, N)
    cross = normalise_rows(_reduce_heads(cross_weights[layer][None], head_reduce)[0])  # (T, N)
    flow = cross @ encoder_rollout
    if decoder_rollout is not None:
        decoder_rollout = np.asarray(decoder_rollout, dtype=float)
        n_target = cross.shape[0]
        if decoder_rollout.shape != (n_target, n_target):
            raise ValueError(f"decoder_rollout has shape {decoder_rollout.shape} but the cross-"
                             f"attention has {n_target} target positions: expected "
                             f"{(n_target, n_target)}")
        flow = decoder_rollout @ flow
    return flow


def _indices(keep, size: int, name: str) -> np.ndarray:
    """Positions to keep, from a boolean mask of `size` entries or a sequence of indices."""
    keep = np.asarray(keep)
    if keep.dtype == bool:
        if keep.shape != (size,):
            raise ValueError(f"{name} is a mask of shape {keep.shape} but there are {size} "
                             f"positions")
        return np.flatnonzero(keep)
    if keep.size == 0:
        return np.zeros(0, dtype=int)
    if keep.ndim != 1 or not np.issubdtype(keep.dtype, np.integer):
        raise ValueError(f"{name} must be a boolean mask or a list of integer indices, got "
                         f"{keep.dtype} of shape {keep.shape}")
    bad = keep[(keep < -size) | (keep >= size)]
    if bad.size:
        raise ValueError(f"{name} holds index {int(bad[0])} but there are {size} positions")
    return keep


def drop_tokens(weights, query_keep, key_keep, renormalise: bool = True) -> np.ndarray:
    """weights (..., q, k) without some query rows and key columns (e.g. <s>, </s>, <pad>).

    query_keep / key_keep: boolean masks (True = keep) or lists of indices to keep. With
    renormalise, each remaining row is divided by its remaining mass so it sums to 1 again; a
    row whose kept mass is 0 stays 0 (no NaN)."""
    weights = np.asarray(weights, dtype=float)
    if weights.ndim < 2:
        raise ValueError(f"weights must be at least (queries, keys), got shape {weights.shape}")
    rows = _indices(query_keep, weights.shape[-2], "query_keep")
    cols = _indices(key_keep, weights.shape[-1], "key_keep")
    kept = weights[..., rows, :][..., cols]
    return normalise_rows(kept) if renormalise else kept


def _check_groups(groups, size: int, name: str) -> list[list[int]]:
    groups = [[int(i) for i in group] for group in groups]
    flat = sorted(i for group in groups for i in group)
    if any(not group for group in groups):
        raise ValueError(f"{name} holds an empty group")
    if flat != list(range(size)):
        missing = sorted(set(range(size)) - set(flat))
        repeated = sorted({i for i in flat if flat.count(i) > 1})
        extra = sorted(set(flat) - set(range(size)))
        raise ValueError(f"{name} must hold every index of 0..{size - 1} exactly once "
                         f"({size} positions); missing {missing}, repeated {repeated}, "
                         f"out of range {extra}")
    return groups


def merge_subwords(weights, query_groups, key_groups) -> np.ndarray:
    """weights (..., q, k) -> (..., len(query_groups), len(key_groups)), pieces merged into words:
    a word as key receives the SUM of its pieces' weights (attention paid to any of its pieces),
    a word as query gets the AVERAGE of its pieces' rows, so rows still sum to 1.

    groups: lists of indices, together holding every position exactly once (see word_groups)."""
    weights = np.asarray(weights, dtype=float)
    if weights.ndim < 2:
        raise ValueError(f"weights must be at least (queries, keys), got shape {weights.shape}")
    query_groups = _check_groups(query_groups, weights.shape[-2], "query_groups")
    key_groups = _check_groups(key_groups, weights.shape[-1], "key_groups")
    summed = np.stack([weights[..., g].sum(axis=-1) for g in key_groups], axis=-1) if key_groups \
        else np.zeros(weights.shape[:-1] + (0,))
    if not query_groups:
        return np.zeros(weights.shape[:-2] + (0, len(key_groups)))
    return np.stack([summed[..., g, :].mean(axis=-2) for g in query_groups], axis=-2)


def _convention(tokenizer) -> tuple[str | None, str | None]:
    """How the tokenizer's pieces mark words (Tokenizer.word_mark: its kind's, or for a Hugging
    Face family its record's: BART's byte-level BPE marks a space before a piece with "Ġ")."""
    mark = getattr(tokenizer, "word_mark", None)
    if not (isinstance(mark, tuple) and len(mark) == 2):
        raise ValueError(f"no word convention for tokenizer kind "
                         f"{getattr(tokenizer, 'kind', None)!r}: a tokenizer says how its pieces "
                         "mark words in its word_mark")
    return mark


def word_starts(tokenizer, pieces: Sequence[str], special: Sequence[str] = SPECIAL_TOKENS
                ) -> list[bool]:
    """Which pieces start a word, by the tokenizer's word_mark (Tokenizer.word_mark):
    SentencePiece kinds start a word with "▁"; WordPiece continues one with "##"; a word-level
    vocabulary makes every piece a word. Special tokens always start a word of their own."""
    mark, meaning = _convention(tokenizer)
    special = set(special)
    out = []
    for piece in map(str, pieces):
        if piece in special or meaning is None:
            out.append(True)
        elif meaning == "start":
            out.append(piece.startswith(mark))
        else:
            out.append(not piece.startswith(mark))
    return out


def word_groups(pieces: Sequence[str], special: Sequence[str] = SPECIAL_TOKENS, *,
                tokenizer=None) -> tuple[list[list[int]], list[str]]:
    """Group pieces into words: (groups of indices, the words' text without the word marks).

    Word starts come from word_starts(tokenizer, pieces); tokenizer None means SentencePiece's
    convention (a piece starting with ▁ starts a word). Other pieces continue the current
    word; special tokens are words of their own (a piece after one starts a new word); a piece
    that is a bare word mark (▁) joins the next piece. A bare ▁ with nothing to join (last, or
    before a special token) stays alone, shown as ▁."""
    mark, meaning = _convention(tokenizer) if tokenizer is not None else (WORD_START, "start")
    pieces = [str(p) for p in pieces]
    starts = word_starts(tokenizer, pieces, special) if tokenizer is not None else [
        p in set(special) or p.startswith(WORD_START) for p in pieces]
    special = set(special)

    def text(piece):
        return piece.removeprefix(mark) if mark and piece not in special else piece

    groups: list[list[int]] = []
    words: list[str] = []
    open_word = False  # may the next plain piece continue the last group?
    for i, piece in enumerate(pieces):
        if piece in special:
            groups.append([i])
            words.append(piece)
            open_word = False
        elif starts[i] or not open_word:
            bare_before = (open_word and meaning == "start" and words[-1] == ""
                           and groups[-1] == [i - 1])
            if bare_before:  # the bare mark before this piece starts this word
                groups[-1].append(i)
                words[-1] = text(piece)
            else:
                groups.append([i])
                words.append(text(piece))
            open_word = True
        else:
            groups[-1].append(i)
            words[-1] += text(piece)
    return groups, [word or (mark or "") for word in words]  # "": bare mark pieces only


def has_word_boundaries(tokenizer, pieces: Sequence[str],
                        special: Sequence[str] = SPECIAL_TOKENS) -> bool:
    """Whether merging these pieces into words leaves more than one word besides the special
    tokens. A side without (the dates model's target "2021-03-05": one "▁" for the whole
    output) would merge into one cell, so it is better kept as pieces."""
    special_set = set(special)
    plain = [p for p in map(str, pieces) if p not in special_set]
    return len(word_groups(plain, special, tokenizer=tokenizer)[0]) > 1


def simplify_tokens(weights, query_tokens: Sequence[str], key_tokens: Sequence[str], *,
                    hide_special: bool = False, merge_words: bool | tuple[bool, bool] = False,
                    renormalise: bool = True, special: Sequence[str] = SPECIAL_TOKENS,
                    query_tokenizer=None, key_tokenizer=None
                    ) -> tuple[np.ndarray, list[str], list[str]]:
    """What the explorer shows: weights (..., q, k) without special tokens (drop_tokens, rows
    renormalised if asked) and/or with pieces merged into words (merge_subwords, word_groups
    with each side's tokenizer; None: SentencePiece's ▁). merge_words: both sides, or
    (query side, key side). Returns (weights, query labels, key labels); labels are words
    where merged, else pieces."""
    weights = np.asarray(weights, dtype=float)
    query_tokens, key_tokens = [str(t) for t in query_tokens], [str(t) for t in key_tokens]
    if weights.ndim < 2 or weights.shape[-2:] != (len(query_tokens), len(key_tokens)):
        raise ValueError(f"weights have shape {weights.shape} but there are {len(query_tokens)} "
                         f"query and {len(key_tokens)} key tokens")
    if hide_special:
        special_set = set(special)
        query_keep = [t not in special_set for t in query_tokens]
        key_keep = [t not in special_set for t in key_tokens]
        weights = drop_tokens(weights, np.array(query_keep, bool), np.array(key_keep, bool),
                              renormalise=renormalise)
        query_tokens = [t for t, k in zip(query_tokens, query_keep) if k]
        key_tokens = [t for t, k in zip(key_tokens, key_keep) if k]
    merge_query, merge_key = (merge_words, merge_words) if isinstance(merge_words, bool) \
        else merge_words
    if merge_query or merge_key:
        query_groups, key_groups = [[i] for i in range(len(query_tokens))], [
            [j] for j in range(len(key_tokens))]
        if merge_query:
            query_groups, query_tokens = word_groups(query_tokens, special,
                                                     tokenizer=query_tokenizer)
        if merge_key:
            key_groups, key_tokens = word_groups(key_tokens, special, tokenizer=key_tokenizer)
        weights = merge_subwords(weights, query_groups, key_groups)
    return weights, query_tokens, key_tokens
