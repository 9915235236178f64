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

__all__ = ["CORRUPTED_PICK", "NOISE_SCALE", "SITES", "patch", "recovered"]

SITES = ("encoder_layers", "decoder_layers", "encoder_heads", "decoder_heads", "cross_heads")
NOISE_SCALE = 3.0  # ROME's: the noise's standard deviation, in the embedding rows' own
NO_FOIL = -1
CORRUPTED_PICK = "corrupted"  # foil=: the token the corrupted run picks at the step


def patch(ckpt, clean: str, corrupted: str | None = None, target: str | None = None, *,
          corrupt_positions=None, step: int | None = None, foil: int | None = None,
          sites=SITES, output_ids=None, noise_scale: float = NOISE_SCALE, seed: int = 0,
          on_progress=None) -> dict:
    """Restore each site of `sites` from the clean run into the corrupted one, one at a time,
    and score output step `step` (default: the first step whose argmax the corruption changes,
    else the step whose log-probability it lowers most).

    corrupted: a source with as many ids as the clean one; or corrupt_positions (indices of the
    clean source's ids): those tokens' embedding rows plus Gaussian noise of noise_scale times
    the standard deviation of the embedding matrix's entries (seeded by `seed`). foil: an id,
    or "corrupted" (the corrupted run's own pick at the step: the usual contrast of the clean
    answer with the corrupted one); the score is then log p(token) - log p(foil).

    Returns a dict: "source_tokens", "corrupted_tokens" (N), "output_tokens" (T), "step",
    "token", "token_id", "foil" (id or None), "foil_token", "metric" (what the scores are),
    "clean_score" and "corrupted_score" (the step's score in each run), "step_scores" (T, 2: the
    clean and corrupted log p of every output token, what the default step is picked from),
    "corrupted_picks" (T: the corrupted run's argmax at each step),
    per site kind `kind` of `sites` "<kind>" (the shapes above: the score with that site
    restored), "<kind>_recovered" (the same as the fraction of the corruption's effect undone:
    (score - corrupted) / (clean - corrupted); NaN where the corruption changed nothing) and
    "<kind>_picks" (the argmax id with that site restored, over the ids the model's greedy may
    emit). on_progress(done, total): after each pass (the layer-position kinds are one pass,
    the head kinds another)."""
    model, config = built(ckpt.model), ckpt.config
    unknown = [s for s in sites if s not in SITES]
    if unknown or not sites:
        raise ValueError(f"sites must be some of {', '.join(SITES)}, got {list(sites)}")
    clean_ids = ckpt.encode_source(clean)
    corrupt_ids, noise, corrupt_tokens = _corruption(ckpt, clean_ids, corrupted,
                                                     corrupt_positions, noise_scale, seed)
    out = [int(i) for i in scored_ids(ckpt, clean, target, output_ids)]
    target_ids = [config.start_id] + out[:-1]
    banned = tf.constant(never_emitted(config), tf.int32)
    noise = np.stack([np.zeros_like(noise), noise])  # (2, N, d): the clean run has none
    (enc_hidden, dec_hidden, enc_ctx, self_ctx, cross_ctx, step_log_probs,
     argmax) = _runs_function(model)(
        model, tf.constant([clean_ids, corrupt_ids], tf.int32), tf.constant(noise),
        tf.constant([target_ids], tf.int32), tf.constant([out], tf.int32), banned)
    step_scores = step_log_probs.numpy().T  # (T, 2): clean, corrupted
    corrupt_picks = argmax.numpy()[1]  # (T,): the corrupted run's pick at each step
    step = _step(step, step_scores, corrupt_picks, out)
    if isinstance(foil, str):
        if foil != CORRUPTED_PICK:
            raise ValueError(f"the foil must be an id or {CORRUPTED_PICK!r}, got {foil!r}")
        foil = int(corrupt_picks[step])
        if foil == out[step]:
            raise ValueError(f"the corrupted run also picks the token at step {step}: there is "
                             "no other answer to contrast it with (score log p instead)")
    if foil is not None:
        foil = int(foil)
        if not 0 <= foil < config.tgt_vocab_size:
            raise ValueError(f"the foil must be an id 0-{config.tgt_vocab_size - 1}, got {foil}")
        if foil == out[step]:
            raise ValueError("the foil is the step's own token: pick another")
    t = step + 1  # the prefix that reaches step `step`
    inputs = dict(
        enc_clean=enc_hidden[:, :1], enc_corr=enc_hidden[:, 1:], enc_ctx=enc_ctx[:, :1],
        source_ids=tf.constant([corrupt_ids], tf.int32),
        dec_clean=dec_hidden[:, :1, :t], dec_corr=dec_hidden[:, 1:, :t],
        self_ctx=self_ctx[:, :1, :, :t], cross_ctx=cross_ctx[:, :1, :, :t],
        target_ids=tf.constant([target_ids[:t]], tf.int32),
        scored=tf.constant(out[step], tf.int32),
        foil=tf.constant(NO_FOIL if foil is None else foil, tf.int32), banned=banned)
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
              "step_scores": step_scores, "corrupted_picks": corrupt_picks}
    functions = _patch_function(model)
    passes = [[k for k in sites if not k.endswith("_heads")], [k for k in sites
                                                               if k.endswith("_heads")]]
    passes = [kinds for kinds in passes if kinds]
    for done, kinds in enumerate(passes, 1):
        # the first pass also scores the two runs themselves: a row that restores every
        # source position at the embedding (the clean run) and one that restores none
        joins, order = _joins(config, kinds, n, t, baselines=done == 1)
        got = [value.numpy() for value in functions[kinds[0].endswith("_heads")](
            model, *_arguments(inputs, joins))]
        split, start = {}, 0
        for kind, count in order:
            split.setdefault(kind, []).append(slice(start, start + count))
            start += count
        if done == 1:
            result["clean_score"], result["corrupted_score"] = (float(v) for v in got[0][:2])
        for kind in kinds:
            for name, values in zip((kind, f"{kind}_picks"), got):
                result[name] = np.concatenate([values[s] for s in split[kind]]).reshape(
                    shapes[kind])
        if on_progress is not None:
            on_progress(done, len(passes))
    for kind in sites:
        result[f"{kind}_recovered"] = recovered(result[kind], result["clean_score"],
                                                result["corrupted_score"])
    return result


