"""Embeddings, positional encodings, the feed-forward network and the encoder/decoder blocks."""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from transformer.model.attention import MultiHeadAttention, dense

SINUSOID_LAYOUTS = ("interleaved", "concat", "fairseq")
# swish = silu = x * sigmoid(x); gelu is exact (erf), gelu_tanh its tanh approximation
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swish", "silu")


def positional_encoding(length: int, d_model: int, base: float = 10000.0,
                        layout: str = "interleaved") -> np.ndarray:
    """The paper's sinusoids, (length, d_model) float32.

    With angle(pos, i) = pos / base^(2i / d_model):
    - "interleaved" (the paper): PE(pos, 2i) = sin(angle), PE(pos, 2i + 1) = cos(angle);
    - "concat" (the TensorFlow tutorial's and Marian's layout): the sines of every frequency
      first, then the cosines: PE(pos, i) = sin(angle(pos, i)) for i < ceil(d_model / 2), then
      cos(angle(pos, i)) for the remaining floor(d_model / 2) columns;
    - "fairseq" (M2M100's and NLLB's, computed in float32 as they compute it): half = d_model
      // 2 frequencies base^(-i / (half - 1)), the sines then the cosines, a zero column last
      when d_model is odd.
    """
    if length < 0 or d_model <= 0 or base <= 0:
        raise ValueError(f"need length >= 0, d_model > 0, base > 0; got {length}, {d_model}, {base}")
    if layout not in SINUSOID_LAYOUTS:
        raise ValueError(f"layout must be one of {SINUSOID_LAYOUTS}, got {layout!r}")
    if layout == "fairseq":
        return _fairseq_sinusoids(length, d_model, base)
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


def _fairseq_sinusoids(length: int, d_model: int, base: float) -> np.ndarray:
    """M2M100SinusoidalPositionalEmbedding.get_embedding's table (positions 0 .. length - 1;
    the model offsets them by pad_id + 1, so row pad_id, which it zeroes, is never one of them).

    Computed as transformers computes it, in its order and in float32: the step
    log(base) / (half - 1) made float32, the exponents i * -step, their exp (the frequencies),
    the angles position * frequency, then their sin and cos. exp, sin and cos are rounded to
    float32 from float64 (the nearest float32): NumPy's own float32 exp is one unit in the last
    place off for about half the frequencies, and one unit of a frequency grows to 6e-5 at
    position 1000. torch's exp (MKL's in its x86 builds) is itself within 0.55 of a unit, not
    always the nearest: there about 1 frequency in 100 (4 of 512 at d_model 1024) rounds the
    other way, and those columns differ from transformers' by up to 1.5e-5 at position 1000
    (the others by at most one unit, 6e-8: tests/model/test_sinusoids.py).
    """
    half = d_model // 2
    step = np.float32(math.log(base) / max(half - 1, 1))
    exponents = np.arange(half, dtype=np.float32) * -step  # float32, as torch multiplies
    frequencies = _rounded(np.exp, exponents)  # (half,)
    angles = np.arange(length, dtype=np.float32)[:, None] * frequencies[None, :]  # (length, half)
    table = np.concatenate([_rounded(np.sin, angles), _rounded(np.cos, angles)], axis=1)
    if d_model % 2:
        table = np.concatenate([table, np.zeros((length, 1), np.float32)], axis=1)
    return table


def _rounded(function, values: np.ndarray) -> np.ndarray:
    """function of float32 values, correctly rounded to float32 (evaluated in float64)."""
    return function(values.astype(np.float64)).astype(np.float32)


def make_norm(kind: str, epsilon: float, name: str):
    """The model's normalisation layer: "layer" (keras LayerNormalization: gamma, beta) or
    "rms" (keras RMSNormalization: x / sqrt(mean(x^2) + epsilon) * scale, T5's LayerNorm)."""
    if kind == "rms":
        return keras.layers.RMSNormalization(epsilon=epsilon, name=name)
    return keras.layers.LayerNormalization(epsilon=epsilon, name=name)


