"""Greedy decoding and beam search as this project defines them, capturing each step's attention
(transformers' own search, driven by a generation config: transformer.inference.search_transformers).

Two paths give identical tokens and attention:
- cached (default): the whole decode of a batch is ONE compiled call: a `tf.while_loop` runs the
  encoder once, computes each layer's cross-attention keys and values once, keeps the decoder's
  self-attention keys/values in a fixed-size cache written one slot per step, picks each step's
  token on the device and writes the step's token, log-probabilities and attention rows into
  preallocated arrays, and stops when every sequence has ended. The host is called once per
  batch, not once per token;
- naive (use_cache=False): the reference, re-running the decoder on the whole prefix every step
  from a Python loop.

The cache is the bucket of lengths (16, 32, 64, ...) that holds max_len, and under XLA
(JIT_COMPILE) sources are padded to their bucket too, so that XLA compiles once per bucket and a
new sentence length does not recompile (compiled.padded_to_buckets); padded source keys are
masked, so padding changes no number. A model that does not mask padding (config.mask_padding
False) never gets its sources padded (padding would change its numbers).
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from transformer.core.kinds import KIND_NAMES, layer_counts
from transformer.core.masking import pad_ids
from transformer.inference import compiled, decoded
from transformer.inference.compiled import mark_stopped, shared_function
from transformer.inference.decoded import TOP_K, BeamDecoding, DecodeStep, Decoding
from transformer.inference.numerics import check_encoder_flags, log_softmax


def greedy_decode(model, source_ids, *, max_len, use_cache=True, stop_at_end=True, head_mask=None,
                  tokenizer=None, on_step=None, seconds=None) -> Decoding:
    """Greedily decode one source (a 1-D id sequence). tokenizer names the tokens, if given;
    seconds, if given, is a time budget (see greedy_decode_batch)."""
    source_ids = np.asarray(source_ids, np.int32)
    if source_ids.ndim != 1:
        raise ValueError(f"source_ids must be one sequence (1-D), got shape {source_ids.shape}")
    return greedy_decode_batch(model, [source_ids], max_len=max_len, use_cache=use_cache,
                               stop_at_end=stop_at_end, head_mask=head_mask, tokenizer=tokenizer,
                               on_step=on_step, seconds=seconds)[0]


def greedy_decode_batch(model, sources, *, max_len, use_cache=True, stop_at_end=True,
                        head_mask=None, tokenizer=None, capture=True,
                        on_step=None, seconds=None) -> list[Decoding]:
    """Decode many sources at once. Each stops on its own end token; results equal decoding them
    one by one. sources: a list of 1-D id sequences (padded here) or a (B, N) padded array.
    capture=False skips keeping attention (corpus-level use); on_step(t) is called for each step
    taken (progress bars): at once after the compiled loop returns on the cached path, after each
    step on the naive one. seconds: a time budget; after the first step, no step starts once it
    is spent (checked on the device, inside the compiled loop), and a sequence it cuts has
    stopped_by "time"."""
    config = compiled.built(model).config
    source_ids = (np.asarray(sources, np.int32) if isinstance(sources, np.ndarray) and
                  sources.ndim == 2 else pad_ids(sources, config.pad_id))
    compiled.check_max_len(config, max_len)
    masks = compiled.head_mask_tensors(model, head_mask)
    if use_cache:
        out = _cached_greedy(model, source_ids, masks, max_len, stop_at_end, capture, seconds)
    else:
        out = _naive_greedy(model, source_ids, masks, max_len, stop_at_end, on_step, seconds)
    steps_taken = len(out["tokens"])
    if use_cache and on_step is not None:
        for t in range(steps_taken):
            on_step(t)
    tokens = out["tokens"]  # (T, B)
    # The keys each source's cross-attention has: its real tokens, or all of them when the model
    # does not mask padding (it attends to the pad tokens it is fed: they are part of its numbers).
    lengths = ((source_ids != config.pad_id).sum(axis=1) if config.mask_padding
               else np.full(source_ids.shape[0], source_ids.shape[1]))
    names = decoded.Names(tokenizer, tokens, out["top_ids"])
    results = []
    for b in range(source_ids.shape[0]):
        check_encoder_flags(out["encoder_finite"][:, b], compiled.real_positions(config, source_ids[b]))
        ended = np.flatnonzero(tokens[:, b] == config.end_id)
        done = int(ended[0]) + 1 if stop_at_end and ended.size else steps_taken
        stopped_by = ("end" if stop_at_end and ended.size else
                      "length" if steps_taken >= max_len else "time")
        ids = [int(i) for i in tokens[:done, b]]
        steps = [decoded.make_step(names, ids[t], out["log_prob"][t, b], out["top_ids"][t, b],
                            out["top_log_probs"][t, b],
                            out["self"][t][:, b, :, : t + 1] if capture else None,
                            out["cross"][t][:, b, :, : lengths[b]] if capture else None,
                            step=t, finite=None if capture else
                            (out["self_finite"][t][:, b], out["cross_finite"][t][:, b]))
                 for t in range(done)]
        results.append(Decoding(ids, names(ids), decoded.text_of(ids, tokenizer), steps, stopped_by))
    return [mark_stopped(result, seconds) for result in results]


def length_normalised(log_prob: float, length: int, alpha: float) -> float:
    """GNMT's length penalty: log_prob / ((5 + length) / 6)^alpha; alpha=0 is the raw sum."""
    return log_prob / (((5.0 + length) / 6.0) ** alpha)


