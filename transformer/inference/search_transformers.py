"""Decoding as transformers decodes: `generate(model, source_ids, settings)`.

The settings come from the model's generation_config.json, read as data
(transformer.inference.generation_config: GenerationSettings, read_generation_config). The
search is transformers' own (transformers 5.x, generation/utils.py and logits_process.py),
run on the device in one compiled loop per architecture (compiled.shared_function), with the
model's decode_step and its cache (reordered by beam each step), keeping each step's attention
rows so that every hypothesis's DecodeSteps hold its own attention:

- num_beams 1: greedy search (transformers' `_sample` without sampling): the processed scores'
  argmax each step; stops at an eos id or at max_length.
- num_beams > 1: beam search (transformers' `_beam_search`): the logits processors run on the
  log-softmax of the logits; the running score of every beam is added; the best
  K = max(2, 1 + number of eos ids) x num_beams candidates over all beams are taken; those that
  end (an eos id, or the length limit) among the first num_beams are scored
  sum_logprobs / length ** length_penalty (length: the generated tokens, the eos included, the
  decoder start token not) and kept if among the num_beams best finished; the best num_beams
  that did not end run on. The search stops when no running beam can improve on the finished
  ones (transformers' heuristic: early_stopping False compares the best running score at its
  current length, "never" at max_length when length_penalty > 0; True stops as soon as
  num_beams hypotheses have finished), or at max_length, where every top candidate is finished.
- the logits processors, in transformers' order: no_repeat_ngram_size (n-grams of the decoder
  input, the start token included), bad_words_ids (a single [eos] is dropped, as transformers
  drops it), min_length / min_new_tokens (every eos id banned while the sequence, start
  included, is shorter), forced_bos_token_id (at length 1), forced_eos_token_id (at length
  max_length - 1), suppress_tokens, begin_suppress_tokens, renormalize_logits (a final
  log-softmax).
- no id is banned unless the settings ban it (transformers does not ban pad or the start
  token: opus-mt's generation config bans its pad id through bad_words_ids).

The time budget (seconds) acts as transformers' MaxTimeCriteria in beam search: once spent,
the step under way is the last and its best candidates are finished as at max_length
(stopped_by "time"); greedy search starts no step once it is spent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from transformer.core.kinds import KIND_NAMES, layer_counts
from transformer.inference import compiled, decoded, search_ours
from transformer.inference.compiled import bucket, pad_to, shared_function, source_bucket
from transformer.inference.decoded import TOP_K, BeamDecoding, Decoding
from transformer.inference.generation_config import (
    GenerationSettings,
    generation_settings,
    read_generation_config,
)
from transformer.inference.numerics import check_encoder_flags

NEG = -1.0e9  # transformers' "very large negative" score of placeholder and masked beams
EARLY_MODES = {False: 0, True: 1, "never": 2}


def generate(model, source_ids, settings: GenerationSettings, *, tokenizer=None, seconds=None,
             head_mask=None) -> Decoding:
    """Decode one source (a 1-D id sequence, as the model's source tokenizer gives it) with
    transformers' search for `settings`: a Decoding (greedy, num_beams 1) or a BeamDecoding
    (its hypotheses: the finished ones, best first, each with its own steps; score: the best's
    sequence score as transformers returns it). token_ids are the generated ids (the decoder
    start token not included, the eos included when produced). seconds: a time budget
    (None: none); head_mask: heads silenced, as in decoding."""
    config = compiled.built(model).config
    source_ids = np.asarray(source_ids, np.int32)
    if source_ids.ndim != 1:
        raise ValueError(f"source_ids must be one sequence (1-D), got shape {source_ids.shape}")
    max_new = settings.max_length - 1
    compiled.check_max_len(config, max_new)
    masks = compiled.head_mask_tensors(model, head_mask)
    sources = pad_to(source_ids[None], source_bucket(config, len(source_ids)), config.pad_id)
    cache_len = bucket(max_new, config.max_len)
    processors = processor_inputs(settings, config.tgt_vocab_size)
    common = (tf.constant(sources), tf.constant(cache_len, tf.int32),
              tf.constant(settings.max_length, tf.int32),
              tf.constant(compiled.budget_seconds(seconds), tf.float64),
              tf.constant(settings.decoder_start_token_id, tf.int32))
    head = tuple(masks[kind] for kind in KIND_NAMES)
    source_len = (int((source_ids != config.pad_id).sum()) if config.mask_padding
                  else sources.shape[1])
    real = compiled.real_positions(config, sources[0])
    if settings.num_beams == 1:
        raw = _compiled(model, "greedy")(model, *common, processors, *head)
        empty = bool(raw.pop("no_token_left"))
        out = compiled.fetch(raw)
        check_encoder_flags(out["encoder_finite"][:, 0], real)
        return _no_token_left(compiled.mark_stopped(
            _greedy_result(out, settings, tokenizer, source_len), seconds), empty)
    beam = (tf.constant(settings.num_beams, tf.int32),
            tf.constant(settings.length_penalty, tf.float64),
            tf.constant(EARLY_MODES[settings.early_stopping], tf.int32))
    raw = _compiled(model, "beam")(model, *common, *beam, processors, *head)
    empty = bool(raw.pop("no_token_left"))
    final = {name: raw.pop(name).numpy() for name in list(raw) if name.startswith("final_")}
    out = compiled.fetch(raw)
    check_encoder_flags(out["encoder_finite"][:, 0], real)
    return _no_token_left(compiled.mark_stopped(
        _beam_result(out, final, settings, tokenizer, source_len), seconds), empty)


def _no_token_left(result, empty: bool):
    """result with stopped_by "banned" where the search ended at a step at which the
    generation config's processors had banned every id (suppress_tokens, bad_words_ids,
    min_length and the rest together): no token was left to choose, and none was."""
    if empty and result.stopped_by != "end":
        result.stopped_by = "banned"
        for hypothesis in getattr(result, "hypotheses", None) or ():
            if hypothesis.stopped_by != "end":
                hypothesis.stopped_by = "banned"
    return result


def generate_text(checkpoint, source: str, settings: GenerationSettings, *, seconds=None,
                  head_mask=None) -> Decoding:
    """generate on an OpenedModel's typed source, named by its target tokenizer."""
    return generate(checkpoint.model, checkpoint.encode_source(source), settings,
                    tokenizer=checkpoint.target_tokenizer, seconds=seconds, head_mask=head_mask)


