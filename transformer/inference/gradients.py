"""Gradient attributions: what each source token and each target-prefix token contributed to
each output token's log-probability, from gradients (TensorFlow's GradientTape).

For output token t (its log-probability log p(y_t | x, y_<t) under teacher forcing), the
gradient g with respect to every token vector e (the token embedding's row for that position,
before the model scales it and adds its position: Transformer.encode's source_vectors,
Transformer.decode's target_vectors) gives, per token:

- "saliency" (Simonyan et al. 2014): ||g||_2;
- "input_x_gradient" (Shrikumar et al. 2017): ||e (.) g||_2, the elementwise product's norm
  (Captum's InputXGradient, aggregated over the embedding by its vector norm);
- "integrated_gradients" (Sundararajan et al. 2017): (e - b) . mean_s g(b + a_s (e - b)),
  signed, with the baseline b the padding token's vector at every position (source and target
  prefix together) and a_s = (s + 1/2) / steps (the midpoint rule). Completeness: the
  attributions of one output token sum to log p(x) - log p(baseline) up to the rule's error,
  O(1 / steps^2), which the result reports.

The rows of every output token and step are batched (MAX_BATCH_ROWS at a time): one backward
pass per batch, never a Python loop over steps. Row t's target columns are the decoder inputs
(the start token, then y_1 .. y_{T-1}); those after t are 0 (the look-ahead mask: no gradient
reaches them).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = ["DEFAULT_STEPS", "GRADIENT_METHODS", "MAX_STEPS", "gradient_attributions"]

GRADIENT_METHODS = ("saliency", "input_x_gradient", "integrated_gradients")
DEFAULT_STEPS = 32  # integrated gradients' steps
MAX_STEPS = 256
MAX_BATCH_ROWS = 64  # rows (output token x step) of one forward and backward pass


def _log_probs_and_grads(model, source_ids, target_ids, output_ids, rows, source_vectors,
                         target_vectors):
    """For batch row b: log p(output_ids[rows[b]]) at step rows[b] with the given token vectors
    (B, N, d_model) and (B, T, d_model); its gradients with respect to both. Returns NumPy
    (scores (B,), source grads (B, N, d_model), target grads (B, T, d_model))."""
    batch = int(source_vectors.shape[0])
    sources = tf.tile(tf.constant([source_ids], tf.int32), [batch, 1])  # (B, N)
    targets = tf.tile(tf.constant([target_ids], tf.int32), [batch, 1])  # (B, T)
    rows = tf.constant(rows, tf.int32)  # (B,)
    picked = tf.gather(tf.constant(output_ids, tf.int32), rows)  # (B,)
    source_vectors = tf.convert_to_tensor(source_vectors)
    target_vectors = tf.convert_to_tensor(target_vectors)
    with tf.GradientTape() as tape:
        tape.watch([source_vectors, target_vectors])
        enc = model.encode(sources, source_vectors=source_vectors)
        dec = model.decode(targets, enc["memory"], enc["mask"], target_vectors=target_vectors)
        logits = tf.gather(dec["logits"], rows, axis=1, batch_dims=1)  # (B, V): row b's step
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        scores = tf.gather(log_probs, picked, axis=1, batch_dims=1)  # (B,)
        total = tf.reduce_sum(scores)  # rows are independent: each row's gradient is its own
    source_grads, target_grads = tape.gradient(total, [source_vectors, target_vectors])
    return scores.numpy(), source_grads.numpy(), target_grads.numpy()


def _embedded(model, ids, side: str) -> np.ndarray:
    layer = model.source_embedding if side == "source" else model.target_embedding
    return layer.token_embedding(tf.constant([ids], tf.int32))[0].numpy()  # (len, d_model)


def gradient_attributions(ckpt, source: str, output_ids, *, method: str = "saliency",
                          steps: int = DEFAULT_STEPS, head_mask=None) -> dict:
    """Each output token's attribution to each source and target-prefix token, by `method`
    (GRADIENT_METHODS; the module docstring has the formulas), for the output ids a
    teacher-forced pass scores (Checkpoint.contributions picks them as Checkpoint.attention
    does: the typed target's, or the translation's). Returns a dict: "method",
    "source_tokens" (N), "target_tokens" (T: the decoder's inputs), "output_tokens" (T),
    "source" (T, N), "target" (T, T) (row t: output token t; target columns after t are 0),
    "log_probs" (T,); integrated gradients also "steps", "baseline_log_probs" (T,) and
    "completeness_gap" (T,): the sum of row t's attributions less (log_probs -
    baseline_log_probs)."""
    if method not in GRADIENT_METHODS:
        raise ValueError(f"method must be one of {', '.join(GRADIENT_METHODS)}, got {method!r}")
    if head_mask is not None:
        raise ValueError("gradient attributions of a model with silenced heads are not "
                         "computed here")
    steps = int(steps)
    if not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"steps must be 1 to {MAX_STEPS}, got {steps}")
    model, config = ckpt.model, ckpt.config
    source_ids = ckpt.encode_source(source)
    out = [int(i) for i in output_ids]
    if not out:
        raise ValueError("there is no output token to attribute")
    target_ids = [config.start_id] + out[:-1]  # teacher forcing: shifted right
    n, t_len = len(source_ids), len(out)
    e_src, e_tgt = _embedded(model, source_ids, "source"), _embedded(model, target_ids, "target")
    result = {"method": method,
              "source_tokens": ckpt.source_tokenizer.ids_to_pieces(source_ids),
              "target_tokens": ckpt.target_tokenizer.ids_to_pieces(target_ids),
              "output_tokens": ckpt.target_tokenizer.ids_to_pieces(out)}
    if method == "integrated_gradients":
        pad = _embedded(model, [config.pad_id], "source")[0]  # (d_model,)
        b_src = np.broadcast_to(pad, e_src.shape)
        b_tgt = np.broadcast_to(_embedded(model, [config.pad_id], "target")[0], e_tgt.shape)
        alphas = (np.arange(steps, dtype=np.float32) + 0.5) / steps  # (S,)
    else:
        b_src, b_tgt, alphas = 0.0, 0.0, np.ones(1, np.float32)
    # Every (output token, step) is one row; the rows go through in batches.
    rows = [(t, a) for t in range(t_len) for a in alphas]
    scores = np.zeros(len(rows), np.float32)
    g_src = np.zeros((t_len, n, e_src.shape[-1]), np.float64)  # summed over the steps
    g_tgt = np.zeros((t_len, t_len, e_tgt.shape[-1]), np.float64)
    for start in range(0, len(rows), MAX_BATCH_ROWS):
        chunk = rows[start: start + MAX_BATCH_ROWS]
        a = np.array([alpha for _, alpha in chunk], np.float32)[:, None, None]  # (B, 1, 1)
        src = (b_src + a * (e_src - b_src)).astype(np.float32)  # (B, N, d_model)
        tgt = (b_tgt + a * (e_tgt - b_tgt)).astype(np.float32)  # (B, T, d_model)
        which = [t for t, _ in chunk]
        s, gs, gt = _log_probs_and_grads(model, source_ids, target_ids, out, which, src, tgt)
        scores[start: start + len(chunk)] = s
        for b, t in enumerate(which):
            g_src[t] += gs[b]
            g_tgt[t] += gt[b]
    if method == "integrated_gradients":
        g_src, g_tgt = g_src / steps, g_tgt / steps  # the mean gradient along the path
        source = np.einsum("tnd,nd->tn", g_src, e_src - b_src)  # (T, N)
        target = np.einsum("tjd,jd->tj", g_tgt, e_tgt - b_tgt)  # (T, T)
        log_probs = _scores_at(ckpt, source_ids, target_ids, out, e_src, e_tgt)
        baseline = _scores_at(ckpt, source_ids, target_ids, out, np.asarray(b_src),
                              np.asarray(b_tgt))
        result.update(steps=steps, baseline_log_probs=baseline,
                      completeness_gap=(source.sum(1) + target.sum(1)
                                        - (log_probs - baseline)).astype(np.float32))
    else:
        log_probs = scores
        if method == "saliency":
            source, target = np.linalg.norm(g_src, axis=-1), np.linalg.norm(g_tgt, axis=-1)
        else:
            source = np.linalg.norm(g_src * e_src, axis=-1)
            target = np.linalg.norm(g_tgt * e_tgt, axis=-1)
    target = np.tril(target)  # columns after t: no gradient reaches them (exactly 0)
    result.update(source=source.astype(np.float32), target=target.astype(np.float32),
                  log_probs=np.asarray(log_probs, np.float32))
    return result


def _scores_at(ckpt, source_ids, target_ids, output_ids, source_vectors, target_vectors):
    """(T,) log p(output token t) with these token vectors (one batch row per output token)."""
    t_len = len(output_ids)
    src = np.broadcast_to(source_vectors, (t_len,) + source_vectors.shape).astype(np.float32)
    tgt = np.broadcast_to(target_vectors, (t_len,) + target_vectors.shape).astype(np.float32)
    scores = []
    for start in range(0, t_len, MAX_BATCH_ROWS):
        end = min(start + MAX_BATCH_ROWS, t_len)
        s, _, _ = _log_probs_and_grads(ckpt.model, source_ids, target_ids, output_ids,
                                       list(range(start, end)), src[start:end], tgt[start:end])
        scores.append(s)
    return np.concatenate(scores)