def beam_search(model, source_ids, *, beam_width, max_len, length_penalty=0.6, use_cache=True,
                head_mask=None, tokenizer=None, seconds=None) -> BeamDecoding:
    """Beam search over one source; every hypothesis keeps its own per-step attention.

    Each step expands every live hypothesis by its beam_width best tokens and keeps the
    beam_width best candidates; one that ends with the end token is finished. Search stops when
    beam_width hypotheses are finished or at max_len; the best finished one by length-normalised
    score wins. beam_width=1 is greedy decoding. seconds: a time budget, as in
    greedy_decode_batch (a search it cuts ranks the hypotheses it has: stopped_by "time").

    The cached path runs the whole search in one compiled loop (selection and cache reordering
    on the device) and replays its choices here; the naive path selects on the host each step.
    """
    config = compiled.built(model).config
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    compiled.check_max_len(config, max_len)
    source_ids = np.asarray(source_ids, np.int32).reshape(-1)
    # Every slot of the fixed-size beam decodes the same source: tile it.
    sources = np.repeat(source_ids[None], beam_width, axis=0)
    masks = compiled.head_mask_tensors(model, head_mask)
    source_len = (int((source_ids != config.pad_id).sum()) if config.mask_padding
                  else len(source_ids))  # the keys it attends to (see greedy_decode_batch)
    real = compiled.real_positions(config, source_ids)
    if use_cache:
        out = _cached_beam(model, sources, masks, max_len, seconds)
        check_encoder_flags(out["encoder_finite"][:, 0], real)
        names = decoded.Names(tokenizer, out["token"], out["top_ids"])
        book = _Beam(beam_width, config.end_id, names)
        for t in range(len(out["token"])):
            candidate = {(int(slot), int(token)): i
                         for i, (slot, token) in enumerate(zip(out["slot"][t], out["token"][t]))}

            def make_step(slot, token, t=t, candidate=candidate):
                return decoded.make_step(names, token, out["log_prob"][t, candidate[slot, token]],
                                  out["top_ids"][t, slot],
                                  out["top_log_probs"][t, slot],
                                  out["self"][t][:, slot, :, : t + 1],
                                  out["cross"][t][:, slot, :, :source_len], step=t)
            chosen = zip(out["score"][t], out["slot"][t], out["token"][t])
            parents = book.advance([(s, int(slot), int(tok)) for s, slot, tok in chosen],
                                   make_step)
            if parents is None and t != len(out["token"]) - 1:
                raise AssertionError(f"the device's beam went on after step {t}, the host's ended")
    else:
        names = decoded.Names(tokenizer)
        book = _Beam(beam_width, config.end_id, names)
        run = _NaiveRun(model, sources, masks)
        check_encoder_flags(run.encoder_finite[:, 0], real)
        deadline = compiled.deadline(seconds)
        for t in range(max_len):
            if t and time.monotonic() >= deadline:
                break
            slots = book.live + [book.live[0]] * (beam_width - len(book.live))
            prefix = np.array([[config.start_id] + ids for _, ids, _ in slots], np.int32)
            log_probs, self_weights, cross_weights = run.step(prefix)
            choosable = _choosable(log_probs, config)
            candidates = []
            for slot, (score, _, _) in enumerate(book.live):
                for token in np.argsort(-choosable[slot], kind="stable")[:beam_width]:
                    candidates.append((score + choosable[slot, token], slot, int(token)))
            candidates.sort(key=lambda c: -c[0])  # stable: ties keep slot order, then token order

            def make_step(slot, token):
                top = _top(log_probs[slot])
                return decoded.make_step(names, token, log_probs[slot, token], top, log_probs[slot, top],
                                  self_weights[:, slot], cross_weights[:, slot, :, :source_len],
                                  step=t)
            parents = book.advance(candidates[:beam_width], make_step)
            if parents is None or t == max_len - 1:
                break
            run.reorder(parents)
    return mark_stopped(book.result(length_penalty, tokenizer, max_len), seconds)


