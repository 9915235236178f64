"""Attention knockout (Geva et al. 2023, "Dissecting Recall of Factual Associations"; here on an
encoder-decoder's cross-attention): OpenedModel.knockout.

At one decoder step t, chosen cross-attention edges are blocked: in the chosen decoder layers
and heads, position t may not attend to the chosen source tokens (the mask blocks them as it
blocks padding, so the softmax spreads the weight over the rest; a head barred from every
source token gets an all-zero row, as a fully masked row does, and adds nothing at the step,
where an additive mask alone would leave it uniform). The step's output
distribution is compared with the unblocked one, and the translation is continued greedily
from the token the blocked step picks (later steps unblocked): what the edges carried, and
where the output goes without it."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer.inference.maps import scored_ids
from transformer.inference.search_ours import never_emitted

__all__ = ["knockout"]

TOP_K = 5  # alternatives listed before and after


def _cross_masks(memory_mask, layers: int, heads: int, t_len: int, step: int,
                 blocked_layers, blocked_heads, positions):
    """One cross-attention mask per decoder layer: memory_mask itself in the layers left alone;
    in the blocked ones, memory_mask broadcast to (1, H, T, N) with 0 at (head, step, position)
    for the blocked heads and positions."""
    blocked = np.array(np.broadcast_to(memory_mask.numpy(),
                                       (1, heads, t_len, memory_mask.shape[-1])), np.float32)
    for h in blocked_heads:
        blocked[0, h, step, list(positions)] = 0.0
    blocked = tf.constant(blocked)
    return [blocked if layer in blocked_layers else memory_mask for layer in range(layers)]


def _checked(values, size: int, what: str) -> list[int]:
    values = sorted({int(v) for v in values})
    if not values:
        raise ValueError(f"pick at least one {what}")
    if values[0] < 0 or values[-1] >= size:
        raise ValueError(f"{what}s must be 0 to {size - 1}, got {values}")
    return values


def knockout(ckpt, source: str, target: str | None = None, *, step: int, layers, source_positions,
             heads=None, output_ids=None, max_steps: int | None = None) -> dict:
    """Block the cross-attention of decoder step `step` to `source_positions` (indices of the
    source's ids) in decoder `layers` and `heads` (default: every head), on the output ids
    OpenedModel.attention would score. Returns a dict: "step", "output_tokens" (T), "token"
    (the step's output token), "log_prob" and "log_prob_knocked" (its log-probability without
    and with the knockout), "top" and "top_knocked" (each the TOP_K (piece, id, probability),
    most probable first), "translation" and "translation_knocked" (dicts of "token_ids",
    "tokens", "text": the output as it is, and the steps before `step` followed by the knocked
    step's argmax and a greedy continuation, never padding or <start> as the model's greedy,
    at most max_steps tokens in all, default the output's length + 10 within the model's step
    budget)."""
    model, config = ckpt.model, ckpt.config
    out = [int(i) for i in scored_ids(ckpt, source, target, output_ids)]
    if not 0 <= int(step) < len(out):
        raise ValueError(f"step must be 0 to {len(out) - 1}, got {step}")
    step = int(step)
    source_ids = ckpt.encode_source(source)
    blocked_layers = _checked(layers, config.num_decoder_layers, "decoder layer")
    blocked_heads = _checked(range(config.num_heads) if heads is None else heads,
                             config.num_heads, "head")
    positions = _checked(source_positions, len(source_ids), "source position")
    enc = model.encode(tf.constant([source_ids], tf.int32))
    memory, memory_mask = enc["memory"], enc["mask"]
    prefix = [config.start_id] + out[:step]  # the decoder's inputs up to the step
    masks = _cross_masks(memory_mask, config.num_decoder_layers, config.num_heads, len(prefix),
                         step, blocked_layers, blocked_heads, positions)
    ids = tf.constant([prefix], tf.int32)
    clean = model.decode(ids, memory, memory_mask)["logits"][0, -1]
    knocked = model.decode(ids, memory, memory_mask, cross_masks=masks)["logits"][0, -1]
    tok = ckpt.target_tokenizer

    def top(logits):
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32)).numpy()
        best = np.argsort(-log_probs, kind="stable")[:TOP_K]
        pieces = tok.ids_to_pieces([int(i) for i in best])
        return log_probs, [(p, int(i), float(np.exp(log_probs[i]))) for p, i in zip(pieces,
                                                                                      best)]

    clean_lp, clean_top = top(clean)
    knocked_lp, knocked_top = top(knocked)
    steps = min(ckpt.step_budget(), len(out) + 10) if max_steps is None else int(max_steps)
    banned = never_emitted(config)

    def pick(log_probs) -> int:  # as the model's greedy: never padding or <start>
        allowed = np.array(log_probs, np.float32)
        allowed[banned] = -np.inf
        return int(allowed.argmax())

    ids_after = out[:step] + [pick(knocked_lp)]
    while ids_after[-1] != config.end_id and len(ids_after) < steps:
        logits = model.decode(tf.constant([[config.start_id] + ids_after], tf.int32), memory,
                              memory_mask)["logits"][0, -1]
        ids_after.append(pick(logits.numpy()))

    def translation(ids):
        return {"token_ids": ids, "tokens": tok.ids_to_pieces(ids), "text": tok.decode(ids)}

    return {"step": step, "output_tokens": tok.ids_to_pieces(out), "token": tok.ids_to_pieces(
                [out[step]])[0], "layers": blocked_layers, "heads": blocked_heads,
            "source_positions": positions,
            "log_prob": float(clean_lp[out[step]]), "log_prob_knocked": float(knocked_lp[out[step]]),
            "top": clean_top, "top_knocked": knocked_top,
            "translation": translation(out), "translation_knocked": translation(ids_after)}