def recovered(scores, clean: float, corrupted: float) -> np.ndarray:
    """(score - corrupted) / (clean - corrupted): 0 where restoring the site changes nothing,
    1 where it gives the clean score back; NaN everywhere when the runs score alike."""
    gap = clean - corrupted
    if abs(gap) < 1e-9:
        return np.full(np.shape(scores), np.nan)
    return (np.asarray(scores, np.float64) - corrupted) / gap


def _corruption(ckpt, clean_ids, corrupted, positions, noise_scale, seed):
    """(corrupted ids, the noise added to their embedding rows (N, d_model), corrupted pieces)
    for a typed corrupted source (no noise) or noised positions."""
    d_model = ckpt.config.d_model
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
        return (list(ids), np.zeros((len(ids), d_model), np.float32),
                ckpt.source_tokenizer.ids_to_pieces(ids))
    positions = sorted({int(p) for p in positions})
    if not positions:
        raise ValueError("pick at least one source position to add noise to")
    if positions[0] < 0 or positions[-1] >= len(clean_ids):
        raise ValueError(f"source positions must be 0 to {len(clean_ids) - 1}, got {positions}")
    table = ckpt.model.source_token_embedding.embeddings  # (V, d_model)
    sigma = float(tf.math.reduce_std(tf.cast(table, tf.float64)))
    noise = np.zeros((len(clean_ids), d_model), np.float32)
    noise[positions] = np.random.default_rng(seed).normal(0.0, noise_scale * sigma,
                                                          (len(positions), d_model))
    pieces = ckpt.source_tokenizer.ids_to_pieces(clean_ids)
    tokens = [p + " + noise" if i in positions else p for i, p in enumerate(pieces)]
    return list(clean_ids), noise, tokens


def _runs_function(model):
    """The compiled clean and corrupted runs (batch 2, teacher-forced) of this architecture:
    source ids (2, N), the noise on their embedding rows (2, N, d), the decoder inputs and the
    output ids (1, T), the ids never emitted -> each stack's hidden states (L + 1, 2, len, d),
    each kind's head outputs (L, 2, H, q_len, head_dim), the log-probability of each output id
    (2, T) float64 and each position's argmax over the ids the greedy may emit (2, T)."""
    c = model.config
    i32 = tf.int32
    signature = [tf.TensorSpec([2, None], i32), tf.TensorSpec([2, None, c.d_model], tf.float32),
                 tf.TensorSpec([1, None], i32), tf.TensorSpec([1, None], i32),
                 tf.TensorSpec([None], i32)]
    return shared_function(model, "patch_runs", _runs_pass, signature)