class _Beam:
    """The beam's bookkeeping, shared by both paths: live hypotheses (log_prob, ids, steps) in
    slot order, finished ones, and what was alive after each step."""

    def __init__(self, beam_width, end_id, names):
        self.beam_width, self.end_id, self.names = beam_width, end_id, names
        self.live = [(0.0, [], [])]  # slot 0 starts alive; the others are placeholders
        self.finished: list[tuple[float, list[int], list[DecodeStep]]] = []
        self.beam_steps = []
        self.over = False  # beam_width hypotheses finished, or none left alive

    def advance(self, chosen, make_step):
        """chosen: the beam_width best (score, slot, token) candidates, best first;
        make_step(slot, token) -> DecodeStep. Returns the parent slot of every slot for the next
        step, or None when the search is over."""
        new_live, parents = [], []
        for score, slot, token in chosen:
            _, ids, steps = self.live[slot]
            hypothesis = (float(score), ids + [token], steps + [make_step(slot, token)])
            if token == self.end_id:
                self.finished.append(hypothesis)
            else:
                new_live.append(hypothesis)
                parents.append(slot)
        self.beam_steps.append([(self.names(ids), score) for score, ids, _ in new_live])
        if len(self.finished) >= self.beam_width or not new_live:
            self.over = True
            return None
        self.live = new_live
        return parents + [parents[0]] * (self.beam_width - len(parents))

    def result(self, length_penalty, tokenizer, max_len) -> BeamDecoding:
        stopped_by = ("end" if self.over else "length" if len(self.beam_steps) >= max_len else
                      "time")
        ranked = self.finished or self.live  # nothing ended within max_len: rank what is alive
        ranked = sorted(((length_normalised(score, len(ids), length_penalty), ids, steps)
                         for score, ids, steps in ranked), key=lambda f: -f[0])
        hypotheses = [Decoding(ids, self.names(ids), decoded.text_of(ids, tokenizer), steps)
                      for _, ids, steps in ranked]
        best = hypotheses[0]
        return BeamDecoding(best.token_ids, best.tokens, best.text, best.steps, stopped_by,
                            score=ranked[0][0], beam_width=self.beam_width, hypotheses=hypotheses,
                            beam_steps=self.beam_steps)


def _cached_greedy(model, source_ids, head_mask, max_len, stop_at_end, capture, seconds=None):
    """Every step's token, log-probabilities and (with capture) attention rows, as NumPy arrays
    with the step first: tokens (T, B), log_prob (T, B), top_ids/top_log_probs (T, B, k),
    self (T, L, B, H, cache_len), cross (T, L, B, H, N_bucket)."""
    loop = compiled_greedy(model, capture)
    args = compiled.loop_args(model, source_ids, head_mask, max_len, seconds)
    return compiled.fetch(loop(model, *args[:4], tf.constant(bool(stop_at_end)), *args[4:]))


def _cached_beam(model, sources, head_mask, max_len, seconds=None):
    """Per step: the beam_width chosen candidates (slot, token, score, log_prob) best first, and
    every slot's top_ids/top_log_probs (T, W, k), self (T, L, W, H, S), cross (T, L, W, H, N)."""
    loop = compiled_beam(model)
    return compiled.fetch(loop(model, *compiled.loop_args(model, sources, head_mask, max_len, seconds)))