# ================================================================================ results
@dataclass
class GeneratedBeam(BeamDecoding):
    """A beam search's BeamDecoding (score: the best's sequence score) with every finished
    hypothesis's sequence score, as transformers' sequences_scores (best first, as
    hypotheses)."""

    sequence_scores: list[float] = field(default_factory=list)


def _greedy_result(out, settings, tokenizer, source_len) -> Decoding:
    tokens = out["tokens"][:, 0]
    names = decoded.Names(tokenizer, tokens, out["top_ids"])
    ids = [int(i) for i in tokens]
    steps = [decoded.make_step(names, ids[t], out["log_prob"][t, 0], out["top_ids"][t, 0],
                        out["top_log_probs"][t, 0], out["self"][t][:, 0, :, : t + 1],
                        out["cross"][t][:, 0, :, :source_len], step=t)
             for t in range(len(ids))]
    ended = bool(ids) and ids[-1] in settings.eos_token_id
    stopped_by = ("end" if ended else "length" if len(ids) >= settings.max_new_tokens
                  else "time")
    return Decoding(ids, names(ids), decoded.text_of(ids, tokenizer), steps, stopped_by)


def _beam_result(out, final, settings, tokenizer, source_len) -> BeamDecoding:
    names = decoded.Names(tokenizer, out["run_token"], out["top_ids"])
    finished = np.flatnonzero(final["final_flag"])  # in score order, best first
    if finished.size:
        rows = [(final["final_seq"][h], final["final_slots"][h], final["final_lp"][h],
                 int(final["final_len"][h]), float(final["final_score"][h])) for h in finished]
    else:  # nothing finished (cannot happen with a step budget): the running beams, as they are
        steps = len(out["run_token"])
        rows = [(final["final_run_seq"][0], final["final_run_slots"][0],
                 final["final_run_lp"][0], steps, float(final["final_run_score"][0]))]
    hypotheses, scores = [], []
    for seq, slots, lps, length, score in rows:
        ids = [int(i) for i in seq[1: 1 + length]]
        steps = [decoded.make_step(names, ids[t], lps[t], out["top_ids"][t, slots[t]],
                            out["top_log_probs"][t, slots[t]],
                            out["self"][t][:, slots[t], :, : t + 1],
                            out["cross"][t][:, slots[t], :, :source_len], step=t)
                 for t in range(length)]
        hypotheses.append(Decoding(ids, names(ids), decoded.text_of(ids, tokenizer), steps))
        scores.append(score)
    best = hypotheses[0]
    ended = bool(best.token_ids) and best.token_ids[-1] in settings.eos_token_id
    stopped_by = ("end" if ended else "time" if bool(final["final_timed_out"]) else "length")
    for hypothesis in hypotheses:
        hypothesis.stopped_by = ("end" if hypothesis.token_ids and
                                 hypothesis.token_ids[-1] in settings.eos_token_id else stopped_by)
    return GeneratedBeam(best.token_ids, best.tokens, best.text, best.steps, stopped_by,
                         score=scores[0], beam_width=settings.num_beams, hypotheses=hypotheses,
                         beam_steps=_beam_steps(out, names), sequence_scores=scores)


