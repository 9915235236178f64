"""What each decoder layer predicts (the logit lens): OpenedModel.layer_predictions.

Every decoder layer's output, read as if it were the last: through the decoder's final norm and
the output projection (Transformer.final_norm, then Transformer.project, which multiplies by
T5's output_scale and adds any logits bias), then a softmax, for every step of one
teacher-forced pass (the model's own translation, or a typed target).

The final norm per norm_first setting:
- post-LN (norm_first False, the paper's): final_norm is the identity; each layer's output has
  already been through that layer's own last LayerNorm, so it is projected as it is.
- pre-LN (norm_first True: T5, mBART, ...): the residual stream is normalised only by the
  stack's closing norm (decoder_norm), so layers 1 .. L-1 go through it here. The stack's last
  hidden state as Transformer.decode returns it (hidden_states[L]) is decoder_norm's output
  already: it is projected as it is, never normalised twice.
Either way the last layer's row is the model's own output distribution.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer.core.masking import pad_ids
from transformer.inference.forward import forward
from transformer.inference.maps import scored_ids
from transformer.inference.numerics import check_forward
from transformer.inference.outputs import LayerPredictions

__all__ = ["layer_predictions", "top_k_ids"]


# Logits projected and read in one go: 2^22 cells, 16 MB of float32 and 32 MB for each float64
# temporary (opus-mt's 59,514 tokens: 70 rows; NLLB's 256,206: 16), whatever the layers and
# the length: 12 layers x 205 steps of NLLB's at once held 1.6 GB.
_LOGIT_CELLS = 1 << 22


def top_k_ids(log_probs: np.ndarray, k: int) -> np.ndarray:
    """The k largest entries' ids of each row of log_probs (..., V) (or of logits: the same
    order), largest first, ties: the lower id first (as decoding's top-k): (..., k) int64.
    Partial sort: every id tied with the k-th value is a candidate, so a tie at the boundary
    still keeps the lower ids."""
    k = min(k, log_probs.shape[-1])
    rows = log_probs.reshape(-1, log_probs.shape[-1])  # (rows, V)
    kth = -np.partition(-rows, k - 1, axis=-1)[:, k - 1:k]  # (rows, 1): the k-th largest
    top = np.empty((rows.shape[0], k), np.int64)
    for r, (row, bound) in enumerate(zip(rows, kth)):
        candidates = np.flatnonzero(row >= bound)  # ascending ids
        order = np.argsort(-row[candidates], kind="stable")[:k]  # stable: lower id first
        top[r] = candidates[order]
    return top.reshape(log_probs.shape[:-1] + (k,))


def layer_predictions(ckpt, source: str, target: str | None = None, k: int = 5,
                      head_mask=None, output_ids=None) -> dict:
    """Per decoder layer and step, the k tokens that layer's output predicts and the rank of
    the token chosen (the translation's, or the typed target's): see the module docstring.

    With target=None the tokens are the model's greedy translation (output_ids: its ids when
    the caller has them, as for OpenedModel.attention). Returns a dict:

        "source_tokens" (N), "target_tokens" (T: the decoder's inputs, <s> first),
        "output_tokens" (T: the token chosen at each step, </s> last); their ids
        "source_ids", "target_ids", "output_ids" int32;
        "layers": list over the L decoder layers of a list over the T steps of the top-k
            [(token, probability), ...], most probable first (ties: the lower id first);
        "top_ids" (L, T, k) int32 and "top_probs" (L, T, k) float64: the same as arrays;
        "chosen_rank" (L, T) int32: how many tokens that layer gives a higher probability than
            the chosen one (0: the chosen token is its argmax);
        "chosen_probs" (L, T) float64: the probability it gives the chosen token.

    Row L - 1 is the model's own output distribution: its "chosen_probs" are
    exp(OpenedModel.attention(...)["log_probs"]), and for the model's greedy translation its
    "chosen_rank" is 0 everywhere. k is cut to the vocabulary size.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    config, model = ckpt.config, ckpt.model
    output_ids = scored_ids(ckpt, source, target, output_ids, head_mask)
    source_ids = ckpt.encode_source(source)
    target_ids = [config.start_id] + list(output_ids[:-1])  # shifted right
    n, t = len(source_ids), len(target_ids)
    out = forward(model, pad_ids([source_ids], config.pad_id), pad_ids([target_ids], config.pad_id),
                  pad_ids([output_ids], config.pad_id), head_mask, hidden_states=True)
    check_forward(out, 0, n, t)
    hidden = out["decoder_hidden_states"][1:, 0, :t]  # (L, T, d_model): each layer's output
    layers = hidden.shape[0]
    chosen = np.asarray(output_ids, np.int64)  # (T,)
    k = min(k, config.tgt_vocab_size)
    top_ids = np.empty((layers, t, k), np.int32)
    top_probs = np.empty((layers, t, k), np.float64)
    chosen_rank = np.empty((layers, t), np.int32)
    chosen_probs = np.empty((layers, t), np.float64)
    x = tf.constant(hidden)  # (L, T, d_model)
    # The last layer's is final_norm's output already (see the module docstring).
    x = tf.concat([model.final_norm(x[:-1]), x[-1:]], axis=0) if layers > 1 else x
    x = tf.reshape(x, [layers * t, -1])  # (L * T, d_model): row i * T + s is layer i, step s
    chosen = np.tile(chosen, layers)  # (L * T,)
    flat = [a.reshape(layers * t, *a.shape[2:])
            for a in (top_ids, top_probs, chosen_rank, chosen_probs)]  # views of the results
    per_call = max(1, _LOGIT_CELLS // config.tgt_vocab_size)  # rows projected at once
    for start in range(0, layers * t, per_call):
        rows = slice(start, min(start + per_call, layers * t))
        logits = model.project(x[None, rows])[0].numpy()  # (r, V) float32
        picked = chosen[rows]
        at = np.arange(len(picked))
        # log_softmax as decoding's (float64); the order is the logits' own
        shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)  # (r, V)
        log_norm = np.log(np.exp(shifted).sum(axis=-1))  # (r,)
        top = top_k_ids(logits, k)  # (r, k)
        flat[0][rows] = top
        flat[1][rows] = np.exp(np.take_along_axis(shifted, top, axis=-1) - log_norm[:, None])
        flat[2][rows] = (logits > logits[at, picked][:, None]).sum(axis=-1)
        flat[3][rows] = np.exp(shifted[at, picked] - log_norm)
    pieces = ckpt.target_tokenizer.ids_to_pieces
    return LayerPredictions({
        "source_tokens": ckpt.source_tokenizer.ids_to_pieces(source_ids),
        "target_tokens": pieces(target_ids),
        "output_tokens": pieces(output_ids),
        "source_ids": np.asarray(source_ids, np.int32),
        "target_ids": np.asarray(target_ids, np.int32),
        "output_ids": np.asarray(output_ids, np.int32),
        "layers": [[list(zip(pieces(top_ids[i, s].tolist()), top_probs[i, s].tolist()))
                    for s in range(t)] for i in range(layers)],
        "top_ids": top_ids,
        "top_probs": top_probs,
        "chosen_rank": chosen_rank,
        "chosen_probs": chosen_probs,
    })