def compiled_greedy(model, capture=True) -> compiled.SharedFunction:
    """The whole greedy decode of a batch as one compiled function, shared by every model of
    this architecture (and capture mode), whose trace is reused by every decode. (The name is
    the old step function's: it is still the one compiled function of cached greedy decoding.)"""
    kind = "greedy" if capture else "greedy_no_capture"
    return shared_function(model, kind, lambda m: _greedy_loop(m, capture, compiled.JIT_COMPILE),
                           _signature(model.config, greedy=True))


def compiled_beam(model) -> compiled.SharedFunction:
    return shared_function(model, "beam", lambda m: _beam_loop(m, compiled.JIT_COMPILE),
                           _signature(model.config, greedy=False))


def _signature(c, greedy):
    """The loop's inputs after the weights: source_ids, cache_len, max_steps, seconds,
    [stop_at_end,] a head mask per kind (in KIND_NAMES' order: encoder, decoder, cross).
    Without XLA one trace serves every batch, source and cache length (the dimensions are left
    open); with XLA each bucket compiles once."""
    layers = layer_counts(c)
    return ([tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32),
             tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.float64)] +
            ([tf.TensorSpec([], tf.bool)] if greedy else []) +
            [tf.TensorSpec([layers[kind], c.num_heads], tf.float32) for kind in KIND_NAMES])


def step_log_probs(model, tokens, t, cache, memory_mask, self_mask, cross_mask, banned):
    """One decoder step on the device: log-probabilities (B, V) float64 (as NumPy's log_softmax
    of the float32 logits), choosable ones (the `banned` ids (V,) bool -inf: pad and start are
    never chosen; None: not computed), the updated cache, the self row (L, B, H, cache_len) and
    the cross row (L, B, H, N)."""
    out = model.decode_step(tokens[:, tf.newaxis], t, cache, memory_mask, self_mask, cross_mask)
    logits = tf.cast(out["logits"][:, 0], tf.float64)  # (B, V)
    shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)
    log_probs = shifted - tf.math.log(tf.reduce_sum(tf.exp(shifted), axis=-1, keepdims=True))
    choosable = (None if banned is None else
                 tf.where(banned, tf.constant(-np.inf, tf.float64), log_probs))
    return (log_probs, choosable, out["cache"], out["self_attention"][:, :, :, 0],
            out["cross_attention"][:, :, :, 0])


def never_emitted_mask(config):
    """(V,) True for the ids never emitted: pad and start (which may be one id), unless the
    start is the end token (BART and the families after it start decoding with </s>)."""
    banned = np.zeros(config.tgt_vocab_size, bool)
    banned[never_emitted(config)] = True
    return tf.constant(banned)


def never_emitted(config) -> list[int]:
    """The ids greedy decoding and beam search never emit: padding, and the start token where
    it is not the end token."""
    return [config.pad_id] + ([config.start_id] if config.start_id != config.end_id else [])


def _greedy_loop(model, capture, xla):
    c = model.config
    k = min(TOP_K, c.tgt_vocab_size)
    specs = [("tokens", tf.int32), ("log_prob", tf.float64), ("top_ids", tf.int32),
             ("top_log_probs", tf.float64)] + ([("self", tf.float32), ("cross", tf.float32)]
                                               if capture else
                                               [("self_finite", tf.bool), ("cross_finite", tf.bool)])

    def loop(source_ids, cache_len, max_steps, seconds, stop_at_end, encoder_mask, self_mask,
             cross_mask):
        started = compiled.clock(xla)  # the time budget counts from here (tracing is not in it)
        banned = never_emitted_mask(c)
        enc = model.encode(source_ids, head_mask=encoder_mask)
        cache = model.init_cache(enc["memory"], cache_len)
        batch = tf.shape(source_ids)[0]

        def going(t, tokens, finished, cache, arrays):
            return ((t < max_steps) & ~(stop_at_end & tf.reduce_all(finished)) &
                    compiled.in_time(t, started, seconds, xla))

        def step(t, tokens, finished, cache, arrays):
            log_probs, choosable, cache, self_row, cross_row = step_log_probs(
                model, tokens, t, cache, enc["mask"], self_mask, cross_mask, banned)
            next_ids = tf.argmax(choosable, axis=-1, output_type=tf.int32)  # (B,)
            top = tf.math.top_k(log_probs, k)  # ties: the lower id first
            values = {"tokens": next_ids, "top_ids": top.indices, "top_log_probs": top.values,
                      "log_prob": tf.gather(log_probs, next_ids, batch_dims=1),
                      "self": self_row, "cross": cross_row}
            if not capture:  # without the rows kept: whether each layer's were finite, (L, B)
                values.update(self_finite=compiled.finite_rows(self_row),
                              cross_finite=compiled.finite_rows(cross_row))
            arrays = {name: a.write(t, values[name]) for name, a in arrays.items()}
            return t + 1, next_ids, finished | (next_ids == c.end_id), cache, arrays

        start = (tf.constant(0), tf.fill([batch], c.start_id), tf.zeros([batch], tf.bool), cache,
                 compiled.arrays(cache_len, specs))
        t, _, _, _, arrays = tf.while_loop(going, step, start)
        return {"steps": t, "encoder_finite": compiled.encoder_finite(enc),
                **compiled.stacked(arrays, t, xla)}

    return loop


