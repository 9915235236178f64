"""Scaled dot-product attention and multi-head attention that hand out their internals."""

from __future__ import annotations

import keras
import tensorflow as tf

# Added to blocked scores before the softmax; finite so a row with every key blocked gives no NaN.
_BLOCKED_SCORE = -1e9


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V.

    q: (..., q_len, d_k), k: (..., k_len, d_k), v: (..., k_len, d_v);
    mask broadcastable to (..., q_len, k_len), 1 = may attend, 0 = blocked.
    Returns (output (..., q_len, d_v), weights (..., q_len, k_len), scores (..., q_len, k_len)).
    Blocked keys get exactly 0 weight; a query whose keys are all blocked gets an all-zero row.
    """
    d_k = tf.cast(tf.shape(k)[-1], q.dtype)
    scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(d_k)  # (..., q_len, k_len)
    if mask is None:
        weights = tf.nn.softmax(scores, axis=-1)
    else:
        mask = tf.cast(mask, scores.dtype)
        weights = tf.nn.softmax(scores + (1.0 - mask) * _BLOCKED_SCORE, axis=-1)
        # The softmax leaves ~exp(-1e9) = 0 on blocked keys already, except on fully blocked rows
        # where it is uniform: multiplying by the mask makes both exactly 0.
        weights = weights * mask
    return tf.matmul(weights, v), weights, scores


class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention (paper, section 3.2.2) returning its weights, and on request Q, K, V.

    One projection matrix each for Q, K and V (d_model -> d_model), split into num_heads heads of
    d_k = d_model // num_heads by reshape/transpose, attended per head, merged back, then `output`.
    """

    def __init__(self, d_model: int, num_heads: int, **kwargs):
        super().__init__(**kwargs)
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.query = keras.layers.Dense(d_model, name="query")
        self.key = keras.layers.Dense(d_model, name="key")
        self.value = keras.layers.Dense(d_model, name="value")
        self.output_dense = keras.layers.Dense(d_model, name="output")


    def split_heads(self, x):
        """(B, T, d_model) -> (B, heads, T, d_k)."""
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(x, (batch, length, self.num_heads, self.d_k))
        return tf.transpose(x, (0, 2, 1, 3))

    def merge_heads(self, x):
        """(B, heads, T, d_k) -> (B, T, d_model)."""
        batch, length = tf.shape(x)[0], tf.shape(x)[2]
        x = tf.transpose(x, (0, 2, 1, 3))
        return tf.reshape(x, (batch, length, self.d_model))

    def project_key_value(self, value):
        """Per-head keys and values of a sequence: (B, S, d_model) -> two (B, heads, S, d_k).

        Decoding calls this once per source for cross-attention, and once per new token for
        self-attention, and keeps the results in its cache.
        """
        return self.split_heads(self.key(value)), self.split_heads(self.value(value))

    def attend(self, q, k, v, mask=None, head_mask=None):
        """Attention from per-head q (B, heads, Tq, d_k) over k, v (B, heads, Tk, d_k).

        head_mask: (heads,), 0 silences that head's output before the output projection.
        Returns (output (B, Tq, d_model), weights (B, heads, Tq, Tk), scores (B, heads, Tq, Tk)).
        """
        context, weights, scores = scaled_dot_product_attention(q, k, v, mask)
        if head_mask is not None:
            head_mask = tf.cast(head_mask, context.dtype)
            context = context * head_mask[tf.newaxis, :, tf.newaxis, tf.newaxis]
        return self.output_dense(self.merge_heads(context)), weights, scores

    def call(self, query, value, attention_mask=None, head_mask=None, return_qkv=False):
        """query (B, Tq, d_model) attends over value (B, Tk, d_model) (keys come from value too).

        attention_mask: broadcastable to (B, heads, Tq, Tk), 1 = may attend. (Not called `mask`:
        Keras treats a `mask` argument as its own implicit sequence mask.)

        Returns a dict: "output" (B, Tq, d_model), "weights" (B, heads, Tq, Tk) and, with
        return_qkv, "q", "k", "v" (B, heads, T, d_k) and "scores" (B, heads, Tq, Tk) before masking.
        """
        q = self.split_heads(self.query(query))
        k, v = self.project_key_value(value)
        output, weights, scores = self.attend(q, k, v, attention_mask, head_mask)
        result = {"output": output, "weights": weights}
        if return_qkv:
            result.update(q=q, k=k, v=v, scores=scores)
        return result

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads)
        return config

