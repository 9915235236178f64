"""Embeddings, positional encodings, the feed-forward network and the encoder/decoder blocks."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from .attention import MultiHeadAttention


def positional_encoding(length: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The paper's sinusoids, (length, d_model) float32.

    PE(pos, 2i) = sin(pos / base^(2i / d_model)), PE(pos, 2i + 1) = cos(pos / base^(2i / d_model)).
    """
    if length < 0 or d_model <= 0 or base <= 0:
        raise ValueError(f"need length >= 0, d_model > 0, base > 0; got {length}, {d_model}, {base}")
    pos = np.arange(length, dtype=np.float64)[:, None]  # (length, 1)
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]  # (1, ceil(d_model / 2))
    angles = pos / np.power(base, two_i / d_model)
    pe = np.zeros((length, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return pe.astype(np.float32)


class PositionalEmbedding(keras.layers.Layer):
    """Token embedding (optionally times sqrt(d_model)) plus a sinusoidal or learned position code.

    The token embedding layer is passed in so source and target can share one matrix.
    """

    def __init__(self, token_embedding, d_model, max_len, positional="sinusoidal",
                 scale_embeddings=True, **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.d_model = d_model
        self.max_len = max_len
        self.positional = positional
        self.scale_embeddings = scale_embeddings
        if positional == "learned":
            self.position_embedding = keras.layers.Embedding(max_len, d_model, name="position_embedding")
        else:
            self.position_embedding = None
            self.sinusoids = tf.constant(positional_encoding(max_len, d_model))


    def position_codes(self, length, offset=0):
        """(length, d_model) codes for positions offset .. offset + length - 1."""
        if self.position_embedding is None:
            return self.sinusoids[offset:offset + length]
        return self.position_embedding(tf.range(offset, offset + length))

    def call(self, ids, offset=0):
        """(B, T) ids -> (B, T, d_model). offset: position of the first id (for cached decoding)."""
        length = tf.shape(ids)[1]
        tf.debugging.assert_less_equal(
            offset + length, self.max_len,
            message=f"sequence longer than max_len ({self.max_len}): encode with max_len to cut it")
        x = self.token_embedding(ids)
        if self.scale_embeddings:
            x = x * tf.sqrt(tf.cast(self.d_model, x.dtype))
        return x + self.position_codes(length, offset)[tf.newaxis]


class FeedForward(keras.layers.Layer):
    """Position-wise FFN: max(0, x W1 + b1) W2 + b2."""

    def __init__(self, d_model, dff, **kwargs):
        super().__init__(**kwargs)
        self.intermediate = keras.layers.Dense(dff, activation="relu", name="intermediate")
        self.output_dense = keras.layers.Dense(d_model, name="output")


    def call(self, x):
        return self.output_dense(self.intermediate(x))


class _Block(keras.layers.Layer):
    """Shared residual wiring: post-LN x = LN(x + drop(f(x))), pre-LN x = x + drop(f(LN(x)))."""

    def __init__(self, norm_first, **kwargs):
        super().__init__(**kwargs)
        self.norm_first = norm_first

    def _sublayer_input(self, x, norm):
        return norm(x) if self.norm_first else x

    def _residual(self, x, sublayer_output, norm, dropout, training):
        x = x + dropout(sublayer_output, training=training)
        return x if self.norm_first else norm(x)

    def feed_forward(self, x, training):
        """The FFN sublayer with its residual connection (subclasses own the feedforward* layers)."""
        h = self._sublayer_input(x, self.feedforward_layer_norm)
        return self._residual(x, self.feedforward(h), self.feedforward_layer_norm,
                              self.feedforward_dropout, training)


class EncoderLayer(_Block):
    """Self-attention then FFN, each with its own residual connection, dropout and LayerNorm."""

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, norm_first=False, **kwargs):
        super().__init__(norm_first, **kwargs)
        self.self_attention = MultiHeadAttention(d_model, num_heads, name="self_attention")
        self.self_attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-6, name="self_attention_layer_norm")
        self.self_attention_dropout = keras.layers.Dropout(dropout_rate)
        self.feedforward = FeedForward(d_model, dff, name="feedforward")
        self.feedforward_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-6, name="feedforward_layer_norm")
        self.feedforward_dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, attention_mask=None, head_mask=None, training=False, return_qkv=False):
        """x (B, N, d_model), attention_mask (B, 1, 1, N). Returns the attention dict with "output" replaced
        by the block's output (B, N, d_model)."""
        h = self._sublayer_input(x, self.self_attention_layer_norm)
        attention = self.self_attention(
            h, h, attention_mask=attention_mask, head_mask=head_mask, return_qkv=return_qkv)
        x = self._residual(x, attention["output"], self.self_attention_layer_norm,
                           self.self_attention_dropout, training)
        return {**attention, "output": self.feed_forward(x, training)}


