"""Greedy decoding, one token at a time, capturing each step's attention.

Two paths give identical tokens and attention:
- cached (default): the encoder runs once, each layer's cross-attention keys and values are computed
  once, and decoder self-attention keys/values live in a fixed-size cache written one slot per step,
  so the compiled step function never retraces and each step costs the same;
- naive (use_cache=False): the reference, re-running the decoder on the whole prefix every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from .kinds import head_masks
from .masks import pad_ids


TOP_K = 5


@dataclass
class DecodeStep:
    """One generated token and what produced it."""

    token: str
    token_id: int
    log_prob: float  # log-probability of the chosen token
    top_k: list[tuple[str, int, float]]  # (token, id, probability), most probable first
    cross: np.ndarray  # (L_dec, H, N): the new token's cross-attention over the source
    self: np.ndarray  # (L_dec, H, t + 1): its decoder self-attention over the prefix


@dataclass
class Decoding:
    """The result of decoding one source."""

    token_ids: list[int]  # generated ids, the end id included when produced
    tokens: list[str]
    text: str
    steps: list[DecodeStep] = field(default_factory=list)

    @property
    def log_prob(self) -> float:
        return float(sum(step.log_prob for step in self.steps))

    def cross_attention(self) -> np.ndarray:
        """(L_dec, H, T, N): every step's cross-attention stacked (the alignment matrix)."""
        return np.stack([step.cross for step in self.steps], axis=2)


def greedy_decode(model, source_ids, *, max_len, use_cache=True, stop_at_end=True, head_mask=None,
                  tokenizer=None, on_step=None) -> Decoding:
    """Greedily decode one source (a 1-D id sequence). tokenizer names the tokens, if given."""
    source_ids = np.asarray(source_ids, np.int32)
    if source_ids.ndim != 1:
        raise ValueError(f"source_ids must be one sequence (1-D), got shape {source_ids.shape}")
    return greedy_decode_batch(model, [source_ids], max_len=max_len, use_cache=use_cache,
                               stop_at_end=stop_at_end, head_mask=head_mask, tokenizer=tokenizer,
                               on_step=on_step)[0]


def greedy_decode_batch(model, sources, *, max_len, use_cache=True, stop_at_end=True,
                        head_mask=None, tokenizer=None, capture=True,
                        on_step=None) -> list[Decoding]:
    """Decode many sources at once. Each stops on its own end token; results equal decoding them
    one by one. sources: a list of 1-D id sequences (padded here) or a (B, N) padded array.
    capture=False skips keeping attention (corpus-level use); on_step(t) is called after each step
    (progress bars, benchmarks)."""
    config = model.config
    source_ids = (np.asarray(sources, np.int32) if isinstance(sources, np.ndarray) and
                  sources.ndim == 2 else pad_ids(sources, config.pad_id))
    if not 1 <= max_len <= config.max_len:
        raise ValueError(f"max_len must be in [1, {config.max_len}] (the model's max_len), got {max_len}")
    head_mask = _head_masks(model, head_mask)
    batch = source_ids.shape[0]
    lengths = (source_ids != config.pad_id).sum(axis=1)
    run = _CachedRun(model, source_ids, head_mask, max_len) if use_cache else \
        _NaiveRun(model, source_ids, head_mask)
    prefix = np.full((batch, 1), config.start_id, np.int32)
    finished = np.zeros(batch, bool)
    done_at = np.full(batch, max_len)
    steps: list[list[DecodeStep]] = [[] for _ in range(batch)]
    for t in range(max_len):
        logits, self_weights, cross_weights = run.step(prefix, t)
        # (B, V), (L, B, H, t + 1), (L, B, H, N)
        log_probs = log_softmax(logits)
        choosable = log_probs.copy()
        choosable[:, [config.pad_id, config.start_id]] = -np.inf  # never emit padding or <start>
        next_ids = choosable.argmax(axis=-1).astype(np.int32)
        for b in np.flatnonzero(~finished):
            steps[b].append(_step(next_ids[b], log_probs[b], self_weights[:, b], cross_weights[:, b],
                                  lengths[b], tokenizer, capture))
        prefix = np.concatenate([prefix, next_ids[:, None]], axis=1)
        if on_step is not None:
            on_step(t)
        if stop_at_end:
            newly = ~finished & (next_ids == config.end_id)
            done_at[newly] = t + 1
            finished |= newly
            if finished.all():
                break
    results = []
    for b in range(batch):
        ids = prefix[b, 1:done_at[b] + 1].tolist() if stop_at_end else prefix[b, 1:].tolist()
        results.append(Decoding(ids, _names(ids, tokenizer), _text(ids, tokenizer), steps[b]))
    return results


