"""Activation patching between a clean and a corrupted source (Meng et al. 2022's causal tracing,
Vig et al. 2020's causal mediation; here on an encoder-decoder): OpenedModel.patch.

Two runs of the same output prefix (teacher forcing with the clean run's output ids, the
translation's or the typed target's): the clean source, and a corrupted one (another sentence
with as many ids, or the clean one with Gaussian noise added to chosen tokens' embedding rows,
ROME's corruption). At one output step the score is log p(token) (or, with a foil,
log p(token) - log p(foil), the logit difference). Each site is restored from the clean run into
the corrupted one, alone, and the step's score measured again:

    "encoder_layers"  (L_enc + 1, N)  the residual stream after encoder layer k (k = 0: the
                                      embedded source) at one source position
    "decoder_layers"  (L_dec + 1, t + 1)  the same in the decoder, at one of the step's
                                      prefix positions (later positions never reach step t)
    "encoder_heads", "decoder_heads", "cross_heads"  (L, H)  one head's output (its context
                                      vectors before the output projection) at every position

Every site of a kind is one row of one batch in one compiled pass (shared by every model of the
architecture: transformer.inference.compiled.shared_function), and a row runs only the layers
after its site: rows join the batch at their layer, built from the corrupted run's hidden state
there (the clean one's at the restored positions), so the layers below a site are never run
again. Decoder-side rows read the corrupted run's memory, one copy broadcast over the rows. The
logits are projected at the step's position alone."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer.inference.compiled import built, shared_function
from transformer.inference.maps import scored_ids
from transformer.inference.search_ours import never_emitted

__all__ = ["NOISE_SCALE", "SITES", "patch"]

SITES = ("encoder_layers", "decoder_layers", "encoder_heads", "decoder_heads", "cross_heads")
NOISE_SCALE = 3.0  # ROME's: the noise's standard deviation, in the embedding rows' own
NO_FOIL = -1


def patch(ckpt, clean: str, corrupted: str | None = None, target: str | None = None, *,
          corrupt_positions=None, step: int | None = None, foil: int | None = None,
          sites=SITES, output_ids=None, noise_scale: float = NOISE_SCALE, seed: int = 0,
          on_progress=None) -> dict:
    """Restore each site of `sites` from the clean run into the corrupted one, one at a time,
    and score output step `step` (default: the first step whose argmax the corruption changes,
    else the step whose log-probability it lowers most).

    corrupted: a source with as many ids as the clean one; or corrupt_positions (indices of the
    clean source's ids): those tokens' embedding rows plus Gaussian noise of noise_scale times
    the standard deviation of the embedding matrix's entries (seeded by `seed`). foil: an id;
    the score is then log p(token) - log p(foil).

    Returns a dict: "source_tokens", "corrupted_tokens" (N), "output_tokens" (T), "step",
    "token", "token_id", "foil" (id or None), "foil_token", "metric" (what the scores are),
    "clean_score" and "corrupted_score" (the step's score in each run), "step_scores" (T, 2: the
    clean and corrupted log p of every output token, what the default step is picked from),
    per site kind `kind` of `sites` "<kind>" (the shapes above: the score with that site
    restored), "<kind>_recovered" (the same as the fraction of the corruption's effect undone:
    (score - corrupted) / (clean - corrupted); NaN where the corruption changed nothing) and
    "<kind>_picks" (the argmax id with that site restored, over the ids the model's greedy may
    emit). on_progress(done, total): after each kind."""
    model, config = built(ckpt.model), ckpt.config
    unknown = [s for s in sites if s not in SITES]
    if unknown or not sites:
        raise ValueError(f"sites must be some of {', '.join(SITES)}, got {list(sites)}")
    clean_ids = ckpt.encode_source(clean)
    clean_vectors, corrupt_ids, corrupt_vectors, corrupt_tokens = _corruption(
        ckpt, clean_ids, corrupted, corrupt_positions, noise_scale, seed)
    out = [int(i) for i in scored_ids(ckpt, clean, target, output_ids)]
    target_ids = [config.start_id] + out[:-1]
    runs = [_run(model, clean_ids, clean_vectors, target_ids, out),
            _run(model, corrupt_ids, corrupt_vectors, target_ids, out)]
    step_scores = np.stack([runs[0]["log_probs"], runs[1]["log_probs"]], axis=1)  # (T, 2)
    step = _step(step, runs, out, config)
    if foil is not None:
        foil = int(foil)
        if not 0 <= foil < config.tgt_vocab_size:
            raise ValueError(f"the foil must be an id 0-{config.tgt_vocab_size - 1}, got {foil}")
        if foil == out[step]:
            raise ValueError("the foil is the step's own token: pick another")
    scores = [_score(r["step_log_probs"][step], out[step], foil) for r in runs]
    t = step + 1  # the prefix that reaches step `step`
    clean_run, corrupt_run = runs
    inputs = dict(
        enc_clean=clean_run["encoder_hidden"], enc_corr=corrupt_run["encoder_hidden"],
        enc_ctx=clean_run["encoder_context"], source_ids=tf.constant([corrupt_ids], tf.int32),
        dec_clean=clean_run["decoder_hidden"][:, :, :t],
        dec_corr=corrupt_run["decoder_hidden"][:, :, :t],
        self_ctx=clean_run["decoder_context"][:, :, :, :t],
        cross_ctx=clean_run["cross_context"][:, :, :, :t],
        target_ids=tf.constant([target_ids[:t]], tf.int32),
        scored=tf.constant(out[step], tf.int32),
        foil=tf.constant(NO_FOIL if foil is None else foil, tf.int32),
        banned=tf.constant(never_emitted(config), tf.int32))
    n, heads = len(clean_ids), config.num_heads
    shapes = {"encoder_layers": (config.num_encoder_layers + 1, n),
              "decoder_layers": (config.num_decoder_layers + 1, t),
              "encoder_heads": (config.num_encoder_layers, heads),
              "decoder_heads": (config.num_decoder_layers, heads),
              "cross_heads": (config.num_decoder_layers, heads)}
    tok = ckpt.target_tokenizer
    result = {"source_tokens": ckpt.source_tokenizer.ids_to_pieces(clean_ids),
              "corrupted_tokens": corrupt_tokens, "output_tokens": tok.ids_to_pieces(out),
              "step": step, "token_id": out[step], "token": tok.ids_to_pieces([out[step]])[0],
              "foil": foil, "foil_token": None if foil is None else tok.ids_to_pieces([foil])[0],
              "metric": ("log p(token)" if foil is None
                         else "log p(token) - log p(foil)"),
              "clean_score": scores[0], "corrupted_score": scores[1],
              "step_scores": step_scores.astype(np.float64)}
    fn = _patch_function(model)
    for done, kind in enumerate(sites, 1):
        joins = _joins(config, kind, n, t)
        got_scores, got_picks = fn(model, *_arguments(inputs, joins))
        result[kind] = got_scores.numpy().reshape(shapes[kind])
        result[f"{kind}_picks"] = got_picks.numpy().reshape(shapes[kind])
        result[f"{kind}_recovered"] = recovered(result[kind], scores[0], scores[1])
        if on_progress is not None:
            on_progress(done, len(sites))
    return result


def recovered(scores, clean: float, corrupted: float) -> np.ndarray:
    """(score - corrupted) / (clean - corrupted): 0 where restoring the site changes nothing,
    1 where it gives the clean score back; NaN everywhere when the runs score alike."""
    gap = clean - corrupted
    if abs(gap) < 1e-9:
        return np.full(np.shape(scores), np.nan)
    return (np.asarray(scores, np.float64) - corrupted) / gap


def _corruption(ckpt, clean_ids, corrupted, positions, noise_scale, seed):
    """(clean token vectors or None, corrupted ids, corrupted token vectors or None, corrupted
    pieces) for a typed corrupted source or noised positions."""
    if (corrupted is None) == (positions is None):
        raise ValueError("give the corrupted source, or the source positions to add noise to "
                         "(one of the two)")
    if corrupted is not None:
        ids = ckpt.encode_source(corrupted)
        if len(ids) != len(clean_ids):
            raise ValueError(
                f"the corrupted source has {len(ids)} ids and the clean one {len(clean_ids)}: "
                "patching restores position by position, so both need as many (change a word "
                "for one that splits into as many pieces)")
        if ids == list(clean_ids):
            raise ValueError("the corrupted source has the clean one's ids: change a word")
        return None, list(ids), None, ckpt.source_tokenizer.ids_to_pieces(ids)
    positions = sorted({int(p) for p in positions})
    if not positions:
        raise ValueError("pick at least one source position to add noise to")
    if positions[0] < 0 or positions[-1] >= len(clean_ids):
        raise ValueError(f"source positions must be 0 to {len(clean_ids) - 1}, got {positions}")
    table = ckpt.model.source_token_embedding.embeddings  # (V, d_model)
    rows = tf.gather(table, clean_ids).numpy()[np.newaxis]  # (1, N, d_model)
    sigma = float(tf.math.reduce_std(tf.cast(table, tf.float64)))
    noise = np.random.default_rng(seed).normal(0.0, noise_scale * sigma,
                                               (len(positions), rows.shape[-1]))
    noised = rows.copy()
    noised[0, positions] += noise.astype(rows.dtype)
    pieces = ckpt.source_tokenizer.ids_to_pieces(clean_ids)
    tokens = [p + " + noise" if i in positions else p for i, p in enumerate(pieces)]
    return rows, list(clean_ids), noised, tokens


def _contexts(attention, values):
    """Each head's output (weights @ values): (L, B, H, q, k) x (L, B, H, k, head_dim)."""
    return tf.matmul(attention, values)  # (L, B, H, q, head_dim)


def _run(model, source_ids, vectors, target_ids, out) -> dict:
    """One teacher-forced run (eager, batch 1): each stack's hidden states, each kind's head
    outputs, and the log-probability of every output id."""
    enc = model.encode(tf.constant([source_ids], tf.int32), return_hidden_states=True,
                       return_qkv=True, source_vectors=None if vectors is None
                       else tf.constant(vectors))
    dec = model.decode(tf.constant([target_ids], tf.int32), enc["memory"], enc["mask"],
                       return_hidden_states=True, return_qkv=True)
    log_probs = tf.nn.log_softmax(tf.cast(dec["logits"][0], tf.float64)).numpy()  # (T, V)
    return {"encoder_hidden": enc["hidden_states"], "decoder_hidden": dec["hidden_states"],
            "encoder_context": _contexts(enc["attention"], enc["v"]),
            "decoder_context": _contexts(dec["self_attention"], dec["self_v"]),
            "cross_context": _contexts(dec["cross_attention"], dec["cross_v"]),
            "step_log_probs": log_probs,
            "log_probs": log_probs[np.arange(len(out)), out]}


def _step(step, runs, out, config) -> int:
    if step is not None:
        if not 0 <= int(step) < len(out):
            raise ValueError(f"step must be 0 to {len(out) - 1}, got {step}")
        return int(step)
    allowed = np.ones(config.tgt_vocab_size, bool)
    allowed[never_emitted(config)] = False
    corrupt = np.where(allowed, runs[1]["step_log_probs"], -np.inf).argmax(axis=1)
    changed = np.flatnonzero(corrupt != np.asarray(out))
    if changed.size:
        return int(changed[0])
    return int(np.argmax(runs[0]["log_probs"] - runs[1]["log_probs"]))


def _score(log_probs, token: int, foil) -> float:
    return float(log_probs[token] - (0.0 if foil is None else log_probs[foil]))


def _joins(config, kind: str, n: int, t: int) -> dict:
    """Which rows join where for one site kind: "enc_pos" (L_enc + 1 arrays (rows, N): the
    positions restored in the rows joining at hidden index k), "enc_heads" (L_enc (rows, H):
    the heads restored in the rows joining at layer l), "dec_pos", "self_heads",
    "cross_heads" alike for the decoder; every other entry has no rows. Rows come out of the
    pass in join order: index by index, positions then heads (encoder rows first), which is the
    site kind's row-major (layer, position or head) order."""
    heads = config.num_heads
    le, ld = config.num_encoder_layers, config.num_decoder_layers
    joins = {"enc_pos": [np.zeros((0, n), np.float32)] * (le + 1),
             "enc_heads": [np.zeros((0, heads), np.float32)] * le,
             "dec_pos": [np.zeros((0, t), np.float32)] * (ld + 1),
             "self_heads": [np.zeros((0, heads), np.float32)] * ld,
             "cross_heads": [np.zeros((0, heads), np.float32)] * ld}
    if kind == "encoder_layers":
        joins["enc_pos"] = [np.eye(n, dtype=np.float32)] * (le + 1)
    elif kind == "decoder_layers":
        joins["dec_pos"] = [np.eye(t, dtype=np.float32)] * (ld + 1)
    else:
        key = {"encoder_heads": "enc_heads", "decoder_heads": "self_heads",
               "cross_heads": "cross_heads"}[kind]
        joins[key] = [np.eye(heads, dtype=np.float32)] * len(joins[key])
    return joins


_ORDER = ("enc_clean", "enc_corr", "enc_ctx", "source_ids", "dec_clean", "dec_corr", "self_ctx",
          "cross_ctx", "target_ids", "scored", "foil", "banned")


def _arguments(inputs: dict, joins: dict) -> list:
    return ([inputs[name] for name in _ORDER] +
            [[tf.constant(a) for a in joins[name]]
             for name in ("enc_pos", "enc_heads", "dec_pos", "self_heads", "cross_heads")])


def _patch_function(model):
    """The compiled patching pass of this architecture (compiled.shared_function)."""
    c = model.config
    le, ld, heads, d, hd = (c.num_encoder_layers, c.num_decoder_layers, c.num_heads, c.d_model,
                            c.head_dim)
    f32, i32 = tf.float32, tf.int32
    signature = [
        tf.TensorSpec([le + 1, 1, None, d], f32), tf.TensorSpec([le + 1, 1, None, d], f32),
        tf.TensorSpec([le, 1, heads, None, hd], f32), tf.TensorSpec([1, None], i32),
        tf.TensorSpec([ld + 1, 1, None, d], f32), tf.TensorSpec([ld + 1, 1, None, d], f32),
        tf.TensorSpec([ld, 1, heads, None, hd], f32), tf.TensorSpec([ld, 1, heads, None, hd], f32),
        tf.TensorSpec([1, None], i32), tf.TensorSpec([], i32), tf.TensorSpec([], i32),
        tf.TensorSpec([None], i32),
        [tf.TensorSpec([None, None], f32)] * (le + 1), [tf.TensorSpec([None, heads], f32)] * le,
        [tf.TensorSpec([None, None], f32)] * (ld + 1), [tf.TensorSpec([None, heads], f32)] * ld,
        [tf.TensorSpec([None, heads], f32)] * ld]
    return shared_function(model, "patch", _patch_pass, signature)


def _joined(x, hidden_clean, hidden_corr, positions):
    """x (R, S, d) with the new rows appended: the corrupted hidden state (1, S, d), the clean
    one at the positions `positions` (R_new, S) marks."""
    rows = positions[:, :, tf.newaxis]  # (R_new, S, 1)
    return tf.concat([x, hidden_corr + rows * (hidden_clean - hidden_corr)], axis=0)


def _head_rows(x, hidden_corr, heads):
    """x with a copy of the corrupted hidden state per row of heads (R_new, H) appended, and the
    (R, H) head patch rows of the layer: zeros for the rows already there."""
    before = tf.shape(x)[0]
    x = tf.concat([x, tf.tile(hidden_corr, [tf.shape(heads)[0], 1, 1])], axis=0)
    rows = tf.concat([tf.zeros([before, tf.shape(heads)[1]], heads.dtype), heads], axis=0)
    return x, rows


def _position_bias(layer, ids):
    """T5's relative position bias over ids (1, S), the same for every layer; None without."""
    if layer is None:
        return None
    positions = tf.range(tf.shape(ids)[1])
    return layer(positions, positions)


def _patch_pass(model):
    c = model.config

    def encoder(enc_clean, enc_corr, enc_ctx, source_ids, enc_pos, enc_heads):
        mask = model.source_mask(source_ids)  # (1, 1, 1, N)
        bias = _position_bias(model.encoder_position_bias, source_ids)  # (1, H, N, N)
        x = tf.zeros([0, tf.shape(enc_corr)[2], c.d_model])  # (R, N, d): no rows yet
        layers = model.encoder_layers
        for i in range(len(layers) + 1):
            x = _joined(x, enc_clean[i], enc_corr[i], enc_pos[i])
            if i == len(layers):
                break
            x, rows = _head_rows(x, enc_corr[i], enc_heads[i])
            x = layers[i](x, attention_mask=mask, position_bias=bias,
                          head_patch=(rows, enc_ctx[i]))["output"]
            if i == len(layers) - 1 and c.norm_first:
                x = model.encoder_norm(x)  # the stack's hidden[-1] has its closing norm
        return x, mask

    def decoder(x, memory, memory_mask, dec_clean, dec_corr, self_ctx, cross_ctx, target_ids,
                dec_pos, self_heads, cross_heads):
        """x (R0, T, d): rows that enter at the embedding (or none); memory (R0 or 1, N, d)."""
        self_mask = model.target_mask(target_ids)  # (1, 1, T, T)
        bias = _position_bias(model.decoder_position_bias, target_ids)  # (1, H, T, T)
        layers = model.decoder_layers
        for i in range(len(layers) + 1):
            x = _joined(x, dec_clean[i], dec_corr[i], dec_pos[i])
            if i == len(layers):
                break
            x, self_rows = _head_rows(x, dec_corr[i], self_heads[i])
            x, cross_rows = _head_rows(x, dec_corr[i], cross_heads[i])
            self_rows = tf.concat([self_rows, tf.zeros_like(cross_heads[i])], axis=0)
            x = layers[i](x, memory, self_mask=self_mask, cross_mask=memory_mask,
                          position_bias=bias, self_head_patch=(self_rows, self_ctx[i]),
                          cross_head_patch=(cross_rows, cross_ctx[i]))["output"]
            if i == len(layers) - 1:
                x = model.final_norm(x)  # the identity in a post-LN model
        return x

    def scored(x, scored_id, foil, banned):
        """x (R, T, d) -> the step's score per row (R,) float64 and its argmax (R,)."""
        logits = model.project(x[:, -1:])[:, 0]  # (R, V): the step's position alone
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float64))
        score = log_probs[:, scored_id]
        score -= tf.where(foil >= 0, log_probs[:, tf.maximum(foil, 0)], tf.zeros_like(score))
        allowed = tf.tensor_scatter_nd_update(
            tf.zeros([tf.shape(log_probs)[1]], tf.float64), banned[:, tf.newaxis],
            tf.fill(tf.shape(banned), tf.constant(-np.inf, tf.float64)))
        return score, tf.argmax(log_probs + allowed, axis=1, output_type=tf.int32)

    def run(enc_clean, enc_corr, enc_ctx, source_ids, dec_clean, dec_corr, self_ctx, cross_ctx,
            target_ids, scored_id, foil, banned, enc_pos, enc_heads, dec_pos, self_heads,
            cross_heads):
        memory, mask = encoder(enc_clean, enc_corr, enc_ctx, source_ids, enc_pos, enc_heads)
        t = tf.shape(target_ids)[1]
        none = {"dec_pos": [tf.zeros([0, t])] * len(dec_pos),
                "self_heads": [tf.zeros([0, c.num_heads])] * len(self_heads),
                "cross_heads": [tf.zeros([0, c.num_heads])] * len(cross_heads)}
        # encoder rows: each with its own memory, from the decoder's embedded (corrupted) input
        x = tf.tile(dec_corr[0], [tf.shape(memory)[0], 1, 1])
        from_encoder = decoder(x, memory, mask, dec_clean, dec_corr, self_ctx, cross_ctx,
                               target_ids, **none)
        # decoder rows: the corrupted memory, one copy broadcast over them
        x = decoder(tf.zeros([0, t, c.d_model]), enc_corr[-1], mask, dec_clean, dec_corr,
                    self_ctx, cross_ctx, target_ids, dec_pos, self_heads, cross_heads)
        scores, picks = scored(tf.concat([from_encoder, x], axis=0), scored_id, foil, banned)
        return scores, picks

    return run