class DecoderLayer(_Block):
    """Masked self-attention, cross-attention over the encoder output, then FFN.

    Each sublayer has its own attention object, residual connection, dropout and LayerNorm: one
    shared object would silently tie their weights.
    """

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, norm_first=False, **kwargs):
        super().__init__(norm_first, **kwargs)
        self.self_attention = MultiHeadAttention(d_model, num_heads, name="self_attention")
        self.self_attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-6, name="self_attention_layer_norm")
        self.self_attention_dropout = keras.layers.Dropout(dropout_rate)
        self.cross_attention = MultiHeadAttention(d_model, num_heads, name="cross_attention")
        self.cross_attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-6, name="cross_attention_layer_norm")
        self.cross_attention_dropout = keras.layers.Dropout(dropout_rate)
        self.feedforward = FeedForward(d_model, dff, name="feedforward")
        self.feedforward_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-6, name="feedforward_layer_norm")
        self.feedforward_dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, memory, self_mask=None, cross_mask=None, self_head_mask=None,
             cross_head_mask=None, training=False, return_qkv=False):
        """x (B, T, d_model), memory (B, N, d_model), self_mask (B, 1, T, T), cross_mask (B, 1, 1, N).

        Returns {"output": (B, T, d_model), "self": self-attention dict, "cross": cross dict}.
        """
        h = self._sublayer_input(x, self.self_attention_layer_norm)
        self_attention = self.self_attention(
            h, h, attention_mask=self_mask, head_mask=self_head_mask, return_qkv=return_qkv)
        x = self._residual(x, self_attention["output"], self.self_attention_layer_norm,
                           self.self_attention_dropout, training)
        x, cross_attention = self.cross_attend(x, memory, cross_mask, cross_head_mask, training,
                                               return_qkv)
        return {"output": self.feed_forward(x, training), "self": self_attention,
                "cross": cross_attention}

    def cross_attend(self, x, memory, cross_mask, cross_head_mask, training, return_qkv=False,
                     memory_key_value=None):
        """The cross-attention sublayer. memory_key_value: precomputed (k, v), for decoding."""
        h = self._sublayer_input(x, self.cross_attention_layer_norm)
        if memory_key_value is None:
            attention = self.cross_attention(
                h, memory, attention_mask=cross_mask, head_mask=cross_head_mask, return_qkv=return_qkv)
        else:
            q = self.cross_attention.split_heads(self.cross_attention.query(h))
            output, weights, _ = self.cross_attention.attend(
                q, *memory_key_value, cross_mask, cross_head_mask)
            attention = {"output": output, "weights": weights}
        x = self._residual(x, attention["output"], self.cross_attention_layer_norm,
                           self.cross_attention_dropout, training)
        return x, attention

    def cached_step(self, x, position, self_cache, memory_key_value, cross_mask,
                    self_head_mask=None, cross_head_mask=None):
        """One decoding step for the token at `position`, reusing earlier keys and values.

        x (B, 1, d_model); self_cache = (k, v), each (B, heads, max_len, d_k), holding the keys and
        values of positions < `position`; memory_key_value = the cross-attention (k, v) of the
        encoder output, computed once per source.
        Returns (output (B, 1, d_model), new self_cache, self weights (B, heads, 1, max_len),
        cross weights (B, heads, 1, N)). Same arithmetic as `call` on the prefix, one row of it.
        """
        attention = self.self_attention
        h = self._sublayer_input(x, self.self_attention_layer_norm)
        q = attention.split_heads(attention.query(h))  # (B, heads, 1, d_k)
        k_new, v_new = attention.project_key_value(h)  # (B, heads, 1, d_k)
        max_len = tf.shape(self_cache[0])[2]
        slots = tf.range(max_len)
        write = tf.equal(slots, position)[tf.newaxis, tf.newaxis, :, tf.newaxis]
        k_cache = tf.where(write, k_new, self_cache[0])  # fixed size: the step never retraces
        v_cache = tf.where(write, v_new, self_cache[1])
        visible = tf.cast(slots <= position, x.dtype)[tf.newaxis, tf.newaxis, tf.newaxis, :]
        output, self_weights, _ = attention.attend(q, k_cache, v_cache, visible, self_head_mask)
        x = self._residual(x, output, self.self_attention_layer_norm, self.self_attention_dropout,
                           False)
        x, cross = self.cross_attend(x, None, cross_mask, cross_head_mask, False,
                                     memory_key_value=memory_key_value)
        return self.feed_forward(x, False), (k_cache, v_cache), self_weights, cross["weights"]