def _beam_loop(model, xla):
    c = model.config
    k = min(TOP_K, c.tgt_vocab_size)
    specs = [("slot", tf.int32), ("token", tf.int32), ("score", tf.float64),
             ("log_prob", tf.float64), ("top_ids", tf.int32), ("top_log_probs", tf.float64),
             ("self", tf.float32), ("cross", tf.float32)]

    def loop(source_ids, cache_len, max_steps, seconds, encoder_mask, self_mask, cross_mask):
        started = compiled.clock(xla)
        banned = never_emitted_mask(c)
        enc = model.encode(source_ids, head_mask=encoder_mask)
        cache = model.init_cache(enc["memory"], cache_len)
        width = tf.shape(source_ids)[0]  # the beam: one slot per row
        slots = tf.range(width)

        def going(t, tokens, scores, alive, ended, cache, arrays):
            return ((t < max_steps) & (ended < width) & (alive > 0) &
                    compiled.in_time(t, started, seconds, xla))

        def step(t, tokens, scores, alive, ended, cache, arrays):
            log_probs, choosable, cache, self_row, cross_row = step_log_probs(
                model, tokens, t, cache, enc["mask"], self_mask, cross_mask, banned)
            # each live slot's width best tokens; placeholder slots offer nothing
            best = tf.math.top_k(choosable, tf.minimum(width, c.tgt_vocab_size))
            # (W, W): ties give the lower id first
            candidates = tf.where((slots < alive)[:, tf.newaxis],
                                  scores[:, tf.newaxis] + best.values,
                                  tf.constant(-np.inf, tf.float64))
            chosen = tf.math.top_k(tf.reshape(candidates, [-1]), width)  # ties: slot, then rank
            slot = chosen.indices // tf.shape(best.indices)[1]
            token = tf.gather(tf.reshape(best.indices, [-1]), chosen.indices)
            top = tf.math.top_k(log_probs, k)
            values = {"slot": slot, "token": token, "score": chosen.values,
                      "log_prob": tf.gather_nd(log_probs, tf.stack([slot, token], axis=1)),
                      "top_ids": top.indices, "top_log_probs": top.values,
                      "self": self_row, "cross": cross_row}
            arrays = {name: a.write(t, values[name]) for name, a in arrays.items()}
            # the unfinished candidates move to the front, in order; the slots left over copy
            # the first one (as placeholders)
            is_end = token == c.end_id
            order = tf.argsort(tf.cast(is_end, tf.int32), stable=True)
            alive = width - tf.reduce_sum(tf.cast(is_end, tf.int32))
            keep = tf.where(slots < alive, order, order[0])
            parents = tf.gather(slot, keep)
            cache = {"self": [(tf.gather(key, parents), tf.gather(value, parents))
                              for key, value in cache["self"]], "cross": cache["cross"]}
            return (t + 1, tf.gather(token, keep), tf.gather(chosen.values, keep), alive,
                    ended + width - alive, cache, arrays)

        start = (tf.constant(0), tf.fill([width], c.start_id), tf.zeros([width], tf.float64),
                 tf.constant(1), tf.constant(0), cache, compiled.arrays(cache_len, specs))
        t, *_, arrays = tf.while_loop(going, step, start)
        return {"steps": t, "encoder_finite": compiled.encoder_finite(enc),
                **compiled.stacked(arrays, t, xla)}

    return loop