def _beam_steps(out, names):
    """beam_steps[t]: the beams running after step t (tokens, running score), best first
    (placeholder beams, scored about -1e9, left out)."""
    alive = None
    result = []
    for slots, tokens, scores in zip(out["run_slot"], out["run_token"], out["run_score"]):
        previous = alive or [[] for _ in slots]
        alive = [previous[int(s)] + [int(tok)] for s, tok in zip(slots, tokens)]
        result.append([(names(ids), float(score)) for ids, score in zip(alive, scores)
                       if score > NEG / 2])
    return result


# ================================================================================ processors
_IDS, _SCALAR = tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.int32)
_VOCAB_BANS = tf.TensorSpec([None], tf.bool)
# The logits processors' inputs to the compiled loops, by name: the loops take them as one
# mapping (a nested input of the compiled function), so a processor is an entry here and in
# processor_inputs, read by name in _apply_processors; no position ties them together.
PROCESSOR_SPECS = {
    "eos": _IDS,  # the eos ids (min_length bans them)
    "static_ban": _VOCAB_BANS,  # bad_words_ids of one id
    "ngram": _SCALAR,  # no_repeat_ngram_size (0: none)
    "bad_prefix": tf.TensorSpec([None, None], tf.int32),  # longer bad words: all but their last
    "bad_prefix_len": _IDS,  # ... how many of those ids each has
    "bad_last": _IDS,  # ... and their last id
    "min_length": _SCALAR,
    "forced_bos": _SCALAR,  # -1: none
    "forced_eos": _IDS,
    "suppress": _VOCAB_BANS,  # suppress_tokens
    "begin_suppress": _VOCAB_BANS,  # begin_suppress_tokens, at begin_index
    "begin_index": _SCALAR,
    "renormalize": tf.TensorSpec([], tf.bool),  # renormalize_logits
}


