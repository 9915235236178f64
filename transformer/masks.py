"""Attention masks, and the padding they find. Convention everywhere: 1/True = may attend,
0/False = blocked."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf


def padding_mask(ids, pad_id: int = 0) -> tf.Tensor:
    """(B, N) ids -> (B, 1, 1, N) float mask: 1 where the key is a real token."""
    ids = tf.convert_to_tensor(ids)
    mask = tf.cast(tf.not_equal(ids, tf.cast(pad_id, ids.dtype)), tf.float32)
    return mask[:, tf.newaxis, tf.newaxis, :]  # (B, 1, 1, N)


def look_ahead_mask(size) -> tf.Tensor:
    """(size, size) lower triangle including the diagonal: query t sees keys 0..t."""
    return tf.linalg.band_part(tf.ones((size, size), tf.float32), -1, 0)


def decoder_mask(tgt_ids, pad_id: int = 0) -> tf.Tensor:
    """(B, T) ids -> (B, 1, T, T): padding AND look-ahead."""
    tgt_ids = tf.convert_to_tensor(tgt_ids)
    size = tf.shape(tgt_ids)[1]
    return padding_mask(tgt_ids, pad_id) * look_ahead_mask(size)[tf.newaxis, tf.newaxis]


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
