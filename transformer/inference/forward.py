"""The teacher-forced forward pass the pages use, compiled once per architecture and shared.

`forward` runs Transformer.call (return_attention, and on request return_qkv and
return_hidden_states) with the head masks as tensor inputs, inside one tf.function per
architecture (config) and set of outputs, kept with the decode loops
(transformer.inference.compiled.shared_function): the model's variables are inputs, so every model
of one config runs the same trace with its own weights, and a head mask is a tensor, not a
retrace. Under XLA (compiled.JIT_COMPILE), as decoding does, the source is padded to its bucket
(16, 32, 64, ...) and the decoder input to its own, so that XLA compiles once per bucket, and the
results are sliced back to the given lengths (without XLA both run as they are:
compiled.padded_to_buckets):
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
from transformer.inference import compiled
from transformer.inference.compiled import pad_to, shared_function, source_bucket, target_bucket
from transformer.inference.numerics import log_softmax

__all__ = ["eager_forward", "forward", "forward_function"]

QKV = ("q", "k", "v", "scores")


def forward(model, source_ids, target_ids, output_ids=None, head_mask=None, *,
            details: bool = False, hidden_states: bool = False, top_k: int = 0,
            values: bool = False, detail_of: tuple[str, int] | None = None) -> dict:
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
    detail_of=(kind, layer) (with details): that kind's "<kind>_q"/"_k"/"_v"/"_scores" of that
    layer alone, (1, B, H, ...), and no other kind's: what a page that shows one layer needs,
    from one trace for every layer (the layer is an input), without the other layers' copies
    (for a 12+12-layer model and a 400-token source, 550 MB of details against 40 MB).

    source_ids (B, N), target_ids (B, T): int ids, already padded to a rectangle (padded here to
    their buckets, and cut back). head_mask: {kind: (layers, heads)}, any subset.
    """
    model = compiled.built(model)
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
    masks = compiled.head_mask_tensors(model, head_mask)
    chosen = () if detail_of is None else (tf.constant(_detail_layers(c, details, *detail_of)),)
    fn = forward_function(model, details=details, hidden_states=hidden_states,
                          top_k=min(top_k, c.tgt_vocab_size), values=values,
                          one_layer=detail_of is not None)
    out = fn(model, tf.constant(pad_to(source_ids, width_n, c.pad_id)),
             tf.constant(pad_to(target_ids, width_t, c.pad_id)),
             tf.constant(pad_to(output_ids, width_t, c.pad_id)),
             *(masks[kind] for kind in KIND_NAMES), *chosen)
    if detail_of is not None:  # the other kinds' layers (one each) were picked only to be left
        out = {name: value for name, value in out.items()
               if name.partition("_")[2] not in QKV or name.startswith(detail_of[0] + "_")}
    return _cut({name: value.numpy() for name, value in out.items()}, n, t)


def _detail_layers(c, details: bool, kind: str, layer: int) -> list[int]:
    """The (3,) layer input of the one-layer details pass: `layer` for `kind`, 0 for the
    others (whose details are dropped); ValueError for a layer the kind does not have."""
    counts = layer_counts(c)
    if not details:
        raise ValueError("detail_of picks the layer of the details: pass details=True with it")
    if kind not in counts:
        raise ValueError(f"detail_of's kind must be one of {sorted(counts)}, got {kind!r}")
    if not 0 <= int(layer) < counts[kind]:
        raise ValueError(f"the {kind} kind has layers 0-{counts[kind] - 1}, got {layer}")
    return [int(layer) if name == kind else 0 for name in KIND_NAMES]


def forward_function(model, *, details: bool = False, hidden_states: bool = False,
                     top_k: int = 0, values: bool = False, one_layer: bool = False):
    """The shared compiled forward pass of this model's architecture with these outputs (a
    compiled.SharedFunction: call it as fn(model, source_ids, target_ids, output_ids,
    encoder_mask, decoder_mask, cross_mask[, layers]); .tracing_count() counts its traces).
    one_layer (with details): the details of one layer per kind, the (3,) int32 `layers`
    input (in KIND_NAMES' order) saying which."""
    c = model.config
    values = values and not details  # details hand out V already
    one_layer = one_layer and details
    kind = ("forward" + ("_details" if details else "") + ("_layer" if one_layer else "")
            + ("_values" if values else "") + ("_hidden" if hidden_states else "")
            + (f"_top{top_k}" if top_k else ""))
    layers = layer_counts(c)
    signature = ([tf.TensorSpec([None, None], tf.int32)] * 3 +
                 [tf.TensorSpec([layers[k], c.num_heads], tf.float32) for k in KIND_NAMES] +
                 [tf.TensorSpec([len(KIND_NAMES)], tf.int32)] * one_layer)
    return shared_function(
        model, kind, lambda m: _forward(m, details, hidden_states, top_k, values, one_layer),
        signature)