def processor_inputs(settings: GenerationSettings, vocab: int) -> dict[str, tf.Tensor]:
    """The settings' logits processors as the loop's inputs: {name: tensor} of PROCESSOR_SPECS."""
    eos = np.array(settings.eos_token_id, np.int32)
    static_ban = np.zeros(vocab, bool)
    multi = []
    for word in settings.bad_words_ids:
        if len(word) == 1:
            if word[0] not in settings.eos_token_id:  # transformers drops a lone [eos]
                static_ban[word[0]] = True
        else:
            multi.append(word)
    width = max((len(w) - 1 for w in multi), default=1)
    prefix = np.zeros((len(multi), width), np.int32)
    for i, word in enumerate(multi):
        prefix[i, : len(word) - 1] = word[:-1]
    suppress = np.zeros(vocab, bool)
    suppress[list(settings.suppress_tokens)] = True
    begin = np.zeros(vocab, bool)
    begin[list(settings.begin_suppress_tokens)] = True
    # transformers: begin_index = the decoder input's length (1), one more with a forced BOS
    begin_index = 1 if settings.forced_bos_token_id is None else 2
    # min_new_tokens is folded into min_length (transformers sets min_length to it + 1)
    inputs = {
        "eos": eos, "static_ban": static_ban, "ngram": settings.no_repeat_ngram_size,
        "bad_prefix": prefix, "bad_prefix_len": [len(w) - 1 for w in multi],
        "bad_last": [w[-1] for w in multi], "min_length": settings.min_length,
        "forced_bos": (-1 if settings.forced_bos_token_id is None
                       else settings.forced_bos_token_id),
        "forced_eos": np.array(settings.forced_eos_token_id, np.int32), "suppress": suppress,
        "begin_suppress": begin, "begin_index": begin_index,
        "renormalize": bool(settings.renormalize_logits)}
    return {name: tf.constant(inputs[name], spec.dtype) for name, spec in PROCESSOR_SPECS.items()}


def _fixed_processors(p, vocab):
    """What the processors need that no step changes, computed once per decode (V: the target
    vocabulary): the ids each step bans in one select, (4, V) bool, row 2 * (min_length still
    ahead) + (the begin index's step): the lone bad words (and every eos id while min_length is
    ahead) before the forced tokens, suppress_tokens (and begin_suppress_tokens at the begin
    index) after them; whether each row bans anything, (4,); the forced BOS and EOS rows, (V,)
    float64, 0 on the forced ids and -inf elsewhere."""
    neg = tf.constant(-np.inf, tf.float64)
    ids = tf.range(vocab)
    eos_mask = tf.reduce_any(tf.equal(ids[None, :], p["eos"][:, None]), axis=0)  # (V,)
    suppress_begin = p["suppress"] | p["begin_suppress"]
    bans = tf.stack([p["static_ban"] | p["suppress"],  # (4, V)
                     p["static_ban"] | suppress_begin,
                     p["static_ban"] | eos_mask | p["suppress"],
                     p["static_ban"] | eos_mask | suppress_begin])
    eos_forced = tf.reduce_any(tf.equal(ids[None, :], p["forced_eos"][:, None]), axis=0)
    return {"bans": bans, "bans_any": tf.reduce_any(bans, axis=1),  # (4,)
            "after": tf.stack([p["suppress"], suppress_begin]),  # (2, V): after a forced row
            "after_any": tf.stack([tf.reduce_any(p["suppress"]), tf.reduce_any(suppress_begin)]),
            "bos_row": tf.where(ids == p["forced_bos"], tf.constant(0.0, tf.float64), neg),
            "eos_row": tf.where(eos_forced, tf.constant(0.0, tf.float64), neg)}


