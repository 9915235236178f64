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
  O(1 / steps^2), which the result reports. By default (steps=None) the steps are chosen so
  that the answer is not mostly error: AUTO_STEPS in turn (32, 64, 128, 256), until every
  row's gap is within COMPLETE_WITHIN of its change (plus COMPLETE_NATS), or the last; the
  result says which were tried and whether the last was complete. (32 steps left the
  bundled model's default sentence a gap of 4.7 nats for a change of 5.07; 256, 0.11.)

Contrastive (foil_ids, Yin and Neubig 2022, "Interpreting Language Models with Contrastive
Explanations"): "why this token rather than that one?" For output step t with a foil f_t the
attributed function is log p(y_t) - log p(f_t), which is also the logit difference z(y_t) -
z(f_t) (the softmax's normaliser cancels); each method above then explains the difference
(integrated gradients' rows sum to its change from the baseline). A step without a foil (None)
keeps log p(y_t).

Every row (an output token at one point on the path) goes through a compiled pass (shared by
every model of the architecture), batched, never a Python loop over the steps:
- by point (_by_point): one forward pass per point, its backward vectorized over the output
  tokens (tape.batch_jacobian), several points to a pass; a row costs one backward, and the
  forward is paid once per point instead of once per (point, token);
- by token (_by_token), where one point's every output token would not fit one pass
  (_ACTIVATION_CELLS): up to a pass's worth of one token's points, the decoder run on the
  inputs up to its step only (the look-ahead mask makes later ones irrelevant) and only its
  step through the output projection.
Neither computes a weight gradient. Row t's target columns are the decoder inputs (the start
token, then y_1 .. y_{T-1}); those after t are 0 (the look-ahead mask: no gradient reaches
them).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer.inference.compiled import shared_function

__all__ = ["AUTO_STEPS", "COMPLETE_WITHIN", "DEFAULT_STEPS", "GRADIENT_METHODS", "MAX_STEPS",
           "NO_FOIL", "gradient_attributions", "is_complete"]

GRADIENT_METHODS = ("saliency", "input_x_gradient", "integrated_gradients")
DEFAULT_STEPS = None  # integrated gradients' steps: chosen until complete (AUTO_STEPS)
MAX_STEPS = 256
AUTO_STEPS = (32, 64, 128, 256)  # tried in turn when no steps are given
COMPLETE_WITHIN = 0.05  # a row is complete when |gap| <= this x |its change| + COMPLETE_NATS
COMPLETE_NATS = 0.01
_ACTIVATION_CELLS = 1 << 27  # float32 values one pass keeps, as _batch_rows counts them (512 MB)


def _gradient_step(model):
    """The compiled pass: for batch row b, log p(picked[b]) at step rows[b] with the given token
    vectors, and its gradients with respect to them (rows are independent, so the gradient of
    their sum is each row's own). Only the weights' values are read: the tape watches the token
    vectors alone, so no weight gradient is computed."""
    def run(sources, targets, rows, picked, foils, source_vectors, target_vectors):
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch([source_vectors, target_vectors])
            enc = model.encode(sources, source_vectors=source_vectors)
            dec = model.decode(targets, enc["memory"], enc["mask"],
                               target_vectors=target_vectors, return_hidden_states=True)
            # (B, 1, d_model): row b's step of the last hidden state (after any final norm);
            # only it goes through the output projection (the all-steps logits go unused)
            final = tf.gather(dec["hidden_states"][-1], rows[:, None], axis=1, batch_dims=1)
            scores, log_probs = _scores(model, final, picked[:, None], foils[:, None])
            scores, log_probs = scores[:, 0], log_probs[:, 0]  # (B,)
            total = tf.reduce_sum(scores)
        source_grads, target_grads = tape.gradient(total, [source_vectors, target_vectors])
        return {"scores": scores, "log_probs": log_probs, "source": source_grads,
                "target": target_grads}
    return run


NO_FOIL = -1  # a step's foil id where it has none: its score is log p(picked) alone


def _scores(model, final, picked, foils):
    """From the last hidden states final (B, K, d_model) through the output projection
    (float32 log-softmax): the attributed scores, log p(picked[b, k]) - log p(foils[b, k])
    (log p(picked) alone where the foil is NO_FOIL), and log p(picked): each (B, K)."""
    log_probs = tf.nn.log_softmax(tf.cast(model.project(final), tf.float32), axis=-1)
    chosen = tf.gather(log_probs, picked[:, :, None], axis=2, batch_dims=2)[..., 0]
    foil = tf.gather(log_probs, tf.maximum(foils, 0)[:, :, None], axis=2, batch_dims=2)[..., 0]
    return chosen - tf.where(foils >= 0, foil, tf.zeros_like(foil)), chosen


def _compiled(model, kind: str, make_step, id_ranks):
    """A gradient pass of this model's architecture, compiled once and shared
    (compiled.shared_function): int32 id inputs of the given ranks (their dimensions open),
    then the source and target token vectors (B, len, d_model)."""
    vectors = tf.TensorSpec([None, None, model.config.d_model], tf.float32)
    ids = [tf.TensorSpec([None] * rank, tf.int32) for rank in id_ranks]
    return shared_function(model, kind, make_step, ids + [vectors, vectors])


def _gradient_function(model):
    """The by-token pass: sources, targets (B, len), rows, picked, foils (B,)."""
    return _compiled(model, "gradients", _gradient_step, (2, 2, 1, 1, 1))


def _log_probs_and_grads(model, source_ids, target_ids, output_ids, rows, source_vectors,
                         target_vectors, foil_ids=None, log_probs: list | None = None):
    """For batch row b: log p(output_ids[rows[b]]) at step rows[b] with the given token vectors
    (B, N, d_model) and (B, T, d_model) (less log p(foil_ids[rows[b]]) where foil_ids has one
    that is not NO_FOIL); its gradients with respect to both. Returns NumPy (scores (B,),
    source grads (B, N, d_model), target grads (B, T, d_model)); the decoder runs on the inputs
    up to the batch's last step only (the target grads after it are 0). log_probs: a list the
    rows' log p(output_ids[rows[b]]) (B,) is appended to."""
    batch, t_len = int(source_vectors.shape[0]), len(target_ids)
    rows = np.asarray(rows, np.int32)  # (B,)
    used = int(rows.max()) + 1  # decoder inputs any row of the batch can see
    sources = np.tile(np.asarray([source_ids], np.int32), (batch, 1))  # (B, N)
    targets = np.tile(np.asarray([target_ids[:used]], np.int32), (batch, 1))  # (B, used)
    picked = np.asarray(output_ids, np.int32)[rows]  # (B,)
    foils = _foils(foil_ids, len(output_ids))[rows]  # (B,)
    out = _gradient_function(model)(
        model, tf.constant(sources), tf.constant(targets), tf.constant(rows),
        tf.constant(picked), tf.constant(foils), tf.constant(source_vectors, tf.float32),
        tf.constant(np.asarray(target_vectors)[:, :used], tf.float32))
    target_grads = np.zeros((batch, t_len, int(target_vectors.shape[-1])), np.float32)
    target_grads[:, :used] = out["target"].numpy()
    if log_probs is not None:
        log_probs.append(out["log_probs"].numpy())
    return out["scores"].numpy(), out["source"].numpy(), target_grads


def _foils(foil_ids, steps: int) -> np.ndarray:
    """(steps,) int32: each step's foil id, NO_FOIL where there is none."""
    if foil_ids is None:
        return np.full(steps, NO_FOIL, np.int32)
    return np.asarray([NO_FOIL if f is None else int(f) for f in foil_ids], np.int32)


def _batch_rows(model, source_len: int, target_len: int) -> int:
    """Rows of one pass: as many as keep the values its forward pass holds for the backward one
    (per layer and position about 4 d_model + dff, per layer and head the attention maps)
    within _ACTIVATION_CELLS."""
    c = model.config
    per_layer = (source_len + target_len) * (4 * c.d_model + c.dff) + c.num_heads * (
        source_len ** 2 + target_len ** 2 + target_len * source_len)
    layers = c.num_encoder_layers + c.num_decoder_layers
    return max(1, _ACTIVATION_CELLS // (per_layer * layers + c.tgt_vocab_size))


def _jacobian_step(model):
    """The compiled whole-sentence pass: for each batch row (one point on the path, every row
    the same ids), every output token's log-probability at its step and its gradients with
    respect to the row's token vectors: one forward pass, then the backward pass vectorized
    over the output tokens (tape.batch_jacobian: pfor), not one forward per output token.

    Output token t's log-probability depends on the last hidden states h (B, T, d_model) only
    through h[:, t] (the output projection and softmax act per step), so the projection's
    backward runs once: g = d(sum_t score_t)/dh holds each step's own gradient in its own row,
    and score_t's gradient with respect to the token vectors is that of h[:, t] . g[:, t]
    (g held constant), which batch_jacobian vectorizes. (Vectorizing the projection's backward
    too would cost T times a (T, vocabulary) matmul per point.)"""
    def run(sources, targets, picked, foils, source_vectors, target_vectors):
        n = tf.shape(source_vectors)[1]
        vectors = tf.concat([source_vectors, target_vectors], axis=1)  # (B, N + T, d_model)
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(vectors)
            enc = model.encode(sources, source_vectors=vectors[:, :n])
            dec = model.decode(targets, enc["memory"], enc["mask"],
                               target_vectors=vectors[:, n:], return_hidden_states=True)
            final = dec["hidden_states"][-1]  # (B, T, d_model), after any final norm
            with tf.GradientTape(watch_accessed_variables=False) as head:
                head.watch(final)
                scores, log_probs = _scores(model, final, picked, foils)  # (B, T) each
            step_grads = tf.stop_gradient(head.gradient(scores, final))  # (B, T, d_model)
            linear = tf.reduce_sum(final * step_grads, axis=-1)  # (B, T): h_t . g_t
        grads = tape.batch_jacobian(linear, vectors)  # (B, T, N + T, d_model)
        return {"scores": scores, "log_probs": log_probs, "source": grads[:, :, :n],
                "target": grads[:, :, n:]}
    return run


def _jacobian_function(model):
    """The by-point pass: sources, targets, picked, foils (B, len)."""
    return _compiled(model, "gradients_jacobian", _jacobian_step, (2, 2, 2, 2))


def prepare_pass(model) -> None:
    """Trace and run the whole-sentence gradient pass (_jacobian_step) once, on one token: what
    the Contributions and Decoding pages' gradients call first (transformer.inference.prepare
    runs it in the background, so that their first use does not wait for the trace)."""
    c = model.config
    token = 1 if c.pad_id == 0 else 0  # any id but padding
    _jacobian_function(model)(
        model, tf.constant([[token]], tf.int32), tf.constant([[c.start_id]], tf.int32),
        tf.constant([[c.end_id]], tf.int32), tf.constant([[NO_FOIL]], tf.int32),
        tf.constant(_embedded(model, [token], "source")[None], tf.float32),
        tf.constant(_embedded(model, [c.start_id], "target")[None], tf.float32))


def _by_point(model, source_ids, target_ids, output_ids, foils, points, vectors, per_batch,
              on_progress):
    """Rows batched by point: each pass takes whole points (per_batch // T of them), every
    output token of each (_jacobian_step). Returns the attributed scores (P, T), log p of the
    output tokens (P, T), and the gradients summed over the points on the path: source (T, N,
    d_model), target (T, T, d_model)."""
    t_len, count = len(output_ids), len(points)
    scores = np.zeros((count, t_len), np.float32)
    log_probs = np.zeros((count, t_len), np.float32)
    g_src = g_tgt = 0.0
    step = max(1, per_batch // t_len)
    for start in range(0, count, step):
        chunk = points[start: start + step]
        src, tgt = vectors([alpha for alpha, _ in chunk])
        batch = len(chunk)
        out = _jacobian_function(model)(
            model, tf.constant(np.tile([source_ids], (batch, 1)), tf.int32),
            tf.constant(np.tile([target_ids], (batch, 1)), tf.int32),
            tf.constant(np.tile([output_ids], (batch, 1)), tf.int32),
            tf.constant(np.tile([foils], (batch, 1)), tf.int32),
            tf.constant(src), tf.constant(tgt))
        scores[start: start + batch] = out["scores"].numpy()
        log_probs[start: start + batch] = out["log_probs"].numpy()
        on_path = np.array([p for _, p in chunk], np.float64)[:, None, None, None]
        g_src = g_src + (out["source"].numpy() * on_path).sum(0)  # (T, N, d_model)
        g_tgt = g_tgt + (out["target"].numpy() * on_path).sum(0)  # (T, T, d_model)
        if on_progress is not None:
            on_progress((start + batch) * t_len, count * t_len)
    return scores, log_probs, g_src, g_tgt


def _by_token(model, source_ids, target_ids, output_ids, foils, points, vectors, per_batch,
              on_progress):
    """Rows batched by output token, where one point's every output token would not fit one
    pass (long sentences on big models): each pass takes up to per_batch of one token's points
    (_gradient_step, the decoder cut after the token's step). Returns what _by_point does."""
    t_len, count = len(output_ids), len(points)
    scores = np.zeros((count, t_len), np.float32)
    log_probs = np.zeros((count, t_len), np.float32)
    g_src = np.zeros((t_len, len(source_ids), model.config.d_model), np.float64)
    g_tgt = np.zeros((t_len, t_len, model.config.d_model), np.float64)
    done = 0
    for t in range(t_len):
        for start in range(0, count, per_batch):
            chunk = points[start: start + per_batch]
            src, tgt = vectors([alpha for alpha, _ in chunk])
            chosen = []
            s, gs, gt = _log_probs_and_grads(model, source_ids, target_ids, output_ids,
                                             [t] * len(chunk), src, tgt, foils, chosen)
            scores[start: start + len(chunk), t] = s
            log_probs[start: start + len(chunk), t] = chosen[0]
            on_path = np.array([p for _, p in chunk], np.float64)[:, None, None]
            g_src[t] += (gs * on_path).sum(0)
            g_tgt[t] += (gt * on_path).sum(0)
            done += len(chunk)
            if on_progress is not None:
                on_progress(done, count * t_len)
    return scores, log_probs, g_src, g_tgt


def _embedded(model, ids, side: str) -> np.ndarray:
    layer = model.source_embedding if side == "source" else model.target_embedding
    return layer.token_embedding(tf.constant([ids], tf.int32))[0].numpy()  # (len, d_model)


def is_complete(result: dict) -> bool:
    """Whether every row of an integrated-gradients result sums to its change in
    log-probability (contrastive: in the difference of log-probabilities, "scores") within
    COMPLETE_WITHIN of the change (plus COMPLETE_NATS)."""
    now, before = (("scores", "baseline_scores") if "scores" in result
                   else ("log_probs", "baseline_log_probs"))
    change = np.abs(result[now].astype(np.float64) - result[before])
    return bool((np.abs(result["completeness_gap"]) <= COMPLETE_WITHIN * change
                 + COMPLETE_NATS).all())


def gradient_attributions(ckpt, source: str, output_ids, *, method: str = "saliency",
                          steps: int | None = DEFAULT_STEPS, head_mask=None,
                          on_progress=None, foil_ids=None) -> dict:
    """Each output token's attribution to each source and target-prefix token, by `method`
    (GRADIENT_METHODS; the module docstring has the formulas), for the output ids a
    teacher-forced pass scores (OpenedModel.contributions picks them as OpenedModel.attention
    does: the typed target's, or the translation's). Returns a dict: "method",
    "source_tokens" (N), "target_tokens" (T: the decoder's inputs), "output_tokens" (T),
    "source" (T, N), "target" (T, T) (row t: output token t; target columns after t are 0),
    "log_probs" (T,); integrated gradients also "steps", "baseline_log_probs" (T,) and
    "completeness_gap" (T,): the sum of row t's attributions less (log_probs -
    baseline_log_probs). steps=None (integrated gradients): AUTO_STEPS in turn until
    is_complete, and "steps_tried" (the list) and "complete" (whether the last was) say how it
    went. on_progress(done, total): called after each batch of rows (a progress bar's; with
    steps=None, over every round that might run).

    foil_ids: one id per output token, or None for a step without one (the contrast, in the
    module docstring): each row then attributes log p(output token) - log p(foil), and the
    result adds "foil_ids" (T: the ids, None where none), "foil_tokens" (T: their pieces, None
    where none), "foil_log_probs" (T,; NaN where none) and "scores" (T,), the attributed
    difference (log_probs where there is no foil); integrated gradients also
    "baseline_scores", and the completeness gap is measured against the change in scores."""
    if method not in GRADIENT_METHODS:
        raise ValueError(f"method must be one of {', '.join(GRADIENT_METHODS)}, got {method!r}")
    foils = _checked_foils(ckpt, output_ids, foil_ids)
    if method == "integrated_gradients" and steps is None:
        return _until_complete(ckpt, source, output_ids, head_mask, on_progress, foil_ids)
    if steps is None:
        steps = 1  # the other methods take no steps
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
    # Every point on the path (integrated gradients: the steps, then the input itself and the
    # baseline, alpha 1 and 0, for their log-probabilities alone; the others: the input) and
    # every output token make one row.
    points = [(float(a), True) for a in alphas]
    points += [(1.0, False), (0.0, False)] if method == "integrated_gradients" else []

    def vectors(point_alphas):  # the points' token vectors: (P, N, d_model), (P, T, d_model)
        a = np.asarray(point_alphas, np.float32)[:, None, None]
        return ((b_src + a * (e_src - b_src)).astype(np.float32),
                (b_tgt + a * (e_tgt - b_tgt)).astype(np.float32))

    per_batch = _batch_rows(model, n, t_len)
    run = _by_point if per_batch >= t_len else _by_token
    scores, chosen, g_src, g_tgt = run(model, source_ids, target_ids, out, foils, points,
                                       vectors, per_batch, on_progress)
    at_input = steps if method == "integrated_gradients" else 0  # the point alpha = 1
    log_probs = chosen[at_input]
    if foil_ids is not None:
        has_foil = foils != NO_FOIL
        result.update(
            foil_ids=[None if f == NO_FOIL else int(f) for f in foils],
            foil_tokens=[ckpt.target_tokenizer.id_to_piece(int(f)) if f != NO_FOIL else None
                         for f in foils],
            foil_log_probs=np.where(has_foil, chosen[at_input] - scores[at_input],
                                    np.nan).astype(np.float32),
            scores=scores[at_input].astype(np.float32))
    if method == "integrated_gradients":
        g_src, g_tgt = g_src / steps, g_tgt / steps  # the mean gradient along the path
        source = np.einsum("tnd,nd->tn", g_src, e_src - b_src)  # (T, N)
        target = np.einsum("tjd,jd->tj", g_tgt, e_tgt - b_tgt)  # (T, T)
        baseline = scores[steps + 1]  # the attributed scores at alpha 1 and 0
        result.update(steps=steps, baseline_log_probs=chosen[steps + 1],
                      completeness_gap=(source.sum(1) + target.sum(1)
                                        - (scores[steps] - baseline)).astype(np.float32))
        if foil_ids is not None:
            result["baseline_scores"] = baseline.astype(np.float32)
    elif method == "saliency":
        source, target = np.linalg.norm(g_src, axis=-1), np.linalg.norm(g_tgt, axis=-1)
    else:
        source = np.linalg.norm(g_src * e_src, axis=-1)
        target = np.linalg.norm(g_tgt * e_tgt, axis=-1)
    target = np.tril(target)  # columns after t: no gradient reaches them (exactly 0)
    result.update(source=source.astype(np.float32), target=target.astype(np.float32),
                  log_probs=np.asarray(log_probs, np.float32))
    return result


def _checked_foils(ckpt, output_ids, foil_ids) -> np.ndarray:
    """foil_ids as _foils' array, after checking them: one per output token, each None or an
    id of the target vocabulary other than that step's output token (ValueError)."""
    steps = len(output_ids)
    if foil_ids is None:
        return _foils(None, steps)
    foil_ids = list(foil_ids)
    if len(foil_ids) != steps:
        raise ValueError(f"foil_ids must hold one id (or None) per output token: {steps}, got "
                         f"{len(foil_ids)}")
    vocab = ckpt.config.tgt_vocab_size
    for t, (foil, chosen) in enumerate(zip(foil_ids, output_ids)):
        if foil is None:
            continue
        if isinstance(foil, bool) or not isinstance(foil, (int, np.integer)) or \
                not 0 <= int(foil) < vocab:
            raise ValueError(f"the foil of step {t} must be an id of the target vocabulary "
                             f"(0 to {vocab - 1}) or None, got {foil!r}")
        if int(foil) == int(chosen):
            raise ValueError(f"the foil of step {t} is its output token itself (id {foil}): "
                             "a contrast needs another token")
    return _foils(foil_ids, steps)


def _until_complete(ckpt, source, output_ids, head_mask, on_progress, foil_ids=None) -> dict:
    """Integrated gradients with AUTO_STEPS in turn until is_complete (or the last). The
    progress runs over every round that might run ((steps + 2) rows per output token each: the
    path's points, the input and the baseline), and to its end when a round is complete."""
    per_token = sum(steps + 2 for steps in AUTO_STEPS)
    whole = per_token * len(output_ids)
    before, tried = 0, []
    for steps in AUTO_STEPS:
        def progress(done, total, before=before):
            if on_progress is not None:
                on_progress(before + done, whole)
        result = gradient_attributions(ckpt, source, output_ids,
                                       method="integrated_gradients", steps=steps,
                                       head_mask=head_mask, on_progress=progress,
                                       foil_ids=foil_ids)
        tried.append(steps)
        before += (steps + 2) * len(output_ids)
        if is_complete(result):
            break
    if on_progress is not None and before < whole:
        on_progress(whole, whole)
    result.update(steps_tried=tried, complete=is_complete(result))
    return result
