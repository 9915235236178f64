"""Scaled dot-product and multi-head attention that hand out their internals.

`MultiHeadAttention.call` is the only code in the project that computes attention: the encoder,
the decoder, teacher forcing and cached decoding all go through it.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from transformer.core.masking import BLOCKED_SCORE


def scaled_dot_product_attention(q, k, v, mask=None, position_bias=None, scale=True):
    """softmax(Q K^T / sqrt(d_k) + position_bias) V.

    q: (..., q_len, d_k), k: (..., k_len, d_k), v: (..., k_len, d_v);
    mask broadcastable to (..., q_len, k_len), 1 = may attend, 0 = blocked; position_bias (T5's
    relative position bias) broadcastable to (..., q_len, k_len), added to the scores;
    scale=False leaves out the 1/sqrt(d_k) (T5).
    Returns (output (..., q_len, d_v), weights (..., q_len, k_len), scores (..., q_len, k_len):
    scaled, the bias added, before masking).
    Blocked keys get exactly 0 weight; a query whose keys are all blocked gets an all-zero row.
    """
    scores = tf.matmul(q, k, transpose_b=True)  # (..., q_len, k_len)
    if scale:
        d_k = k.shape[-1]  # static (head_dim) in the model; dynamic for a caller's own tensors
        scores = scores / (math.sqrt(d_k) if d_k is not None else
                           tf.sqrt(tf.cast(tf.shape(k)[-1], q.dtype)))
    if position_bias is not None:
        scores = scores + position_bias
    if mask is None:
        weights = tf.nn.softmax(scores, axis=-1)
    else:
        mask = tf.cast(mask, scores.dtype)
        weights = tf.nn.softmax(scores + (1.0 - mask) * BLOCKED_SCORE, axis=-1)
        # The softmax leaves ~exp(-1e9) = 0 on blocked keys already, except on fully blocked rows
        # where it is uniform: multiplying by the mask makes both exactly 0.
        weights = weights * mask
    return tf.matmul(weights, v), weights, scores


def leading_dims(x, inner=1):
    """x's dimensions before its last `inner` ones, for a reshape: the static ones as ints and,
    when only one is unknown (the batch, in a decode step), -1 for it, so the graph holds no
    shape ops; from tf.shape otherwise."""
    dims = x.shape[:-inner].as_list()
    if sum(d is None for d in dims) <= 1:
        return [-1 if d is None else d for d in dims]
    shape = tf.shape(x)
    return [shape[i] if d is None else d for i, d in enumerate(dims)]


def dense(layer, x):
    """A keras Dense layer applied to x (..., d_in) as one 2-D matmul: layer(x)'s arithmetic
    (equal to float32 rounding), without the shape ops Keras puts around the matmul of a
    rank-3 input. A cached decode step makes 8 of these calls per decoder layer, plus the
    output projection; with Keras's, the bundled model's loop body had 1,001 graph nodes
    instead of 559 (bench/profile_decode.py prints them)."""
    d_in, d_out = layer.kernel.shape
    y = tf.matmul(tf.reshape(x, [-1, d_in]), layer.kernel)  # (..., d_in) -> (rows, d_out)
    if layer.use_bias:
        y = tf.nn.bias_add(y, layer.bias)
    return tf.reshape(layer.activation(y), leading_dims(x) + [d_out])


class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention (paper, section 3.2.2) returning its weights, and on request Q, K, V.

    Query, key and value are projected d_model -> num_heads * head_dim (head_dim defaults to
    d_model // num_heads, as in the paper; imported models may use another size), split into
    heads by reshape/transpose, attended per head, merged back and projected to d_model by
    `output`.

    `call` has three modes, as keras-hub's CachedMultiHeadAttention:
    - no cache: keys and values are projected from `value` (a whole sequence);
    - a static cache, `cache=(k, v)` without `cache_update_index`: the keys and values were
      projected once (`project_key_value`) and are reused as they are, as for cross-attention
      over the encoder output while decoding; `value` is not used;
    - an updated cache, `cache=(k, v)` with `cache_update_index`: the keys and values of the new
      positions (from `value`) are written into the fixed-size cache from that index on, and the
      query attends over the whole cache (the attention mask blocks slots not yet written), as
      for decoder self-attention while decoding. The new cache is returned in the result.
    """

    def __init__(self, d_model: int, num_heads: int, head_dim: int | None = None, *,
                 use_bias: bool = True, scale: bool = True, **kwargs):
        super().__init__(**kwargs)
        if head_dim is None:
            if d_model % num_heads:
                raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
            head_dim = d_model // num_heads
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.d_k = head_dim  # the paper's name
        self.use_bias, self.scale = use_bias, scale
        inner = num_heads * head_dim
        self.query = keras.layers.Dense(inner, use_bias=use_bias, name="query")
        self.key = keras.layers.Dense(inner, use_bias=use_bias, name="key")
        self.value = keras.layers.Dense(inner, use_bias=use_bias, name="value")
        self.output_dense = keras.layers.Dense(d_model, use_bias=use_bias, name="output")

    def build(self, query_shape=None, value_shape=None):
        """The four projections' weights from d_model alone (no forward pass)."""
        for dense in (self.query, self.key, self.value):
            dense.build((None, None, self.d_model))
        self.output_dense.build((None, None, self.num_heads * self.head_dim))

    def split_heads(self, x):
        """(B, T, heads * head_dim) -> (B, heads, T, head_dim)."""
        x = tf.reshape(x, leading_dims(x) + [self.num_heads, self.head_dim])
        return tf.transpose(x, (0, 2, 1, 3))

    def merge_heads(self, x):
        """(B, heads, T, head_dim) -> (B, T, heads * head_dim)."""
        x = tf.transpose(x, (0, 2, 1, 3))  # (B, T, heads, head_dim)
        return tf.reshape(x, leading_dims(x, inner=2) + [self.num_heads * self.head_dim])

    def project_key_value(self, value):
        """Per-head keys and values of a sequence: (B, S, d_model) -> two (B, heads, S, head_dim).

        The static cache of cross-attention: decoding computes it once per source."""
        return (self.split_heads(dense(self.key, value)),
                self.split_heads(dense(self.value, value)))

    def call(self, query, value=None, attention_mask=None, head_mask=None, return_qkv=False,
             cache=None, cache_update_index=None, position_bias=None, value_mask=None,
             head_patch=None):
        """query (B, Tq, d_model) attends over value (B, Tk, d_model) (keys come from value too),
        or over a cache (see the class docstring for the three modes).

        attention_mask: broadcastable to (B, heads, Tq, Tk), 1 = may attend. (Not called `mask`:
        Keras treats a `mask` argument as its own implicit sequence mask.)
        head_mask: (heads,), 0 silences that head's output before the output projection.
        position_bias: broadcastable to (B, heads, Tq, Tk), added to the scores (T5).
        value_mask: (B, Tk), 0 zeroes that key's value vector in every head (value zeroing,
        Mohebbi et al. 2023: the key is still attended to, its value contributes nothing).
        head_patch: (rows (B, heads), context (B or 1, heads, Tq, head_dim)): where rows is 1,
        that head's output (its context vectors, before the output projection) is replaced by
        `context`, at every query position (activation patching: a clean run's head output
        restored in a corrupted one).
        cache: (k, v), each (B, heads, S, head_dim); cache_update_index: scalar int, the slot of
        the first new position.

        Returns a dict: "output" (B, Tq, d_model), "weights" (B, heads, Tq, Tk); with an updated
        cache "cache" (k, v); with return_qkv, "q", "k", "v" (B, heads, T, head_dim) and
        "scores" (B, heads, Tq, Tk) before masking.
        """
        q = self.split_heads(dense(self.query, query))  # (B, heads, Tq, head_dim)
        if cache is None:
            k, v = self.project_key_value(value)
        elif cache_update_index is None:
            k, v = cache
        else:
            k, v = _write(cache, self.project_key_value(value), cache_update_index)
        if value_mask is not None:
            v = v * tf.cast(value_mask, v.dtype)[:, tf.newaxis, :, tf.newaxis]
        context, weights, scores = scaled_dot_product_attention(
            q, k, v, attention_mask, position_bias=position_bias, scale=self.scale)
        if head_mask is not None:
            head_mask = tf.cast(head_mask, context.dtype)
            context = context * head_mask[tf.newaxis, :, tf.newaxis, tf.newaxis]
        if head_patch is not None:
            rows, patched = head_patch
            rows = tf.cast(rows, context.dtype)[:, :, tf.newaxis, tf.newaxis]  # (B, H, 1, 1)
            context = context + rows * (tf.cast(patched, context.dtype) - context)
        result = {"output": dense(self.output_dense, self.merge_heads(context)),
                  "weights": weights}
        if cache is not None and cache_update_index is not None:
            result["cache"] = (k, v)
        if return_qkv:
            result.update(q=q, k=k, v=v, scores=scores)
        return result

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads, head_dim=self.head_dim,
                      use_bias=self.use_bias, scale=self.scale)
        return config