def _apply_processors(scores, seqs, cur, max_length, p, fixed):
    """transformers' logits processors, in its order, on scores (W, V) float64 given the
    sequences (W, S) whose first `cur` columns are the decoder input (the start token first);
    fixed: _fixed_processors of the same p.

    A step pays only for the processors that act on it: each is behind a condition on the step
    (tf.cond), and the bans that depend on no sequence are one select of a row computed once
    (_fixed_processors). Every processor before the forced BOS / EOS only sets ids to -inf, and
    a forced row replaces the whole row, so: where a token is forced, the forced row with
    suppress_tokens (and begin_suppress_tokens) after it; elsewhere the n-gram and bad-word
    bans, then the fixed bans in one select. Every select over the vocabulary is a pass over
    (W, V) float64 numbers: done every step, they were 8% of t5-small's decode step and 5% of
    NLLB's (bench/profile_decode.py)."""
    width, vocab = tf.shape(scores)[0], tf.shape(scores)[1]
    columns = tf.shape(seqs)[1]
    neg = tf.constant(-np.inf, tf.float64)
    rows = tf.range(width)
    begin_now = tf.cast(tf.equal(cur, p["begin_index"]), tf.int32)

    def banned(scores, mask):  # (W, V) float64, mask (W, V) or (V,) bool
        return tf.where(mask, neg, scores)

    def ngrams(scores):  # no_repeat_ngram_size n: a token that would complete an n-gram seen
        n = p["ngram"]
        m = tf.maximum(n - 1, 0)
        starts = tf.range(tf.maximum(cur - n + 1, 0))
        heads = tf.gather(seqs, starts[:, None] + tf.range(m)[None, :], axis=1)  # (W, J, m)
        prefix = tf.gather(seqs, tf.maximum(cur - m, 0) + tf.range(m), axis=1)  # (W, m)
        match = tf.reduce_all(tf.equal(heads, prefix[:, None, :]), axis=-1)  # (W, J)
        last = tf.gather(seqs, starts + m, axis=1)  # (W, J)
        index = tf.stack([tf.broadcast_to(rows[:, None], tf.shape(last)), last], axis=-1)
        bans = tf.tensor_scatter_nd_max(tf.zeros([width, vocab], tf.int32), index,
                                        tf.cast(match, tf.int32))
        return banned(scores, bans > 0)

    def bad_words(scores):  # bad_words_ids of more than one id: the last, when the rest end it
        plen = p["bad_prefix_len"]
        words = tf.shape(plen)[0]
        k = tf.range(tf.shape(p["bad_prefix"])[1])
        positions = tf.clip_by_value(cur - plen[:, None] + k[None, :], 0, columns - 1)  # (M, P)
        got = tf.gather(seqs, positions, axis=1)  # (W, M, P)
        same = tf.equal(got, p["bad_prefix"][None]) | (k[None, :] >= plen[:, None])[None]
        hit = tf.reduce_all(same, axis=-1) & (plen <= cur)[None, :]  # (W, M)
        index = tf.stack([tf.broadcast_to(rows[:, None], [width, words]),
                          tf.broadcast_to(p["bad_last"][None, :], [width, words])], axis=-1)
        bans = tf.tensor_scatter_nd_max(tf.zeros([width, vocab], tf.int32), index,
                                        tf.cast(hit, tf.int32))
        return banned(scores, bans > 0)

    def unforced():
        out = tf.cond((p["ngram"] > 0) & (cur - p["ngram"] + 1 > 0),
                      lambda: ngrams(scores), lambda: scores)
        out = tf.cond(tf.size(p["bad_prefix_len"]) > 0, lambda: bad_words(out), lambda: out)
        row = 2 * tf.cast(cur < p["min_length"], tf.int32) + begin_now  # _fixed_processors'
        return tf.cond(fixed["bans_any"][row], lambda: banned(out, fixed["bans"][row][None]),
                       lambda: out)

    def forced(name):
        out = tf.broadcast_to(fixed[name][None], tf.shape(scores))
        return tf.cond(fixed["after_any"][begin_now],
                       lambda: banned(out, fixed["after"][begin_now][None]), lambda: out)

    eos_now = tf.equal(cur, max_length - 1) & (tf.size(p["forced_eos"]) > 0)
    bos_now = tf.equal(cur, 1) & (p["forced_bos"] >= 0)
    scores = tf.cond(eos_now, lambda: forced("eos_row"),  # the later processor wins
                     lambda: tf.cond(bos_now, lambda: forced("bos_row"), unforced))

    def renormalized():  # a row with no token left (every id banned) stays -inf: log_softmax
        left = tf.reduce_any(scores > neg, axis=-1, keepdims=True)  # would make it NaN
        return tf.where(left, tf.nn.log_softmax(scores, axis=-1), scores)

    return tf.cond(p["renormalize"], renormalized, lambda: scores)