class PositionalEmbedding(keras.layers.Layer):
    """Token embedding (optionally times sqrt(d_model)) plus a position code, optionally
    normalised (BART's layernorm_embedding): positional is "sinusoidal" (the paper's interleaved
    sinusoids), "sinusoidal_concat" ([sin | cos]), "sinusoidal_fairseq" (M2M100's), "learned"
    or "none" (T5: positions enter as a bias on the attention scores instead). Sinusoids start
    at position_offset (M2M100 counts from pad_id + 1).

    The token embedding layer is passed in so source and target can share one matrix.
    """

    def __init__(self, token_embedding, d_model, max_len, positional="sinusoidal",
                 scale_embeddings=True, *, position_offset=0, norm=None, **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.d_model = d_model
        self.max_len = max_len
        self.positional = positional
        self.scale_embeddings = scale_embeddings
        self.position_embedding = self.sinusoids = None
        self.embedding_norm = norm  # a norm layer named "embedding_norm", or None
        if positional == "learned":
            self.position_embedding = keras.layers.Embedding(max_len, d_model, name="position_embedding")
        elif positional != "none":
            layout = {"sinusoidal_concat": "concat", "sinusoidal_fairseq": "fairseq"}.get(
                positional, "interleaved")
            table = positional_encoding(position_offset + max_len, d_model, layout=layout)
            self.sinusoids = tf.constant(table[position_offset:])  # (max_len, d_model)

    def build(self, ids_shape=None):
        """The token table (unless a shared one is built already), the learned positions and
        the embedding norm."""
        if not self.token_embedding.built:
            self.token_embedding.build()
        if self.position_embedding is not None:
            self.position_embedding.build()
        if self.embedding_norm is not None:
            self.embedding_norm.build((None, None, self.d_model))

    def position_codes(self, length, offset=0):
        """(length, d_model) codes for positions offset .. offset + length - 1 (of static length
        when length is an int, as in a decode step); None when positional is "none"."""
        if self.sinusoids is not None:
            return tf.slice(self.sinusoids, [offset, 0], [length, self.d_model])
        if self.position_embedding is not None:
            return self.position_embedding(offset + tf.range(length))
        return None

    def call(self, ids, offset=0, token_vectors=None):
        """(B, T) ids -> (B, T, d_model). offset: position of the first id (for cached decoding).
        token_vectors: (B, T, d_model) in place of the token embedding's rows for `ids` (what
        gradient attributions differentiate: transformer.inference.gradients); scaled, given
        their positions and normalised as those rows are."""
        length = ids.shape[1] or tf.shape(ids)[1]  # static in a decode step
        fits = tf.debugging.assert_less_equal(
            offset + length, self.max_len,
            message=f"sequence longer than max_len ({self.max_len}): encode with max_len to cut it")
        x = self.token_embedding(ids) if token_vectors is None else token_vectors
        if self.scale_embeddings:
            x = x * tf.sqrt(tf.cast(self.d_model, x.dtype))
        with tf.control_dependencies([fits]):  # this sentence, not the slice's own error
            codes = self.position_codes(length, offset)
            x = x + codes[tf.newaxis] if codes is not None else tf.identity(x)
        return x if self.embedding_norm is None else self.embedding_norm(x)


class FeedForward(keras.layers.Layer):
    """Position-wise FFN: activation(x W1 + b1) W2 + b2; the paper's activation is relu
    (max(0, x)); imported models may use gelu (exact, erf), gelu_tanh (its tanh approximation)
    or swish/silu (x * sigmoid(x)). gated=True is T5 v1.1's gated FFN: (activation(x W_gate)
    * (x W1)) W2. use_bias=False: no biases (T5)."""

    def __init__(self, d_model, dff, activation="relu", *, gated=False, use_bias=True, **kwargs):
        super().__init__(**kwargs)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        function = {"relu": "relu", "gelu": _gelu, "gelu_tanh": _gelu_tanh, "swish": "silu",
                    "silu": "silu"}[activation]
        self.gate = (keras.layers.Dense(dff, activation=function, use_bias=use_bias, name="gate")
                     if gated else None)
        self.intermediate = keras.layers.Dense(dff, activation=None if gated else function,
                                               use_bias=use_bias, name="intermediate")
        self.output_dense = keras.layers.Dense(d_model, use_bias=use_bias, name="output")
        self.d_model, self.dff = d_model, dff

    def build(self, x_shape=None):
        for layer in (self.gate, self.intermediate):
            if layer is not None:
                layer.build((None, None, self.d_model))
        self.output_dense.build((None, None, self.dff))

    def call(self, x):
        inner = dense(self.intermediate, x)  # (..., dff)
        if self.gate is not None:
            inner = dense(self.gate, x) * inner
        return dense(self.output_dense, inner)


def _gelu(x):
    return keras.activations.gelu(x, approximate=False)


def _gelu_tanh(x):
    return keras.activations.gelu(x, approximate=True)


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
                 head_dim=None, activation="relu", layer_norm_epsilon=1e-6, norm="layer",
                 use_bias=True, attention_scale=True, feedforward="dense", **kwargs):
        super().__init__(norm_first, **kwargs)
        attention = dict(use_bias=use_bias, scale=attention_scale)
        self.self_attention = MultiHeadAttention(d_model, num_heads, head_dim,
                                                 name="self_attention", **attention)
        self.self_attention_layer_norm = make_norm(norm, layer_norm_epsilon,
                                                   "self_attention_layer_norm")
        self.self_attention_dropout = keras.layers.Dropout(dropout_rate)
        self.feedforward = FeedForward(d_model, dff, activation, gated=feedforward == "gated",
                                       use_bias=use_bias, name="feedforward")
        self.feedforward_layer_norm = make_norm(norm, layer_norm_epsilon, "feedforward_layer_norm")
        self.feedforward_dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, attention_mask=None, head_mask=None, training=False, return_qkv=False,
             position_bias=None, value_mask=None, head_patch=None):
        """x (B, N, d_model), attention_mask (B, 1, 1, N), position_bias (1, H, N, N) or None,
        value_mask (B, N) or None (0: that token's value vectors zeroed), head_patch: heads'
        outputs restored (MultiHeadAttention.call).
        Returns the attention dict with "output" replaced by the block's output (B, N, d_model)."""
        h = self._sublayer_input(x, self.self_attention_layer_norm)
        attention = self.self_attention(
            h, h, attention_mask=attention_mask, head_mask=head_mask, return_qkv=return_qkv,
            position_bias=position_bias, value_mask=value_mask, head_patch=head_patch)
        x = self._residual(x, attention["output"], self.self_attention_layer_norm,
                           self.self_attention_dropout, training)
        return {**attention, "output": self.feed_forward(x, training)}


