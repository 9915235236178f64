"""Attention masks as TensorFlow tensors. Convention everywhere: 1/True = may attend, 0/False =
blocked (padding ids into a batch, and the score blocked keys get: transformer.core.masking)."""

from __future__ import annotations

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