# ================================================================================ loops
def _compiled(model, kind):
    make = _greedy_loop if kind == "greedy" else _beam_loop
    return shared_function(model, f"generate_{kind}", lambda m: make(m, compiled.JIT_COMPILE),
                           _signature(model.config, kind))


def _signature(c, kind):
    """The loop's inputs after the weights: source_ids (1, N), cache_len, max_length, seconds,
    start_id, [num_beams, length_penalty, early_stopping mode,] the processors (one mapping,
    PROCESSOR_SPECS), a head mask per kind. The source's batch of 1 is static (generate decodes
    one sentence): every reshape of a greedy loop then knows its leading dimensions and builds
    no shape ops, t5-small's greedy graph 2,059 -> 1,552 nodes and its trace 0.78 -> 0.55 s,
    NLLB's 3,475 -> 2,672 and 1.43 -> 1.09 s (the beam's width stays a tensor)."""
    layers = layer_counts(c)
    scalar_int = tf.TensorSpec([], tf.int32)
    beam = ([scalar_int, tf.TensorSpec([], tf.float64), scalar_int] if kind == "beam" else [])
    return ([tf.TensorSpec([1, None], tf.int32), scalar_int, scalar_int,
             tf.TensorSpec([], tf.float64), scalar_int] + beam + [PROCESSOR_SPECS] +
            [tf.TensorSpec([layers[kind_], c.num_heads], tf.float32) for kind_ in KIND_NAMES])


def _greedy_loop(model, xla):
    c = model.config
    k = min(TOP_K, c.tgt_vocab_size)
    specs = [("tokens", tf.int32), ("log_prob", tf.float64), ("top_ids", tf.int32),
             ("top_log_probs", tf.float64), ("self", tf.float32), ("cross", tf.float32)]

    def loop(source_ids, cache_len, max_length, seconds, start_id, p, encoder_mask, self_mask,
             cross_mask):
        started = compiled.clock(xla)
        enc = model.encode(source_ids, head_mask=encoder_mask)
        cache = model.init_cache(enc["memory"], cache_len)
        seqs = tf.fill([1, cache_len + 1], start_id)
        fixed = _fixed_processors(p, c.tgt_vocab_size)

        def going(t, seqs, done, empty, cache, arrays):
            return ~done & compiled.in_time(t, started, seconds, xla)

        def step(t, seqs, done, empty, cache, arrays):
            log_probs, _, cache, self_row, cross_row = search_ours.step_log_probs(
                model, seqs[:, t], t, cache, enc["mask"], self_mask, cross_mask, None)
            scores = _apply_processors(log_probs, seqs, t + 1, max_length, p, fixed)
            token = tf.argmax(scores, axis=-1, output_type=tf.int32)  # (1,): ties, lowest id
            # every id banned, no token left: the largest score is -inf (its argmax's)
            empty = ~(tf.gather(scores[0], token[0]) > -np.inf)
            seqs = tf.tensor_scatter_nd_update(seqs, [[0, t + 1]], token)
            top = tf.math.top_k(log_probs, k)
            values = {"tokens": token, "log_prob": tf.gather(log_probs, token, batch_dims=1),
                      "top_ids": top.indices, "top_log_probs": top.values,
                      "self": self_row, "cross": cross_row}
            arrays = {name: a.write(t, values[name]) for name, a in arrays.items()}
            done = (tf.reduce_any(tf.equal(token[0], p["eos"])) | (t + 2 >= max_length) |
                    empty)
            return t + 1 - tf.cast(empty, tf.int32), seqs, done, empty, cache, arrays

        start = (tf.constant(0), seqs, tf.constant(False), tf.constant(False), cache,
                 compiled.arrays(cache_len, specs))
        t, _, _, empty, _, arrays = tf.while_loop(going, step, start)
        return {"steps": t, "encoder_finite": compiled.encoder_finite(enc),
                "no_token_left": empty, **compiled.stacked(arrays, t, xla)}

    return loop


