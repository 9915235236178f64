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

Every row (an output token at one step) goes through one compiled forward and backward pass
(shared by every model of the architecture), batched: saliency's and input x gradient's rows
together, integrated gradients' steps per output token together (never a Python loop over
steps), split only where one batch's activations would pass _ACTIVATION_CELLS. The pass
computes only what the row's gradient needs: the decoder on the inputs up to its step (the
look-ahead mask makes later ones irrelevant), the output projection of its one step, no
weight gradients. Row t's target columns are the decoder inputs (the start token, then
y_1 .. y_{T-1}); those after t are 0 (the look-ahead mask: no gradient reaches them).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer.inference.decoding import shared_function

__all__ = ["DEFAULT_STEPS", "GRADIENT_METHODS", "MAX_STEPS", "gradient_attributions"]

GRADIENT_METHODS = ("saliency", "input_x_gradient", "integrated_gradients")
DEFAULT_STEPS = 32  # integrated gradients' steps
MAX_STEPS = 256
_ACTIVATION_CELLS = 1 << 26  # float32 values one batch's forward pass keeps (256 MB)


def _gradient_step(model):
    """The compiled pass: for batch row b, log p(picked[b]) at step rows[b] with the given token
    vectors, and its gradients with respect to them (rows are independent, so the gradient of
    their sum is each row's own). Only the weights' values are read: the tape watches the token
    vectors alone, so no weight gradient is computed."""
    def run(sources, targets, rows, picked, source_vectors, target_vectors):
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch([source_vectors, target_vectors])
            enc = model.encode(sources, source_vectors=source_vectors)
            dec = model.decode(targets, enc["memory"], enc["mask"],
                               target_vectors=target_vectors, return_hidden_states=True)
            # (B, 1, d_model): row b's step of the last hidden state (after any final norm);
            # only it goes through the output projection (the all-steps logits go unused)
            final = tf.gather(dec["hidden_states"][-1], rows[:, None], axis=1, batch_dims=1)
            logits = model.project(final)[:, 0]  # (B, V)
            log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
            scores = tf.gather(log_probs, picked, axis=1, batch_dims=1)  # (B,)
            total = tf.reduce_sum(scores)
        source_grads, target_grads = tape.gradient(total, [source_vectors, target_vectors])
        return {"scores": scores, "source": source_grads, "target": target_grads}
    return run


def _gradient_function(model):
    """The gradient pass of this model's architecture, compiled once and shared
    (decoding.shared_function)."""
    d_model = model.config.d_model
    ids, vectors = tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None, d_model],
                                                                       tf.float32)
    signature = [ids, ids, tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32),
                 vectors, vectors]
    return shared_function(model, "gradients", _gradient_step, signature)


def _log_probs_and_grads(model, source_ids, target_ids, output_ids, rows, source_vectors,
                         target_vectors):
    """For batch row b: log p(output_ids[rows[b]]) at step rows[b] with the given token vectors
    (B, N, d_model) and (B, T, d_model); its gradients with respect to both. Returns NumPy
    (scores (B,), source grads (B, N, d_model), target grads (B, T, d_model)); the decoder runs
    on the inputs up to the batch's last step only (the target grads after it are 0)."""
    batch, t_len = int(source_vectors.shape[0]), len(target_ids)
    rows = np.asarray(rows, np.int32)  # (B,)
    used = int(rows.max()) + 1  # decoder inputs any row of the batch can see
    sources = np.tile(np.asarray([source_ids], np.int32), (batch, 1))  # (B, N)
    targets = np.tile(np.asarray([target_ids[:used]], np.int32), (batch, 1))  # (B, used)
    picked = np.asarray(output_ids, np.int32)[rows]  # (B,)
    out = _gradient_function(model)(
        model, tf.constant(sources), tf.constant(targets), tf.constant(rows),
        tf.constant(picked), tf.constant(source_vectors, tf.float32),
        tf.constant(np.asarray(target_vectors)[:, :used], tf.float32))
    target_grads = np.zeros((batch, t_len, int(target_vectors.shape[-1])), np.float32)
    target_grads[:, :used] = out["target"].numpy()
    return out["scores"].numpy(), out["source"].numpy(), target_grads