def _runs_pass(model):
    def run(source_ids, noise, target_ids, output_ids, banned):
        vectors = tf.gather(model.source_token_embedding.embeddings, source_ids) + noise
        enc = model.encode(source_ids, return_hidden_states=True, return_qkv=True,
                           source_vectors=vectors)
        dec = model.decode(tf.tile(target_ids, [2, 1]), enc["memory"], enc["mask"],
                           return_hidden_states=True, return_qkv=True)
        log_probs = tf.nn.log_softmax(tf.cast(dec["logits"], tf.float64))  # (2, T, V)
        chosen = tf.gather(log_probs, tf.tile(output_ids, [2, 1]), axis=2, batch_dims=2)
        picks = tf.argmax(log_probs + _banned_row(log_probs, banned), axis=2,
                          output_type=tf.int32)
        return (enc["hidden_states"], dec["hidden_states"],
                tf.matmul(enc["attention"], enc["v"]),  # (L, 2, H, N, head_dim)
                tf.matmul(dec["self_attention"], dec["self_v"]),
                tf.matmul(dec["cross_attention"], dec["cross_v"]), chosen, picks)
    return run


def _banned_row(log_probs, banned):
    """(V,) float64: -inf at the banned ids, 0 elsewhere."""
    return tf.tensor_scatter_nd_update(
        tf.zeros([tf.shape(log_probs)[-1]], tf.float64), banned[:, tf.newaxis],
        tf.fill(tf.shape(banned), tf.constant(-np.inf, tf.float64)))


def _step(step, step_scores, corrupt_argmax, out) -> int:
    """The step given, checked; else the first whose argmax the corruption changes, else the
    one whose log p it lowers most."""
    if step is not None:
        if not 0 <= int(step) < len(out):
            raise ValueError(f"step must be 0 to {len(out) - 1}, got {step}")
        return int(step)
    changed = np.flatnonzero(corrupt_argmax != np.asarray(out))
    if changed.size:
        return int(changed[0])
    return int(np.argmax(step_scores[:, 0] - step_scores[:, 1]))


def _joins(config, kinds, n: int, t: int, baselines: bool = False) -> tuple[dict, list]:
    """Which rows join where for some site kinds (of one pass: all layer-position kinds or all
    head kinds): "enc_pos" (L_enc + 1 arrays (rows, N): the positions restored in the rows
    joining at hidden index k), "enc_heads" (L_enc (rows, H): the heads restored in the rows
    joining at layer l), "dec_pos", "self_heads", "cross_heads" alike for the decoder; and the
    rows' order, as the pass hands them out: [(kind, rows), ...], index by index, positions,
    then self heads, then cross heads, the encoder's first. baselines: two rows first, joining
    at the embedding: every position restored (the clean run) and none (the corrupted one)."""
    heads = config.num_heads
    le, ld = config.num_encoder_layers, config.num_decoder_layers
    eye = {size: np.eye(size, dtype=np.float32) for size in (n, t, heads)}

    def rows(kind, size, count):
        return [eye[size] if kind in kinds else np.zeros((0, size), np.float32)] * count

    joins = {"enc_pos": rows("encoder_layers", n, le + 1),
             "enc_heads": rows("encoder_heads", heads, le),
             "dec_pos": rows("decoder_layers", t, ld + 1),
             "self_heads": rows("decoder_heads", heads, ld),
             "cross_heads": rows("cross_heads", heads, ld)}
    if baselines:
        joins["enc_pos"] = [np.concatenate([np.ones((1, n), np.float32),
                                            np.zeros((1, n), np.float32), joins["enc_pos"][0]])
                            ] + joins["enc_pos"][1:]
    order = [("baselines", 2)] if baselines else []
    for layers, parts in (
            (le, (("enc_pos", "encoder_layers"), ("enc_heads", "encoder_heads"))),
            (ld, (("dec_pos", "decoder_layers"), ("self_heads", "decoder_heads"),
                  ("cross_heads", "cross_heads")))):
        for i in range(layers + 1):
            for key, kind in parts:
                if i < len(joins[key]) and kind in kinds:
                    order.append((kind, len(eye[n if key == "enc_pos" else
                                                t if key == "dec_pos" else heads])))
    return joins, order


_ORDER = ("enc_clean", "enc_corr", "enc_ctx", "source_ids", "dec_clean", "dec_corr", "self_ctx",
          "cross_ctx", "target_ids", "scored", "foil", "banned")


def _arguments(inputs: dict, joins: dict) -> list:
    return ([inputs[name] for name in _ORDER] +
            [[tf.constant(a) for a in joins[name]]
             for name in ("enc_pos", "enc_heads", "dec_pos", "self_heads", "cross_heads")])