def _beam_loop(model, xla):
    c = model.config
    k = min(TOP_K, c.tgt_vocab_size)
    specs = [("run_slot", tf.int32), ("run_token", tf.int32), ("run_score", tf.float64),
             ("top_ids", tf.int32), ("top_log_probs", tf.float64), ("self", tf.float32),
             ("cross", tf.float32)]
    f64 = tf.float64

    def loop(source_ids, cache_len, max_length, seconds, start_id, width, length_penalty,
             early, p, encoder_mask, self_mask, cross_mask):
        started = compiled.clock(xla)
        enc = model.encode(source_ids, head_mask=encoder_mask)  # once, then one copy per beam
        memory = tf.repeat(enc["memory"], width, axis=0)
        memory_mask = tf.repeat(enc["mask"], width, axis=0)
        cache = model.init_cache(memory, cache_len)
        vocab = c.tgt_vocab_size
        fixed = _fixed_processors(p, vocab)
        columns = cache_len + 1
        # transformers' beams_to_keep, at most the width x vocab candidates there are (an
        # eos_token_id listing most of the vocabulary: transformers' top-k fails there)
        keep = tf.minimum(tf.maximum(2, 1 + tf.size(p["eos"])) * width, width * vocab)
        top_beams = tf.range(keep) < width
        never_improves = tf.constant(NEG, f64)

        def going(t, go, *_):
            return go

        def step(t, go, timed_out, unsat, empty, cache, run, fin, arrays):
            cur = t + 1  # the decoder input's length (the start token included)
            log_probs, _, cache, self_row, cross_row = search_ours.step_log_probs(
                model, run["seq"][:, t], t, cache, memory_mask, self_mask, cross_mask, None)
            scores = _apply_processors(log_probs, run["seq"], cur, max_length, p, fixed)
            total = tf.reshape(scores + run["score"][:, None], [-1])
            empty = ~tf.reduce_any(total > -np.inf)  # every id banned on every beam
            best = tf.math.top_k(total, keep)
            slot = best.indices // vocab
            token = best.indices % vocab
            column = tf.range(columns)[None, :]
            cand = {
                "seq": tf.where(column == cur, token[:, None], tf.gather(run["seq"], slot)),
                "slots": tf.where(column == t, slot[:, None], tf.gather(run["slots"], slot)),
                "lp": tf.where(column == t,
                               tf.gather_nd(log_probs, tf.stack([slot, token], axis=1))[:, None],
                               tf.gather(run["lp"], slot)),
            }
            time_up = (t > 0) & ~compiled.in_time(t, started, seconds, xla)
            hits = (tf.reduce_any(tf.equal(token[:, None], p["eos"][None, :]), axis=1) |
                    (cur + 1 >= max_length) | time_up)

            # the num_beams best candidates that did not end run on
            running = best.values + tf.cast(hits, f64) * NEG
            chosen = tf.math.top_k(running, width).indices
            new_run = {name: tf.gather(value, chosen) for name, value in cand.items()}
            new_run["score"] = tf.gather(running, chosen)
            parents = tf.gather(slot, chosen)

            # the candidates among the first num_beams that ended join the finished ones
            length = tf.cast(t + 1, f64)
            finished_score = best.values / tf.pow(length, length_penalty)
            full = tf.reduce_all(fin["flag"]) & tf.equal(early, 1)
            finished_score += tf.cast(full, f64) * NEG
            finished_score += tf.cast(~unsat, f64) * NEG
            just = hits & top_beams
            finished_score += tf.cast(~just, f64) * NEG
            merged = tf.concat([fin["score"], finished_score], axis=0)
            pick = tf.math.top_k(merged, width).indices
            new_fin = {name: tf.gather(tf.concat([fin[name], cand[name]], axis=0), pick)
                       for name in ("seq", "slots", "lp")}
            new_fin["score"] = tf.gather(merged, pick)
            new_fin["flag"] = tf.gather(tf.concat([fin["flag"], just], axis=0), pick)
            new_fin["len"] = tf.gather(tf.concat([fin["len"], tf.fill([keep], t + 1)], 0), pick)

            cache = {"self": [(tf.gather(key, parents), tf.gather(value, parents))
                              for key, value in cache["self"]], "cross": cache["cross"]}

            # can a running beam still beat the worst finished one? (transformers' heuristic)
            hypothetical = tf.where(tf.equal(early, 2) & (length_penalty > 0),
                                    tf.cast(max_length - 1, f64), tf.cast(cur, f64))
            best_possible = new_run["score"][0] / tf.pow(hypothetical, length_penalty)
            worst = tf.where(new_fin["flag"], tf.reduce_min(new_fin["score"]), never_improves)
            unsat = unsat & tf.reduce_any(best_possible > worst)
            all_done = tf.reduce_all(new_fin["flag"]) & tf.equal(early, 1)
            go = unsat & ~all_done & ~tf.reduce_all(hits) & ~empty

            top = tf.math.top_k(log_probs, k)
            values = {"run_slot": parents, "run_token": tf.gather(token, chosen),
                      "run_score": new_run["score"], "top_ids": top.indices,
                      "top_log_probs": top.values, "self": self_row, "cross": cross_row}
            arrays = {name: a.write(t, values[name]) for name, a in arrays.items()}
            # a step with no token left is not taken: the beams stay as they were, and end
            new_run, new_fin = tf.cond(empty, lambda: (run, fin), lambda: (new_run, new_fin))
            return (t + 1 - tf.cast(empty, tf.int32), go, time_up, unsat, empty, cache, new_run,
                    new_fin, arrays)

        seq = tf.fill([width, columns], start_id)
        run = {"seq": seq, "slots": tf.zeros([width, columns], tf.int32),
               "lp": tf.zeros([width, columns], f64),
               "score": tf.where(tf.range(width) == 0, tf.constant(0.0, f64),
                                  tf.constant(NEG, f64))}
        fin = {"seq": seq, "slots": tf.zeros([width, columns], tf.int32),
               "lp": tf.zeros([width, columns], f64), "score": tf.fill([width], never_improves),
               "flag": tf.zeros([width], tf.bool), "len": tf.zeros([width], tf.int32)}
        start = (tf.constant(0), tf.constant(True), tf.constant(False), tf.constant(True),
                 tf.constant(False), cache,
                 run, fin, compiled.arrays(cache_len, specs))
        t, _, timed_out, _, empty, _, run, fin, arrays = tf.while_loop(going, step, start)
        out = {"steps": t, "encoder_finite": compiled.encoder_finite(enc),
               **compiled.stacked(arrays, t, xla)}
        out.update({f"final_{name}": value for name, value in fin.items()})
        out.update({f"final_run_{name}": value for name, value in run.items()})
        out["final_timed_out"] = timed_out
        out["no_token_left"] = empty
        return out

    return loop


__all__ = ["GeneratedBeam", "GenerationSettings", "generate", "generate_text", "generation_settings",
           "read_generation_config"]