def _write(cache, new, index):
    """Write new (k, v) (B, heads, n, head_dim) into the fixed-size cache (B, heads, S, head_dim)
    at slots index .. index + n - 1. The cache keeps its shape, so a compiled step never
    retraces."""
    n = new[0].shape[2] or tf.shape(new[0])[2]
    if n == 1:  # a decode step: its one position written into slot `index` of every row and
        # head. The scatter copies the cache (the layer's function call holds a reference, so
        # TensorFlow cannot update it in place) but computes nothing per slot: the select over
        # every slot it replaces was 2.3 ms of NLLB's step at 48 tokens (24 a step), the
        # scatters 1.6-2.1 ms (bench/profile_decode.py)
        heads, head_dim = new[0].shape[1], new[0].shape[3]  # static: the config's
        rows = tf.range(tf.size(new[0]) // head_dim)[:, tf.newaxis]  # (B * heads, 1)
        at = tf.concat([rows // heads, rows % heads,
                        tf.fill(tf.shape(rows), tf.cast(index, rows.dtype))], axis=1)
        return tuple(tf.tensor_scatter_nd_update(old, at, tf.reshape(x, [-1, head_dim]))
                     for x, old in zip(new, cache))
    slots = tf.range(tf.shape(cache[0])[2])
    write = ((slots >= index) & (slots < index + n))[tf.newaxis, tf.newaxis, :, tf.newaxis]
    source = tf.clip_by_value(slots - index, 0, n - 1)  # slot s takes new position s - index
    # A gather, not a pad at a step-dependent offset, so that XLA can compile the decode loop.
    return tuple(tf.where(write, tf.gather(x, source, axis=2), old) for x, old in zip(new, cache))