@dataclass
class BeamDecoding(Decoding):
    """The best hypothesis of a beam search (its steps hold its own attention), plus the beam."""

    score: float = 0.0  # length-normalised log-probability
    hypotheses: list[Decoding] = field(default_factory=list)  # finished, best first
    beam_steps: list[list[tuple[list[str], float]]] = field(default_factory=list)
    # beam_steps[t]: the hypotheses alive after step t, as (tokens, log-probability), best first


def length_normalised(log_prob: float, length: int, alpha: float) -> float:
    """GNMT's length penalty: log_prob / ((5 + length) / 6)^alpha; alpha=0 is the raw sum."""
    return log_prob / (((5.0 + length) / 6.0) ** alpha)


def beam_search(model, source_ids, *, beam_width, max_len, length_penalty=0.6, use_cache=True,
                head_mask=None, tokenizer=None) -> BeamDecoding:
    """Beam search over one source; every hypothesis keeps its own per-step attention.

    Each step expands every live hypothesis by its beam_width best tokens and keeps the
    beam_width best candidates; one that ends with the end token is finished. Search stops when
    beam_width hypotheses are finished or at max_len; the best finished one by length-normalised
    score wins. beam_width=1 is greedy decoding.
    """
    config = model.config
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    if not 1 <= max_len <= config.max_len:
        raise ValueError(f"max_len must be in [1, {config.max_len}] (the model's max_len), got {max_len}")
    source_ids = np.asarray(source_ids, np.int32).reshape(-1)
    # Every slot of the fixed-size beam decodes the same source: tile it.
    sources = np.repeat(source_ids[None], beam_width, axis=0)
    masks = _head_masks(model, head_mask)
    run = _CachedRun(model, sources, masks, max_len) if use_cache else \
        _NaiveRun(model, sources, masks)
    source_len = int((source_ids != config.pad_id).sum())
    # A hypothesis: (log_prob, ids, steps). Slot 0 starts alive; the others are placeholders.
    live = [(0.0, [], [])]
    finished: list[tuple[float, float, list[int], list[DecodeStep]]] = []
    beam_steps = []
    for t in range(max_len):
        slots = live + [live[0]] * (beam_width - len(live))
        prefix = np.array([[config.start_id] + ids for _, ids, _ in slots], np.int32)
        logits, self_weights, cross_weights = run.step(prefix, t)
        log_probs = log_softmax(logits)
        choosable = log_probs.copy()
        choosable[:, [config.pad_id, config.start_id]] = -np.inf
        candidates = []
        for slot, (score, ids, steps) in enumerate(live):
            for token in np.argsort(-choosable[slot], kind="stable")[:beam_width]:
                candidates.append((score + choosable[slot, token], slot, int(token)))
        candidates.sort(key=lambda c: -c[0])  # stable: ties keep slot order, then token order
        new_live, parents = [], []
        for score, slot, token in candidates[:beam_width]:
            _, ids, steps = live[slot]
            step = _step(token, log_probs[slot], self_weights[:, slot], cross_weights[:, slot],
                         source_len, tokenizer, True)
            hypothesis = (float(score), ids + [token], steps + [step])
            if token == config.end_id:
                finished.append((length_normalised(score, len(ids) + 1, length_penalty),) +
                                hypothesis)
            else:
                new_live.append(hypothesis)
                parents.append(slot)
        beam_steps.append([(_names(ids, tokenizer), score) for score, ids, _ in new_live])
        if len(finished) >= beam_width or not new_live:
            break
        run.reorder(parents + [parents[0]] * (beam_width - len(parents)))
        live = new_live
    if not finished:  # nothing ended within max_len: rank what is alive
        finished = [(length_normalised(score, len(ids), length_penalty), score, ids, steps)
                    for score, ids, steps in live]
    finished.sort(key=lambda f: -f[0])
    hypotheses = [Decoding(ids, _names(ids, tokenizer), _text(ids, tokenizer), steps)
                  for _, _, ids, steps in finished]
    best = hypotheses[0]
    return BeamDecoding(best.token_ids, best.tokens, best.text, best.steps, score=finished[0][0],
                        hypotheses=hypotheses, beam_steps=beam_steps)


class _CachedRun:
    """Encoder once, cross K/V once (a static cache), self K/V in a cache written one slot per
    step; one compiled step for every position."""

    def __init__(self, model, source_ids, head_mask, max_len):
        enc = model.encode(source_ids, head_mask=head_mask["encoder"])
        self.memory_mask = enc["mask"]
        self.cache = model.init_cache(enc["memory"], max_len)
        self.self_head_mask = head_mask["decoder"]
        self.cross_head_mask = head_mask["cross"]
        self.step_fn = _compiled_step(model)

    def reorder(self, parents):
        """Beam search: slot i continues the hypothesis that was in slot parents[i]."""
        self.cache["self"] = [(tf.gather(k, parents), tf.gather(v, parents))
                              for k, v in self.cache["self"]]

    def step(self, prefix, t):
        logits, self.cache, self_weights, cross_weights = self.step_fn(
            tf.constant(prefix[:, -1:]), tf.constant(t, tf.int32), self.cache,
            self.memory_mask, self.self_head_mask, self.cross_head_mask)
        return logits.numpy(), self_weights.numpy()[..., : t + 1], cross_weights.numpy()


