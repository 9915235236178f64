"""The teacher-forced forward pass the pages use, compiled once per architecture and shared.

`forward` runs Transformer.call (return_attention, and on request return_qkv and
return_hidden_states) with the head masks as tensor inputs, inside one tf.function per
architecture (config) and set of outputs, kept with the decode loops
(transformer.inference.decoding.shared_function): the model's variables are inputs, so every model
of one config runs the same trace with its own weights, and a head mask is a tensor, not a
retrace. As decoding does, the source is padded to its bucket (16, 32, 64, ...) and the decoder
input to its own, so that XLA (decoding.JIT_COMPILE) compiles once per bucket; the results are
sliced back to the given lengths:
- padded source keys are masked, so they change no number; a model that does not mask padding
  (config.mask_padding False) attends to them, so its source is never padded (source_bucket);
  a model fed a fixed source length (pad_source_to) is never padded beyond it;
- padded decoder positions come after every real one: the look-ahead mask keeps each real row
  off them, masked or not.
The log-softmax of the logits runs on the device too (float64, as decoding's steps), and only
what is asked leaves it: the log-probability of each output id, and with top_k the k most
probable ids of each row; never the (B, T, vocabulary) logits.

`eager_forward` is the reference: the same dict from the model called eagerly, unpadded.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer.core.kinds import KIND_NAMES, layer_counts
from transformer.inference.decoding import (
    _built,
    _head_masks,
    log_softmax,
    pad_to,
    shared_function,
    source_bucket,
    target_bucket,
)

__all__ = ["eager_forward", "forward", "forward_function"]

QKV = ("q", "k", "v", "scores")


def forward(model, source_ids, target_ids, output_ids=None, head_mask=None, *,
            details: bool = False, hidden_states: bool = False, top_k: int = 0,
            values: bool = False) -> dict:
    """One teacher-forced pass of the compiled forward function; NumPy arrays:

    "encoder_attention" (L_enc, B, H, N, N), "decoder_attention" (L_dec, B, H, T, T),
    "cross_attention" (L_dec, B, H, T, N), "source_mask" (B, 1, 1, N), "target_mask" (B, 1, T, T)
    as Transformer.call returns them; with output_ids (B, T) "log_probs" (B, T) float64: the
    log-probability of output_ids[b, t] at row t; with details "<kind>_q"/"_k"/"_v"
    (L, B, H, len, head_dim) and "<kind>_scores" (L, B, H, q_len, k_len); with values (and not
    details) "<kind>_v" alone (what the value norms need: transformer.inference.contributions);
    with hidden_states "encoder_hidden_states" (L_enc + 1, B, N, d_model) and
    "decoder_hidden_states" (L_dec + 1, B, T, d_model); with top_k "top_ids" (B, T, k) int32
    and "top_log_probs" (B, T, k) float64 (most probable first, ties: the lower id first).

    source_ids (B, N), target_ids (B, T): int ids, already padded to a rectangle (padded here to
    their buckets, and cut back). head_mask: {kind: (layers, heads)}, any subset.
    """
    model = _built(model)
    c = model.config
    source_ids = np.asarray(source_ids, np.int32)  # (B, N)
    target_ids = np.asarray(target_ids, np.int32)  # (B, T)
    n, t = source_ids.shape[1], target_ids.shape[1]
    if output_ids is None:
        output_ids = np.full_like(target_ids, c.pad_id)
    output_ids = np.asarray(output_ids, np.int32)  # (B, T)
    if output_ids.shape != target_ids.shape:
        raise ValueError(f"output_ids must have the target's shape {target_ids.shape}, "
                         f"got {output_ids.shape}")
    width_n, width_t = source_bucket(c, n), target_bucket(c, t)
    masks = _head_masks(model, head_mask)
    fn = forward_function(model, details=details, hidden_states=hidden_states,
                          top_k=min(top_k, c.tgt_vocab_size), values=values)
    out = fn(model, tf.constant(pad_to(source_ids, width_n, c.pad_id)),
             tf.constant(pad_to(target_ids, width_t, c.pad_id)),
             tf.constant(pad_to(output_ids, width_t, c.pad_id)),
             *(masks[kind] for kind in KIND_NAMES))
    return _cut({name: value.numpy() for name, value in out.items()}, n, t)


def forward_function(model, *, details: bool = False, hidden_states: bool = False,
                     top_k: int = 0, values: bool = False):
    """The shared compiled forward pass of this model's architecture with these outputs (a
    decoding._SharedLoop: call it as fn(model, source_ids, target_ids, output_ids,
    encoder_mask, decoder_mask, cross_mask); .tracing_count() counts its traces)."""
    c = model.config
    values = values and not details  # details hand out V already
    kind = ("forward" + ("_details" if details else "") + ("_values" if values else "")
            + ("_hidden" if hidden_states else "")
            + (f"_top{top_k}" if top_k else ""))
    layers = layer_counts(c)
    signature = ([tf.TensorSpec([None, None], tf.int32)] * 3 +
                 [tf.TensorSpec([layers[k], c.num_heads], tf.float32) for k in KIND_NAMES])
    return shared_function(
        model, kind, lambda m: _forward(m, details, hidden_states, top_k, values), signature)


def _forward(model, details, hidden_states, top_k, values=False):
    def run(source_ids, target_ids, output_ids, encoder_mask, decoder_mask, cross_mask):
        out = model.call((source_ids, target_ids), return_attention=True,
                         return_qkv=details or values, return_hidden_states=hidden_states,
                         head_mask={"encoder": encoder_mask, "decoder": decoder_mask,
                                    "cross": cross_mask})
        if values and not details:  # V only: Q, K and the scores never leave the graph
            out = {name: value for name, value in out.items()
                   if name.partition("_")[2] not in ("q", "k", "scores", "position_bias")}
        logits = tf.cast(out.pop("logits"), tf.float64)  # (B, T, V), as NumPy's log_softmax
        shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)
        log_probs = shifted - tf.math.log(tf.reduce_sum(tf.exp(shifted), axis=-1, keepdims=True))
        out["log_probs"] = tf.gather(log_probs, output_ids, batch_dims=2)  # (B, T)
        if top_k:
            top = tf.math.top_k(log_probs, top_k)  # (B, T, k), ties: the lower id first
            out["top_ids"], out["top_log_probs"] = top.indices, top.values
        return out
    return run


def eager_forward(model, source_ids, target_ids, output_ids=None, head_mask=None, *,
                  details: bool = False, hidden_states: bool = False, top_k: int = 0,
                  values: bool = False) -> dict:
    """The reference for `forward`: the same dict, from the model called eagerly on the ids
    as given (no buckets), the log-softmax in NumPy."""
    c = model.config
    source_ids = np.asarray(source_ids, np.int32)
    target_ids = np.asarray(target_ids, np.int32)
    out = model((source_ids, target_ids), return_attention=True, return_qkv=details or values,
                return_hidden_states=hidden_states, head_mask=head_mask)
    out = {name: np.asarray(value) for name, value in out.items()
           if details or name.partition("_")[2] not in ("q", "k", "scores", "position_bias")}
    log_probs = log_softmax(out.pop("logits"))  # (B, T, V)
    if output_ids is None:
        output_ids = np.full_like(target_ids, c.pad_id)
    out["log_probs"] = np.take_along_axis(
        log_probs, np.asarray(output_ids, np.int64)[..., None], axis=-1)[..., 0]  # (B, T)
    if top_k:
        top = np.argsort(-log_probs, axis=-1, kind="stable")[..., :top_k]  # ties: lower id
        out["top_ids"] = top.astype(np.int32)
        out["top_log_probs"] = np.take_along_axis(log_probs, top, axis=-1)
    return out


def _cut(out: dict, n: int, t: int) -> dict:
    """The compiled pass's outputs cut back from the buckets to n source and t target ids."""
    sides = {"encoder": (n, n), "decoder": (t, t), "cross": (t, n)}
    cut = {}
    for name, value in out.items():
        kind, _, what = name.partition("_")
        if name == "source_mask":
            cut[name] = value[..., :n]  # (B, 1, 1, N)
        elif name in ("encoder_position_bias", "decoder_position_bias"):  # (1, H, len, len)
            length = n if kind == "encoder" else t
            cut[name] = value[..., :length, :length]
        elif name == "target_mask":
            cut[name] = value[:, :, :t, :t]  # (B, 1, T, T)
        elif name in ("log_probs", "top_ids", "top_log_probs"):
            cut[name] = value[:, :t]  # (B, T[, k])
        elif what == "hidden_states":
            cut[name] = value[:, :, :(n if kind == "encoder" else t)]  # (L + 1, B, len, d)
        elif what in ("attention", "scores"):
            q, k = sides[kind]
            cut[name] = value[:, :, :, :q, :k]  # (L, B, H, q_len, k_len)
        elif what == "q":
            cut[name] = value[:, :, :, :sides[kind][0]]  # (L, B, H, q_len, head_dim)
        elif what in ("k", "v"):
            cut[name] = value[:, :, :, :sides[kind][1]]  # (L, B, H, k_len, head_dim)
        else:
            raise AssertionError(f"the forward pass returned {name!r}, which has no cut")
    return cut