class DecoderLayer(_Block):
    """Masked self-attention, cross-attention over the encoder output, then FFN.

    Each sublayer has its own attention object, residual connection, dropout and LayerNorm: one
    shared object would silently tie their weights.
    """

    def __init__(self, d_model, num_heads, dff, dropout_rate=0.1, norm_first=False, *,
                 head_dim=None, activation="relu", layer_norm_epsilon=1e-6, norm="layer",
                 use_bias=True, attention_scale=True, feedforward="dense", **kwargs):
        super().__init__(norm_first, **kwargs)
        attention = dict(use_bias=use_bias, scale=attention_scale)
        self.self_attention = MultiHeadAttention(d_model, num_heads, head_dim,
                                                 name="self_attention", **attention)
        self.self_attention_layer_norm = make_norm(norm, layer_norm_epsilon,
                                                   "self_attention_layer_norm")
        self.self_attention_dropout = keras.layers.Dropout(dropout_rate)
        self.cross_attention = MultiHeadAttention(d_model, num_heads, head_dim,
                                                  name="cross_attention", **attention)
        self.cross_attention_layer_norm = make_norm(norm, layer_norm_epsilon,
                                                    "cross_attention_layer_norm")
        self.cross_attention_dropout = keras.layers.Dropout(dropout_rate)
        self.feedforward = FeedForward(d_model, dff, activation, gated=feedforward == "gated",
                                       use_bias=use_bias, name="feedforward")
        self.feedforward_layer_norm = make_norm(norm, layer_norm_epsilon, "feedforward_layer_norm")
        self.feedforward_dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x, memory=None, self_mask=None, cross_mask=None, self_head_mask=None,
             cross_head_mask=None, training=False, return_qkv=False, self_cache=None,
             cross_cache=None, cache_update_index=None, position_bias=None,
             self_value_mask=None, cross_value_mask=None, self_head_patch=None,
             cross_head_patch=None, query_last=False):
        """x (B, T, d_model), memory (B, N, d_model), self_mask (B, 1, T, T), cross_mask
        (B, 1, 1, N), position_bias (1, H, T, T or the cache's length) on the self-attention
        scores, or None (cross-attention never has one).

        While decoding, the caches go through to the attention layers: self_cache (k, v) is
        updated at cache_update_index (x holds the new positions only, self_mask covers the
        whole cache), and cross_cache (k, v) is the encoder output's static keys and values
        (memory is then not needed). self_value_mask (B, T), cross_value_mask (B, N): 0 zeroes
        that token's value vectors in that sublayer (value zeroing). self_head_patch,
        cross_head_patch: heads' outputs restored in that sublayer (MultiHeadAttention.call).
        query_last: the last position's output alone (B, 1, d_model), its self-attention over
        every position's keys and values; self_mask, position_bias and self_head_patch are then
        given for that one query row (what a score at the last position needs from the last
        layer: activation patching).

        Returns {"output": (B, T, d_model), "self": self-attention dict (with "cache" when
        updated), "cross": cross-attention dict}.
        """
        h = self._sublayer_input(x, self.self_attention_layer_norm)
        if query_last:
            x = x[:, -1:]
        self_attention = self.self_attention(
            h[:, -1:] if query_last else h, h, attention_mask=self_mask,
            head_mask=self_head_mask, return_qkv=return_qkv,
            cache=self_cache, cache_update_index=cache_update_index, position_bias=position_bias,
            value_mask=self_value_mask, head_patch=self_head_patch)
        x = self._residual(x, self_attention["output"], self.self_attention_layer_norm,
                           self.self_attention_dropout, training)
        h = self._sublayer_input(x, self.cross_attention_layer_norm)
        cross_attention = self.cross_attention(
            h, memory, attention_mask=cross_mask, head_mask=cross_head_mask,
            return_qkv=return_qkv, cache=cross_cache, value_mask=cross_value_mask,
            head_patch=cross_head_patch)
        x = self._residual(x, cross_attention["output"], self.cross_attention_layer_norm,
                           self.cross_attention_dropout, training)
        return {"output": self.feed_forward(x, training), "self": self_attention,
                "cross": cross_attention}