# ================================================================================ naive path
def _naive_greedy(model, source_ids, head_mask, max_len, stop_at_end, on_step, seconds=None):
    """The reference loop: the decoder re-runs on the whole prefix each step; the same arrays as
    _cached_greedy (self rows zero-padded to max_len)."""
    config = model.config
    batch = source_ids.shape[0]
    run = _NaiveRun(model, source_ids, head_mask)
    prefix = np.full((batch, 1), config.start_id, np.int32)
    finished = np.zeros(batch, bool)
    steps = {name: [] for name in ("tokens", "log_prob", "top_ids", "top_log_probs", "self",
                                   "cross")}
    deadline = compiled.deadline(seconds)
    for t in range(max_len):
        if t and time.monotonic() >= deadline:
            break
        log_probs, self_weights, cross_weights = run.step(prefix)
        next_ids = _choosable(log_probs, config).argmax(axis=-1).astype(np.int32)
        top = np.stack([_top(row) for row in log_probs])  # (B, k)
        padded = np.zeros(self_weights.shape[:-1] + (max_len,), np.float32)
        padded[..., : t + 1] = self_weights
        for name, value in (("tokens", next_ids), ("log_prob", log_probs[np.arange(batch), next_ids]),
                            ("top_ids", top), ("top_log_probs", np.take_along_axis(log_probs, top, 1)),
                            ("self", padded), ("cross", cross_weights)):
            steps[name].append(value)
        prefix = np.concatenate([prefix, next_ids[:, None]], axis=1)
        if on_step is not None:
            on_step(t)
        finished |= next_ids == config.end_id
        if stop_at_end and finished.all():
            break
    return {"encoder_finite": run.encoder_finite,
            **{name: np.stack(values) for name, values in steps.items()}}


def _choosable(log_probs, config):
    choosable = log_probs.copy()
    choosable[:, never_emitted(config)] = -np.inf  # never emit padding or <start>
    return choosable


def _top(log_probs):
    """The TOP_K most probable ids, ties broken by the lower id (as tf.math.top_k)."""
    return np.argsort(-log_probs, kind="stable")[:TOP_K]


class _NaiveRun:
    """The reference: the whole decoder re-runs on the prefix at every step (compiled too, so a
    benchmark compares the algorithms, not graph against eager execution)."""

    def __init__(self, model, source_ids, head_mask):
        enc = model.encode(source_ids, head_mask=head_mask["encoder"])
        self.memory, self.memory_mask = enc["memory"], enc["mask"]
        # (L_enc, B, N): each encoder attention row finite (as the cached loops report it)
        self.encoder_finite = np.isfinite(enc["attention"].numpy()).all(axis=(2, 4))
        self.head_mask = head_mask
        self.step_fn = _compiled_naive_step(model)
        self.parents = None

    def reorder(self, parents):
        """Nothing to reorder: the prefix is re-run from scratch every step."""

    def step(self, prefix):
        """prefix (B, t + 1) -> log-probabilities (B, V) float64, self (L, B, H, t + 1),
        cross (L, B, H, N)."""
        logits, self_weights, cross_weights = self.step_fn(
            tf.constant(prefix), self.memory, self.memory_mask, self.head_mask["decoder"],
            self.head_mask["cross"])
        return log_softmax(logits), self_weights.numpy(), cross_weights.numpy()


def _compiled_naive_step(model):
    fn = getattr(model, "_naive_step_fn", None)
    if fn is None:
        c = model.config
        head_mask = tf.TensorSpec([c.num_decoder_layers, c.num_heads], tf.float32)
        signature = [tf.TensorSpec([None, None], tf.int32),
                     tf.TensorSpec([None, None, c.d_model], tf.float32),
                     tf.TensorSpec([None, 1, 1, None], tf.float32), head_mask, head_mask]

        @tf.function(input_signature=signature, autograph=False)
        def fn(prefix, memory, memory_mask, self_head_mask, cross_head_mask):
            # prefix (B, t + 1) -> last row: logits (B, V), self (L, B, H, t + 1), cross (L, B, H, N)
            dec = model.decode(prefix, memory, memory_mask, self_head_mask=self_head_mask,
                               cross_head_mask=cross_head_mask)
            return (dec["logits"][:, -1], dec["self_attention"][:, :, :, -1],
                    dec["cross_attention"][:, :, :, -1])
        model._naive_step_fn = fn
    return fn


__all__ = [
    "beam_search",
    "compiled_beam",
    "compiled_greedy",
    "greedy_decode",
    "greedy_decode_batch",
    "length_normalised",
    "step_log_probs",
]