def _patch_function(model):
    """The compiled patching passes of this architecture (compiled.shared_function): {False:
    the layer-position sites' (no head patched: no head-patch arithmetic in the graph), True:
    the head sites'}."""
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
    return {heads: shared_function(model, "patch_heads" if heads else "patch_layers",
                                   lambda m, heads=heads: _patch_pass(m, heads), signature)
            for heads in (False, True)}


def _joined(x, hidden_clean, hidden_corr, positions):
    """x (R, S, d) with the new rows appended (_restored)."""
    return tf.concat([x, _restored(hidden_clean, hidden_corr, positions)], axis=0)


def _restored(hidden_clean, hidden_corr, positions):
    """(R_new, S, d): the corrupted hidden state (1, S, d), the clean one at the positions
    `positions` (R_new, S) marks."""
    rows = positions[:, :, tf.newaxis]  # (R_new, S, 1)
    return hidden_corr + rows * (hidden_clean - hidden_corr)


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


def _patch_pass(model, heads: bool):
    """The pass: the encoder's rows (each site's row joins at its layer), the decoder over
    each of them with its own memory, the decoder's rows over the corrupted memory, the step's
    score per row. heads False: no head is patched (the layer-position sites), and the head
    joins are not read."""
    c = model.config

    def patched(rows, context):
        return (rows, context) if heads else None

    def encoder(enc_clean, enc_corr, enc_ctx, source_ids, enc_pos, enc_heads):
        mask = model.source_mask(source_ids)  # (1, 1, 1, N)
        bias = _position_bias(model.encoder_position_bias, source_ids)  # (1, H, N, N)
        x = tf.zeros([0, tf.shape(enc_corr)[2], c.d_model])  # (R, N, d): no rows yet
        layers = model.encoder_layers
        for i in range(len(layers) + 1):
            x = _joined(x, enc_clean[i], enc_corr[i], enc_pos[i])
            if i == len(layers):
                break
            rows = None
            if heads:
                x, rows = _head_rows(x, enc_corr[i], enc_heads[i])
            x = layers[i](x, attention_mask=mask, position_bias=bias,
                          head_patch=patched(rows, enc_ctx[i]))["output"]
            if i == len(layers) - 1 and c.norm_first:
                x = model.encoder_norm(x)  # the stack's hidden[-1] has its closing norm
        return x, mask

    def decoder(x, memory, memory_mask, dec_clean, dec_corr, self_ctx, cross_ctx, target_ids,
                dec_pos, self_heads, cross_heads):
        """x (R0, t, d): rows that enter at the embedding (or none); memory (R0 or 1, N, d).
        The last layer computes the last position alone (query_last): the step's."""
        self_mask = model.target_mask(target_ids)  # (1, 1, t, t)
        bias = _position_bias(model.decoder_position_bias, target_ids)  # (1, H, t, t)
        layers = model.decoder_layers
        last = len(layers) - 1
        for i in range(len(layers) + 1):
            new = _restored(dec_clean[i], dec_corr[i], dec_pos[i])
            x = tf.concat([x, new if i <= last else new[:, -1:]], axis=0)
            if i == len(layers):
                break
            self_rows = cross_rows = None
            if heads:
                x, self_rows = _head_rows(x, dec_corr[i], self_heads[i])
                x, cross_rows = _head_rows(x, dec_corr[i], cross_heads[i])
                self_rows = tf.concat([self_rows, tf.zeros_like(cross_heads[i])], axis=0)
            one = slice(-1, None) if i == last else slice(None)  # the query rows computed
            x = layers[i](x, memory, self_mask=self_mask[:, :, one],
                          cross_mask=memory_mask,
                          position_bias=None if bias is None else bias[:, :, one],
                          self_head_patch=patched(self_rows, self_ctx[i][:, :, one]),
                          cross_head_patch=patched(cross_rows, cross_ctx[i][:, :, one]),
                          query_last=i == last)["output"]
            if i == last:  # the stack's hidden[-1] has its closing norm (pre-LN)
                x = model.final_norm(x)  # (R, 1, d); the identity in a post-LN model
        return x

    def scored(x, scored_id, foil, banned):
        """x (R, 1, d) -> the step's score per row (R,) float64 and its argmax (R,)."""
        logits = model.project(x)[:, 0]  # (R, V): the step's position alone
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float64))
        score = log_probs[:, scored_id]
        score -= tf.where(foil >= 0, log_probs[:, tf.maximum(foil, 0)], tf.zeros_like(score))
        return score, tf.argmax(log_probs + _banned_row(log_probs, banned), axis=1,
                                output_type=tf.int32)

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
        return scored(tf.concat([from_encoder, x], axis=0), scored_id, foil, banned)

    return run
