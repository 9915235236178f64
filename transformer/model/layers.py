"""Embeddings, positional encodings, the feed-forward network and the encoder/decoder blocks."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from transformer.model.attention import MultiHeadAttention, dense

SINUSOID_LAYOUTS = ("interleaved", "concat")
ACTIVATIONS = ("relu", "gelu", "swish", "silu")  # swish = silu = x * sigmoid(x)


def positional_encoding(length: int, d_model: int, base: float = 10000.0,
                        layout: str = "interleaved") -> np.ndarray:
    """The paper's sinusoids, (length, d_model) float32.

    With angle(pos, i) = pos / base^(2i / d_model):
    - "interleaved" (the paper): PE(pos, 2i) = sin(angle), PE(pos, 2i + 1) = cos(angle);
    - "concat" (the TensorFlow tutorial's and Marian's layout): the sines of every frequency
      first, then the cosines: PE(pos, i) = sin(angle(pos, i)) for i < ceil(d_model / 2), then
      cos(angle(pos, i)) for the remaining floor(d_model / 2) columns.
    """
    if length < 0 or d_model <= 0 or base <= 0:
        raise ValueError(f"need length >= 0, d_model > 0, base > 0; got {length}, {d_model}, {base}")
    if layout not in SINUSOID_LAYOUTS:
        raise ValueError(f"layout must be one of {SINUSOID_LAYOUTS}, got {layout!r}")
    pos = np.arange(length, dtype=np.float64)[:, None]  # (length, 1)
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]  # (1, ceil(d_model / 2))
    angles = pos / np.power(base, two_i / d_model)  # (length, ceil(d_model / 2))
    sines, cosines = np.sin(angles), np.cos(angles[:, : d_model // 2])
    if layout == "concat":
        return np.concatenate([sines, cosines], axis=1).astype(np.float32)
    pe = np.zeros((length, d_model), dtype=np.float64)
    pe[:, 0::2] = sines
    pe[:, 1::2] = cosines
    return pe.astype(np.float32)


class PositionalEmbedding(keras.layers.Layer):
    """Token embedding (optionally times sqrt(d_model)) plus a position code: positional is
    "sinusoidal" (the paper's interleaved sinusoids), "sinusoidal_concat" ([sin | cos]) or
    "learned".

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
            layout = "concat" if positional == "sinusoidal_concat" else "interleaved"
            self.sinusoids = tf.constant(positional_encoding(max_len, d_model, layout=layout))

    def build(self, ids_shape=None):
        """The token table (unless a shared one is built already) and the learned positions."""
        if not self.token_embedding.built:
            self.token_embedding.build()
        if self.position_embedding is not None:
            self.position_embedding.build()

    def position_codes(self, length, offset=0):
        """(length, d_model) codes for positions offset .. offset + length - 1 (of static length
        when length is an int, as in a decode step)."""
        if self.position_embedding is None:
            return tf.slice(self.sinusoids, [offset, 0], [length, self.d_model])
        return self.position_embedding(offset + tf.range(length))

    def call(self, ids, offset=0):
        """(B, T) ids -> (B, T, d_model). offset: position of the first id (for cached decoding)."""
        length = ids.shape[1] or tf.shape(ids)[1]  # static in a decode step
        fits = tf.debugging.assert_less_equal(
            offset + length, self.max_len,
            message=f"sequence longer than max_len ({self.max_len}): encode with max_len to cut it")
        x = self.token_embedding(ids)
        if self.scale_embeddings:
            x = x * tf.sqrt(tf.cast(self.d_model, x.dtype))
        with tf.control_dependencies([fits]):  # this sentence, not the slice's own error
            return x + self.position_codes(length, offset)[tf.newaxis]


class FeedForward(keras.layers.Layer):
    """Position-wise FFN: activation(x W1 + b1) W2 + b2; the paper's activation is relu
    (max(0, x)); imported models may use gelu (exact, erf) or swish/silu (x * sigmoid(x))."""

    def __init__(self, d_model, dff, activation="relu", **kwargs):
        super().__init__(**kwargs)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        function = {"relu": "relu", "gelu": _gelu, "swish": "silu", "silu": "silu"}[activation]
        self.intermediate = keras.layers.Dense(dff, activation=function, name="intermediate")
        self.output_dense = keras.layers.Dense(d_model, name="output")
        self.d_model, self.dff = d_model, dff

    def build(self, x_shape=None):
        self.intermediate.build((None, None, self.d_model))
        self.output_dense.build((None, None, self.dff))

    def call(self, x):
        return dense(self.output_dense, dense(self.intermediate, x))


def _gelu(x):
    return keras.activations.gelu(x, approximate=False)


class _Block(keras.layers.Layer):
    """Shared residual wiring: post-LN x = LN(x + drop(f(x))), pre-LN x = x + drop(f(LN(x)))."""

    def __init__(self, norm_first, **kwargs):
        super().__init__(**kwargs)
        self.norm_first = norm_first

    def build(self, x_shape=None):
        """Every sublayer's weights from d_model alone (no forward pass): attention, then its
        LayerNorm, for each attention sublayer, then the FFN and its LayerNorm."""
        shape = (None, None, self.feedforward.d_model)
        for name in ("self_attention", "cross_attention"):
            if hasattr(self, name):
                getattr(self, name).build(shape, shape)
                getattr(self, f"{name}_layer_norm").build(shape)
        self.feedforward.build(shape)
        self.feedforward_layer_norm.build(shape)

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

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, norm_first=False, *,
                 head_dim=None, activation="relu", layer_norm_epsilon=1e-6, **kwargs):
        super().__init__(norm_first, **kwargs)
        self.self_attention = MultiHeadAttention(d_model, num_heads, head_dim,
                                                 name="self_attention")
        self.self_attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="self_attention_layer_norm")
        self.self_attention_dropout = keras.layers.Dropout(dropout_rate)
        self.feedforward = FeedForward(d_model, dff, activation, name="feedforward")
        self.feedforward_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="feedforward_layer_norm")
        self.feedforward_dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, attention_mask=None, head_mask=None, training=False, return_qkv=False):
        """x (B, N, d_model), attention_mask (B, 1, 1, N). Returns the attention dict with "output"
        replaced by the block's output (B, N, d_model)."""
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

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, norm_first=False, *,
                 head_dim=None, activation="relu", layer_norm_epsilon=1e-6, **kwargs):
        super().__init__(norm_first, **kwargs)
        self.self_attention = MultiHeadAttention(d_model, num_heads, head_dim,
                                                 name="self_attention")
        self.self_attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="self_attention_layer_norm")
        self.self_attention_dropout = keras.layers.Dropout(dropout_rate)
        self.cross_attention = MultiHeadAttention(d_model, num_heads, head_dim,
                                                  name="cross_attention")
        self.cross_attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="cross_attention_layer_norm")
        self.cross_attention_dropout = keras.layers.Dropout(dropout_rate)
        self.feedforward = FeedForward(d_model, dff, activation, name="feedforward")
        self.feedforward_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="feedforward_layer_norm")
        self.feedforward_dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, memory=None, self_mask=None, cross_mask=None, self_head_mask=None,
             cross_head_mask=None, training=False, return_qkv=False, self_cache=None,
             cross_cache=None, cache_update_index=None):
        """x (B, T, d_model), memory (B, N, d_model), self_mask (B, 1, T, T), cross_mask
        (B, 1, 1, N).

        While decoding, the caches go through to the attention layers: self_cache (k, v) is
        updated at cache_update_index (x holds the new positions only, self_mask covers the
        whole cache), and cross_cache (k, v) is the encoder output's static keys and values
        (memory is then not needed).

        Returns {"output": (B, T, d_model), "self": self-attention dict (with "cache" when
        updated), "cross": cross-attention dict}.
        """
        h = self._sublayer_input(x, self.self_attention_layer_norm)
        self_attention = self.self_attention(
            h, h, attention_mask=self_mask, head_mask=self_head_mask, return_qkv=return_qkv,
            cache=self_cache, cache_update_index=cache_update_index)
        x = self._residual(x, self_attention["output"], self.self_attention_layer_norm,
                           self.self_attention_dropout, training)
        h = self._sublayer_input(x, self.cross_attention_layer_norm)
        cross_attention = self.cross_attention(
            h, memory, attention_mask=cross_mask, head_mask=cross_head_mask,
            return_qkv=return_qkv, cache=cross_cache)
        x = self._residual(x, cross_attention["output"], self.cross_attention_layer_norm,
                           self.cross_attention_dropout, training)
        return {"output": self.feed_forward(x, training), "self": self_attention,
                "cross": cross_attention}