def _batch_rows(model, source_len: int, target_len: int) -> int:
    """Rows of one pass: as many as keep the values its forward pass holds for the backward one
    (per layer and position about 4 d_model + dff, per layer and head the attention maps)
    within _ACTIVATION_CELLS."""
    c = model.config
    per_layer = (source_len + target_len) * (4 * c.d_model + c.dff) + c.num_heads * (
        source_len ** 2 + target_len ** 2 + target_len * source_len)
    layers = c.num_encoder_layers + c.num_decoder_layers
    return max(1, _ACTIVATION_CELLS // (per_layer * layers + c.tgt_vocab_size))


def _embedded(model, ids, side: str) -> np.ndarray:
    layer = model.source_embedding if side == "source" else model.target_embedding
    return layer.token_embedding(tf.constant([ids], tf.int32))[0].numpy()  # (len, d_model)


def gradient_attributions(ckpt, source: str, output_ids, *, method: str = "saliency",
                          steps: int = DEFAULT_STEPS, head_mask=None,
                          on_progress=None) -> dict:
    """Each output token's attribution to each source and target-prefix token, by `method`
    (GRADIENT_METHODS; the module docstring has the formulas), for the output ids a
    teacher-forced pass scores (Checkpoint.contributions picks them as Checkpoint.attention
    does: the typed target's, or the translation's). Returns a dict: "method",
    "source_tokens" (N), "target_tokens" (T: the decoder's inputs), "output_tokens" (T),
    "source" (T, N), "target" (T, T) (row t: output token t; target columns after t are 0),
    "log_probs" (T,); integrated gradients also "steps", "baseline_log_probs" (T,) and
    "completeness_gap" (T,): the sum of row t's attributions less (log_probs -
    baseline_log_probs). on_progress(done, total): called after each batch of rows (a
    progress bar's)."""
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
    # Every (output token, step) is one row (integrated gradients: also the input itself and
    # the baseline, alpha 1 and 0, for their log-probabilities). Saliency's rows go through
    # together; integrated gradients' go per output token (its steps and ends together, the
    # decoder cut after its step), each split only where the activations would not fit.
    ends = (1.0, 0.0) if method == "integrated_gradients" else ()
    rows = [(t, a, True) for t in range(t_len) for a in alphas]
    rows += [(t, a, False) for t in range(t_len) for a in ends]
    if method == "integrated_gradients":
        rows.sort(key=lambda row: row[0])  # stable: each token's path, then its two ends
    per_batch = _batch_rows(model, n, t_len)
    batches, start = [], 0
    while start < len(rows):
        stop = min(start + per_batch, len(rows))
        if method == "integrated_gradients":  # no batch spans two output tokens
            stop = next((i for i in range(start + 1, stop) if rows[i][0] != rows[start][0]),
                        stop)
        batches.append((start, stop))
        start = stop
    scores = np.zeros(len(rows), np.float32)
    g_src = np.zeros((t_len, n, e_src.shape[-1]), np.float64)  # summed over the steps
    g_tgt = np.zeros((t_len, t_len, e_tgt.shape[-1]), np.float64)
    for start, stop in batches:
        chunk = rows[start: stop]
        a = np.array([alpha for _, alpha, _ in chunk], np.float32)[:, None, None]  # (B, 1, 1)
        src = (b_src + a * (e_src - b_src)).astype(np.float32)  # (B, N, d_model)
        tgt = (b_tgt + a * (e_tgt - b_tgt)).astype(np.float32)  # (B, T, d_model)
        which = [t for t, _, _ in chunk]
        s, gs, gt = _log_probs_and_grads(model, source_ids, target_ids, out, which, src, tgt)
        scores[start: stop] = s
        for b, (t, _, on_path) in enumerate(chunk):
            if on_path:
                g_src[t] += gs[b]
                g_tgt[t] += gt[b]
        if on_progress is not None:
            on_progress(stop, len(rows))
    if method == "integrated_gradients":
        g_src, g_tgt = g_src / steps, g_tgt / steps  # the mean gradient along the path
        source = np.einsum("tnd,nd->tn", g_src, e_src - b_src)  # (T, N)
        target = np.einsum("tjd,jd->tj", g_tgt, e_tgt - b_tgt)  # (T, T)
        per_token = scores.reshape(t_len, steps + 2)  # each token's path, then alpha 1 and 0
        log_probs, baseline = per_token[:, steps], per_token[:, steps + 1]
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
