"""Value zeroing of one sentence pair: OpenedModel.contributions(method="value_zeroing").

For every layer and attention kind (encoder self-, decoder self- and cross-attention), the
layer is run on its clean input (the teacher-forced pass's hidden states) once per key token,
with that token's value vectors zeroed in every head of that sublayer
(transformer.model.attention's value_mask), all of them in one batch: row 0 clean, row j + 1
token j zeroed. Each layer is corrupted alone (its input is always the clean one), as in the
paper and inseq. The last layer of a pre-LN stack is compared after the stack's closing norm
(what the model hands on, and what transformers' hidden states hold). The arithmetic (cosine
distances, the normalised rows) is transformer.analysis.context_mixing's."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer.analysis.context_mixing import cosine_distances, normalized
from transformer.inference.maps import scored_ids

__all__ = ["value_zeroing"]


def _zeroing_masks(length: int) -> tf.Tensor:
    """(length + 1, length): a row of ones (the clean run), then row j + 1 zero at j alone."""
    return tf.constant(np.concatenate([np.ones((1, length)), 1.0 - np.eye(length)]),
                       tf.float32)


def _tiled(x, rows: int):
    return tf.tile(x, [rows] + [1] * (len(x.shape) - 1))


def value_zeroing(ckpt, source: str, target: str | None = None, *, output_ids=None,
                  head_mask=None, on_progress=None) -> dict:
    """Each layer's value-zeroing scores for each attention kind, on the output ids
    OpenedModel.attention would score (the typed target's, else output_ids, else the
    translation's). Returns a dict: "source_tokens" (N), "target_tokens" (T: the decoder's
    inputs), "output_tokens" (T), and per kind the cosine distance of each query token's layer
    output when each key token's values are zeroed: "encoder" (L_enc, N, N), "decoder"
    (L_dec, T, T) (0 above the diagonal: a later token's values never reach an earlier one),
    "cross" (L_dec, T, N); "<kind>_normalized" the same with each row a distribution over the
    keys (analysis.context_mixing.normalized). on_progress(done, total): after each layer and
    kind."""
    if head_mask is not None:
        raise ValueError("value zeroing of a model with silenced heads is not computed here")
    model, config = ckpt.model, ckpt.config
    out = scored_ids(ckpt, source, target, output_ids)
    source_ids = ckpt.encode_source(source)
    target_ids = [config.start_id] + list(out[:-1])
    n, t_len = len(source_ids), len(target_ids)
    src, tgt = tf.constant([source_ids], tf.int32), tf.constant([target_ids], tf.int32)
    enc = model.encode(src, return_hidden_states=True)
    memory, memory_mask = enc["memory"], enc["mask"]  # (1, N, d), (1, 1, 1, N)
    dec = model.decode(tgt, memory, memory_mask, return_hidden_states=True)
    enc_inputs = enc["hidden_states"]  # (L_enc + 1, 1, N, d): layer l's input at l (l < L)
    dec_inputs = dec["hidden_states"]
    self_mask = dec["mask"]  # (1, 1, T, T)
    enc_bias = dec_bias = None
    if model.encoder_position_bias is not None:  # T5: every layer's scores add the same bias
        enc_bias = model.encoder_position_bias(tf.range(n), tf.range(n))
        dec_bias = model.decoder_position_bias(tf.range(t_len), tf.range(t_len))
    layers_enc, layers_dec = model.encoder_layers, model.decoder_layers
    total, done = len(layers_enc) + 2 * len(layers_dec), 0
    scores = {"encoder": [], "decoder": [], "cross": []}

    def finish(stack: str, i: int, output):
        last = i == (len(layers_enc) if stack == "encoder" else len(layers_dec)) - 1
        if last and stack == "encoder" and config.norm_first:
            output = model.encoder_norm(output)
        if last and stack == "decoder":
            output = model.final_norm(output)  # the identity in a post-LN model
        output = output.numpy()
        return cosine_distances(output[0], output[1:])  # (q, k)

    for i, layer in enumerate(layers_enc):
        rows = n + 1
        result = layer(_tiled(enc_inputs[i], rows), attention_mask=_tiled(memory_mask, rows),
                       position_bias=enc_bias, value_mask=_zeroing_masks(n))
        scores["encoder"].append(finish("encoder", i, result["output"]))
        done += 1
        if on_progress is not None:
            on_progress(done, total)
    for i, layer in enumerate(layers_dec):
        for kind, length in (("decoder", t_len), ("cross", n)):
            rows = length + 1
            masks = {"self_value_mask" if kind == "decoder" else "cross_value_mask":
                     _zeroing_masks(length)}
            result = layer(_tiled(dec_inputs[i], rows), _tiled(memory, rows),
                           self_mask=_tiled(self_mask, rows),
                           cross_mask=_tiled(memory_mask, rows), position_bias=dec_bias,
                           **masks)
            scores[kind].append(finish("decoder", i, result["output"]))
            done += 1
            if on_progress is not None:
                on_progress(done, total)
    result = {"source_tokens": ckpt.source_tokenizer.ids_to_pieces(source_ids),
              "target_tokens": ckpt.target_tokenizer.ids_to_pieces(target_ids),
              "output_tokens": ckpt.target_tokenizer.ids_to_pieces(out)}
    for kind, layers in scores.items():
        stacked = np.stack(layers)  # (L, q, k)
        if kind == "decoder":
            stacked = np.tril(stacked)  # exact zeros where the look-ahead mask hides a key
        result[kind] = stacked.astype(np.float32)
        result[f"{kind}_normalized"] = normalized(stacked).astype(np.float32)
    return result
