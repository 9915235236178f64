"""Padding and blocking without TensorFlow: ids padded into a batch, and the score a blocked key
gets before the softmax (the model adds it; the figures that redo the arithmetic in NumPy use the
same constant)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Added to blocked scores before the softmax; finite so a row with every key blocked gives no NaN.
BLOCKED_SCORE = -1e9


def pad_ids(sequences: Sequence[Sequence[int]], pad_id: int, length: int | None = None
            ) -> np.ndarray:
    """(B, length) int32, each sequence padded on the right with pad_id (length: the longest
    by default). ValueError for no sequences, an empty one, or one longer than length."""
    sequences = [np.asarray(s, np.int32).reshape(-1) for s in sequences]
    if not sequences or min(len(s) for s in sequences) == 0:
        raise ValueError("every sequence must hold at least one id")
    longest = max(len(s) for s in sequences)
    length = longest if length is None else int(length)
    if longest > length:
        raise ValueError(f"a sequence of {longest} ids does not fit in {length}")
    out = np.full((len(sequences), length), pad_id, np.int32)
    for i, ids in enumerate(sequences):
        out[i, :len(ids)] = ids
    return out