def _forward(model, details, hidden_states, top_k, values=False, one_layer=False):
    def run(source_ids, target_ids, output_ids, encoder_mask, decoder_mask, cross_mask,
            layers=None):
        picked = {kind: layers[i] for i, kind in enumerate(KIND_NAMES)} if one_layer else None
        out = model.call((source_ids, target_ids), return_attention=True,
                         return_qkv=details or values, return_hidden_states=hidden_states,
                         head_mask={"encoder": encoder_mask, "decoder": decoder_mask,
                                    "cross": cross_mask}, qkv_layers=picked)
        if values and not details:  # V only: Q, K and the scores never leave the graph
            out = {name: value for name, value in out.items()
                   if name.partition("_")[2] not in ("q", "k", "scores", "position_bias")}
        out.update(_scored(out.pop("logits"), output_ids, top_k))
        return out
    return run


def _scored(logits, output_ids, top_k: int) -> dict:
    """log_probs (B, T) of output_ids (and with top_k "top_ids", "top_log_probs" (B, T, k))
    from logits (B, T, V) float32: the log-softmax in float64, as NumPy's log_softmax and the
    decode steps compute it, one row at a time (tf.map_fn), so that no (B, T, V) array of
    float64 exists: for a 256,206-token vocabulary and 205 target positions that is 420 MB,
    and the whole-matrix form held four of them at once."""
    batch, length = tf.shape(logits)[0], tf.shape(logits)[1]
    rows = tf.reshape(logits, [batch * length, -1])  # (B * T, V): no copy
    ids = tf.reshape(output_ids, [-1])  # (B * T,)

    def row(args):
        logit, chosen = args  # (V,) float32, () int32
        x = tf.cast(logit, tf.float64)
        shifted = x - tf.reduce_max(x)
        log_probs = shifted - tf.math.log(tf.reduce_sum(tf.exp(shifted)))  # (V,)
        scored = {"log_probs": tf.gather(log_probs, chosen)}
        if top_k:
            top = tf.math.top_k(log_probs, top_k)  # (k,), ties: the lower id first
            scored["top_ids"], scored["top_log_probs"] = top.indices, top.values
        return scored

    signature = {"log_probs": tf.TensorSpec([], tf.float64)}
    if top_k:
        signature.update(top_ids=tf.TensorSpec([top_k], tf.int32),
                         top_log_probs=tf.TensorSpec([top_k], tf.float64))
    scored = tf.map_fn(row, (rows, ids), fn_output_signature=signature, parallel_iterations=4)
    return {name: tf.reshape(value, tf.concat([[batch, length], tf.shape(value)[1:]], 0))
            for name, value in scored.items()}


def eager_forward(model, source_ids, target_ids, output_ids=None, head_mask=None, *,
                  details: bool = False, hidden_states: bool = False, top_k: int = 0,
                  values: bool = False, detail_of: tuple[str, int] | None = None) -> dict:
    """The reference for `forward`: the same dict, from the model called eagerly on the ids
    as given (no buckets), the log-softmax in NumPy."""
    c = model.config
    if detail_of is not None:
        _detail_layers(c, details, *detail_of)  # ValueError as forward's
    source_ids = np.asarray(source_ids, np.int32)
    target_ids = np.asarray(target_ids, np.int32)
    out = model((source_ids, target_ids), return_attention=True, return_qkv=details or values,
                return_hidden_states=hidden_states, head_mask=head_mask)
    out = {name: np.asarray(value) for name, value in out.items()
           if details or name.partition("_")[2] not in ("q", "k", "scores", "position_bias")}
    if detail_of is not None:  # the chosen kind's layer alone, (1, B, H, ...)
        kind, layer = detail_of
        out = {name: (value[layer:layer + 1] if name.startswith(kind + "_") else None)
               if name.partition("_")[2] in QKV else value for name, value in out.items()}
        out = {name: value for name, value in out.items() if value is not None}
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
