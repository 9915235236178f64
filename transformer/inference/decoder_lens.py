"""DecoderLens (Langedijk et al., NAACL 2024 Findings, "DecoderLens: Layerwise Interpretation of
Encoder-Decoder Transformers"): OpenedModel.decoder_lens.

The decoder cross-attends to the output of encoder layer k instead of the last one (k = 0: the
embedded source, before any layer; a pre-LN stack's closing norm applied to every k, as the
model applies it to its last layer), for every k at once, one batch row per k:

- what it translates then: a greedy decode per k (argmax at every step over the ids the
  model's greedy may emit, search_ours.never_emitted left out; no generation config's
  processors), all k in one batch, one cached decoder step per token;
- how probable the model's own output token stays: the teacher-forced log-probability of each
  of the output ids (the translation's, or the typed target's) with memory k.

Row k = L (the last layer) is the model itself: its translation is the plain greedy one
(OpenedModel.translate_plain) and its log-probabilities are OpenedModel.attention's.

Both run in one compiled function per architecture (compiled.shared_function: traced once,
then shared by every model of that config)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer.inference import compiled
from transformer.inference.maps import scored_ids
from transformer.inference.search_ours import never_emitted_mask

__all__ = ["decoder_lens"]


def _lens_loop(model):
    """The whole DecoderLens of one source as one compiled function: every encoder layer's
    output as the decoder's memory, one batch row per layer k, for the teacher-forced scores and
    a cached greedy decode of every row at once (one decoder step per token, not the prefix
    again)."""
    c = model.config

    def loop(source_ids, output_ids, cache_len, max_steps):
        # source_ids (1, N), output_ids (T,)
        enc = model.encode(source_ids, return_hidden_states=True)
        memories = enc["hidden_states"][:, 0]  # (K, N, d): the embedded input, each layer's
        if c.norm_first:  # the stack's closing norm: the last layer's output has it already
            memories = tf.concat([model.encoder_norm(memories[:-1]), memories[-1:]], axis=0)
        layers = tf.shape(memories)[0]
        masks = tf.tile(enc["mask"], [layers, 1, 1, 1])  # (K, 1, 1, N)
        # teacher forcing: every k at once
        inputs = tf.concat([[c.start_id], output_ids[:-1]], axis=0)
        logits = model.decode(tf.tile(inputs[tf.newaxis], [layers, 1]), memories,
                              masks)["logits"]  # (K, T, V)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        picked_ids = tf.tile(output_ids[tf.newaxis, :, tf.newaxis], [layers, 1, 1])
        chosen = tf.gather(log_probs, picked_ids, batch_dims=2)[..., 0]  # (K, T)
        # greedy, every k at once, on the decoder's cache
        cache = model.init_cache(memories, cache_len)
        blocked = never_emitted_mask(c)  # never padding or <start>, as the model's greedy

        def going(t, tokens, done, cache, picks):
            return (t < max_steps) & ~tf.reduce_all(done)

        def step(t, tokens, done, cache, picks):
            out = model.decode_step(tokens[:, tf.newaxis], t, cache, masks)
            step_logits = tf.cast(out["logits"][:, 0], tf.float32)  # (K, V)
            step_logits = tf.where(blocked, tf.constant(-np.inf, tf.float32), step_logits)
            picked = tf.argmax(step_logits, axis=-1, output_type=tf.int32)
            picked = tf.where(done, c.pad_id, picked)  # a finished row only pads
            return (t + 1, picked, done | (picked == c.end_id), out["cache"],
                    {"tokens": picks["tokens"].write(t, picked)})

        start = (tf.constant(0), tf.fill([layers], c.start_id), tf.zeros([layers], tf.bool),
                 cache, compiled.arrays(cache_len, [("tokens", tf.int32)]))
        t, _, _, _, picks = tf.while_loop(going, step, start)
        return {"log_probs": chosen, "steps": t,
                **compiled.stacked(picks, t, compiled.JIT_COMPILE)}  # tokens (steps, K)

    return loop


_SIGNATURE = [tf.TensorSpec([1, None], tf.int32), tf.TensorSpec([None], tf.int32),
              tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int32)]


def compiled_lens(model) -> compiled.SharedFunction:
    """DecoderLens' compiled function, shared by every model of this architecture."""
    return compiled.shared_function(model, "decoder_lens", _lens_loop, _SIGNATURE)


def lens_pass(model, source_ids, output_ids, max_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """compiled_lens on one source: (the teacher-forced log-probability of each output id with
    memory k (K, T), each k's greedy ids (K, steps taken))."""
    function = compiled_lens(model)
    cache_len = compiled.bucket(max(max_steps, 1), model.config.max_len)
    out = function(model, tf.constant([source_ids], tf.int32), tf.constant(output_ids, tf.int32),
                   tf.constant(cache_len, tf.int32), tf.constant(max_steps, tf.int32))
    steps = int(out["steps"])
    return out["log_probs"].numpy(), out["tokens"].numpy()[:steps].T


def decoder_lens(ckpt, source: str, target: str | None = None, *, output_ids=None,
                 max_steps: int | None = None, on_progress=None) -> dict:
    """For each encoder layer k (0: the embedded source; L: the last, the model itself) as the
    decoder's memory: its greedy translation and the log-probability of each output token.
    Returns a dict: "source_tokens" (N), "output_tokens" (T: the translation's or the typed
    target's), "layers" (K = L_enc + 1: 0 .. L_enc), "log_probs" (K, T) of the output tokens
    under teacher forcing with memory k, "translations" (K: each a dict of "token_ids",
    "tokens", "text", "stopped_by": "end" or "length"). max_steps: the most tokens a greedy
    decode emits (default: the model's step budget). on_progress(done, total): once the
    compiled pass has returned."""
    model, config = ckpt.model, ckpt.config
    out = scored_ids(ckpt, source, target, output_ids)
    source_ids = ckpt.encode_source(source)
    steps = ckpt.step_budget() if max_steps is None else int(max_steps)
    chosen, picks = lens_pass(model, source_ids, out, steps)  # (K, T), (K, steps taken)
    layers = chosen.shape[0]
    if on_progress is not None:
        on_progress(steps, steps)
    tok = ckpt.target_tokenizer
    translations = []
    for k in range(layers):
        ids = [int(i) for i in picks[k]]
        ended = config.end_id in ids
        ids = ids[:ids.index(config.end_id) + 1] if ended else ids
        translations.append({"token_ids": ids, "tokens": tok.ids_to_pieces(ids),
                             "text": tok.decode(ids), "stopped_by": "end" if ended else "length"})
    return {"source_tokens": ckpt.source_tokenizer.ids_to_pieces(source_ids),
            "output_tokens": tok.ids_to_pieces(out), "layers": list(range(layers)),
            "log_probs": chosen.astype(np.float32), "translations": translations}
