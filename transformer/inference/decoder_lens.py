"""DecoderLens (Langedijk et al., NAACL 2024 Findings, "DecoderLens: Layerwise Interpretation of
Encoder-Decoder Transformers"): OpenedModel.decoder_lens.

The decoder cross-attends to the output of encoder layer k instead of the last one (k = 0: the
embedded source, before any layer; a pre-LN stack's closing norm applied to every k, as the
model applies it to its last layer), for every k at once, one batch row per k:

- what it translates then: a greedy decode per k (argmax at every step over the ids the
  model's greedy may emit, search_ours.never_emitted left out; no generation config's
  processors), all k in one batch, one decoder pass per step over the prefix so far;
- how probable the model's own output token stays: the teacher-forced log-probability of each
  of the output ids (the translation's, or the typed target's) with memory k.

Row k = L (the last layer) is the model itself: its translation is the plain greedy one
(OpenedModel.translate_plain) and its log-probabilities are OpenedModel.attention's."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer.inference.maps import scored_ids
from transformer.inference.search_ours import never_emitted

__all__ = ["decoder_lens"]


def _memories(model, source_ids: list[int]):
    """Every encoder layer's output as the decoder would read it: (L_enc + 1, N, d_model), and
    the source mask (1, 1, 1, N)."""
    enc = model.encode(tf.constant([source_ids], tf.int32), return_hidden_states=True)
    hidden = enc["hidden_states"][:, 0]  # (L + 1, N, d): the embedded input, then each layer's
    if model.config.norm_first:  # the stack's closing norm: hidden[-1] has it already
        hidden = tf.concat([model.encoder_norm(hidden[:-1]), hidden[-1:]], axis=0)
    return hidden, enc["mask"]


def decoder_lens(ckpt, source: str, target: str | None = None, *, output_ids=None,
                 max_steps: int | None = None, on_progress=None) -> dict:
    """For each encoder layer k (0: the embedded source; L: the last, the model itself) as the
    decoder's memory: its greedy translation and the log-probability of each output token.
    Returns a dict: "source_tokens" (N), "output_tokens" (T: the translation's or the typed
    target's), "layers" (K = L_enc + 1: 0 .. L_enc), "log_probs" (K, T) of the output tokens
    under teacher forcing with memory k, "translations" (K: each a dict of "token_ids",
    "tokens", "text", "stopped_by": "end" or "length"). max_steps: the most tokens a greedy
    decode emits (default: the model's step budget). on_progress(done, total): after each
    decode step."""
    model, config = ckpt.model, ckpt.config
    out = scored_ids(ckpt, source, target, output_ids)
    source_ids = ckpt.encode_source(source)
    memories, mask = _memories(model, source_ids)  # (K, N, d), (1, 1, 1, N)
    layers = int(memories.shape[0])
    masks = tf.tile(mask, [layers, 1, 1, 1])
    # teacher forcing: every k at once
    target_ids = np.tile([[config.start_id] + list(out[:-1])], (layers, 1)).astype(np.int32)
    logits = model.decode(tf.constant(target_ids), memories, masks)["logits"]  # (K, T, V)
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1).numpy()
    chosen = log_probs[:, np.arange(len(out)), out]  # (K, T)
    # greedy, every k at once
    steps = ckpt.step_budget() if max_steps is None else int(max_steps)
    banned = never_emitted(config)
    prefix = np.full((layers, 1), config.start_id, np.int32)
    done = np.zeros(layers, bool)
    for step in range(steps):
        step_logits = model.decode(tf.constant(prefix), memories, masks)["logits"][:, -1]
        step_logits = np.array(step_logits, np.float32)
        step_logits[:, banned] = -np.inf  # never padding or <start>, as the model's greedy
        picked = step_logits.argmax(-1).astype(np.int32)
        picked = np.where(done, config.pad_id, picked)  # a finished row only pads
        prefix = np.concatenate([prefix, picked[:, None]], axis=1)
        done |= picked == config.end_id
        if on_progress is not None:
            on_progress(step + 1, steps)
        if done.all():
            break
    if on_progress is not None:
        on_progress(steps, steps)
    tok = ckpt.target_tokenizer
    translations = []
    for k in range(layers):
        ids = [int(i) for i in prefix[k, 1:]]
        ended = config.end_id in ids
        ids = ids[:ids.index(config.end_id) + 1] if ended else ids
        translations.append({"token_ids": ids, "tokens": tok.ids_to_pieces(ids),
                             "text": tok.decode(ids), "stopped_by": "end" if ended else "length"})
    return {"source_tokens": ckpt.source_tokenizer.ids_to_pieces(source_ids),
            "output_tokens": tok.ids_to_pieces(out), "layers": list(range(layers)),
            "log_probs": chosen.astype(np.float32), "translations": translations}
