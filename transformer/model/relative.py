"""T5's relative position bias (Raffel et al. 2020, section 2.1): a learned scalar per head for
each bucket of the distance key - query, added to the attention scores.

Each stack computes it once, in its first layer's terms, and every self-attention layer of the
stack adds the same bias (cross-attention has none). The encoder's buckets are bidirectional
(half for keys before the query, half after), the decoder's causal (only keys at or before the
query exist for it). Distances below a quarter (encoder) or half (decoder) of the buckets get a
bucket each; longer ones share logarithmically wider buckets up to max_distance, beyond which
all share the last.

The bucket of every distance the model can meet (|key - query| < max_len) is computed once, in
float32 arithmetic as transformers' T5Attention._relative_position_bucket computes it (its
truncation of log(distance / exact) / log(max_distance / exact) * (buckets - exact) decides
the edges), and looked up by distance.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

__all__ = ["RelativePositionBias", "relative_position_buckets"]


def relative_position_buckets(relative_position: np.ndarray, bidirectional: bool,
                              num_buckets: int, max_distance: int) -> np.ndarray:
    """The bucket (int64) of each key - query distance, as transformers' T5 computes it."""
    relative_position = np.asarray(relative_position, np.int64)
    buckets = np.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).astype(np.int64) * num_buckets
        relative_position = np.abs(relative_position)
    else:
        relative_position = -np.minimum(relative_position, 0)
    exact = num_buckets // 2
    with np.errstate(divide="ignore"):  # log(0) where the distance is exact anyway
        ratio = np.log(relative_position.astype(np.float32) / np.float32(exact))
        large = (ratio / np.float32(math.log(max_distance / exact))
                 * np.float32(num_buckets - exact))
    large = exact + np.where(relative_position < exact, 0, large).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return buckets + np.where(relative_position < exact, relative_position, large)


class RelativePositionBias(keras.layers.Layer):
    """(query positions, key positions) -> the bias (1, heads, q_len, k_len) for one stack."""

    def __init__(self, num_heads: int, num_buckets: int, max_distance: int, max_len: int,
                 bidirectional: bool, **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.num_buckets, self.max_len = num_heads, num_buckets, max_len
        self.embedding = keras.layers.Embedding(num_buckets, num_heads, name="relative_bias")
        distances = np.arange(-(max_len - 1), max_len)  # key - query, every one that occurs
        self.table = tf.constant(relative_position_buckets(
            distances, bidirectional, num_buckets, max_distance).astype(np.int32))

    def build(self, input_shape=None):
        self.embedding.build()

    def call(self, query_positions, key_positions):
        """query_positions (q_len,), key_positions (k_len,) int -> (1, heads, q_len, k_len)."""
        distance = key_positions[tf.newaxis, :] - query_positions[:, tf.newaxis]  # (q, k)
        buckets = tf.gather(self.table, distance + (self.max_len - 1))  # (q, k)
        values = tf.gather(self.embedding.embeddings, buckets)  # (q, k, heads)
        return tf.transpose(values, (2, 0, 1))[tf.newaxis]  # (1, heads, q, k)