def _compiled_step(model):
    """One tf.function per model (its traces are reused by every decode of that model)."""
    fn = getattr(model, "_cached_step_fn", None)
    if fn is None:
        # Batch, source length and cache length are left open: one trace serves every decode.
        c = model.config
        kv = tf.TensorSpec([None, c.num_heads, None, c.head_dim], tf.float32)
        head_mask = tf.TensorSpec([c.num_decoder_layers, c.num_heads], tf.float32)
        caches = {"self": [(kv, kv)] * c.num_decoder_layers,
                  "cross": [(kv, kv)] * c.num_decoder_layers}
        signature = [tf.TensorSpec([None, 1], tf.int32), tf.TensorSpec([], tf.int32), caches,
                     tf.TensorSpec([None, 1, 1, None], tf.float32), head_mask, head_mask]

        @tf.function(input_signature=signature)
        def fn(token_ids, position, cache, memory_mask, self_head_mask, cross_head_mask):
            # token_ids (B, 1) -> logits (B, V), self (L, B, H, max_len), cross (L, B, H, N)
            out = model.decode_step(token_ids, position, cache, memory_mask, self_head_mask,
                                    cross_head_mask)
            return (out["logits"][:, 0], out["cache"], out["self_attention"][:, :, :, 0],
                    out["cross_attention"][:, :, :, 0])
        model._cached_step_fn = fn  # a compiled function, not per-user state
    return fn


class _NaiveRun:
    """The reference: the whole decoder re-runs on the prefix at every step (compiled too, so a
    benchmark compares the algorithms, not graph against eager execution)."""

    def __init__(self, model, source_ids, head_mask):
        enc = model.encode(source_ids, head_mask=head_mask["encoder"])
        self.memory, self.memory_mask = enc["memory"], enc["mask"]
        self.head_mask = head_mask
        self.step_fn = _compiled_naive_step(model)

    def reorder(self, parents):
        """Nothing to reorder: the prefix is re-run from scratch every step."""

    def step(self, prefix, t):
        logits, self_weights, cross_weights = self.step_fn(
            tf.constant(prefix), self.memory, self.memory_mask, self.head_mask["decoder"],
            self.head_mask["cross"])
        return logits.numpy(), self_weights.numpy(), cross_weights.numpy()


def _compiled_naive_step(model):
    fn = getattr(model, "_naive_step_fn", None)
    if fn is None:
        c = model.config
        head_mask = tf.TensorSpec([c.num_decoder_layers, c.num_heads], tf.float32)
        signature = [tf.TensorSpec([None, None], tf.int32),
                     tf.TensorSpec([None, None, c.d_model], tf.float32),
                     tf.TensorSpec([None, 1, 1, None], tf.float32), head_mask, head_mask]

        @tf.function(input_signature=signature)
        def fn(prefix, memory, memory_mask, self_head_mask, cross_head_mask):
            # prefix (B, t + 1) -> last row: logits (B, V), self (L, B, H, t + 1), cross (L, B, H, N)
            dec = model.decode(prefix, memory, memory_mask, self_head_mask=self_head_mask,
                               cross_head_mask=cross_head_mask)
            return (dec["logits"][:, -1], dec["self_attention"][:, :, :, -1],
                    dec["cross_attention"][:, :, :, -1])
        model._naive_step_fn = fn
    return fn


def _step(token_id, log_probs, self_weights, cross_weights, source_len, tokenizer, capture):
    top = np.argsort(-log_probs)[:TOP_K]
    return DecodeStep(
        token=_names([int(token_id)], tokenizer)[0],
        token_id=int(token_id),
        log_prob=float(log_probs[token_id]),
        top_k=[(_names([int(i)], tokenizer)[0], int(i), float(np.exp(log_probs[i]))) for i in top],
        cross=cross_weights[:, :, :source_len].astype(np.float32) if capture else None,
        self=self_weights.astype(np.float32) if capture else None,
    )


def _head_masks(model, head_mask):
    """Full (layers, heads) float masks for each kind, ones where not given."""
    return {kind: tf.constant(mask) for kind, mask in
            head_masks(model.config, given=head_mask).items()}


def log_softmax(logits) -> np.ndarray:
    """Log-probabilities over the last axis, in float64."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _names(ids, tokenizer):
    return tokenizer.ids_to_pieces(ids) if tokenizer is not None else [str(i) for i in ids]


def _text(ids, tokenizer):
    return tokenizer.decode(ids) if tokenizer is not None else " ".join(str(i) for i in ids)


__all__ = ["DecodeStep", "Decoding", "greedy_decode", "greedy_decode_batch"]
