"""ALTI+ of one sentence pair: OpenedModel.contributions(method="alti"), and ALTI-Logit on the
same decomposition: method="alti_logit" (transformer.analysis.alti_logit's arithmetic).

This module gathers what the NumPy arithmetic of transformer.analysis.alti needs from one
compiled teacher-forced pass (each kind's attention weights and per-head values, each stack's
layer inputs: attention_maps(values=True, hidden_states=True)) and from the model's weights
(each attention sublayer's output projection, each post-LN norm), and rebuilds the one input
the pass does not hand out: the residual of each decoder layer's cross-attention, the self-
attention sublayer's output (its z, or LN(z) in a post-LN model), from the same terms.

The feed-forward sublayers, the embedding norm (BART) and a pre-LN stack's closing norm act on
each token alone: they mix nothing and are not part of the decomposition (the paper's choice).
"""

from __future__ import annotations

import numpy as np

from transformer.analysis.alti import Norm, Sublayer, alti_rollout, sublayer_contributions
from transformer.core.kinds import head_masks
from transformer.inference.maps import attention_maps, scored_ids

__all__ = ["alti", "alti_logit_attributions"]


def _norm(layer, config) -> Norm | None:
    """A post-LN sublayer's norm as a Norm; None in a pre-LN model (norm_first), where the
    sublayer's output is the residual stream's sum itself."""
    return None if config.norm_first else _any_norm(layer, config)


def _projection(attention) -> tuple[np.ndarray, np.ndarray | None]:
    """An attention layer's output projection: W_O (H * head_dim, d_model), b_O or None."""
    dense = attention.output_dense
    bias = dense.bias.numpy().astype(np.float64) if dense.use_bias else None
    return dense.kernel.numpy(), bias


def _sublayer(maps, kind, layer_index, attention, norm, residual, mask) -> Sublayer:
    w_o, b_o = _projection(attention)
    weights = maps[kind][layer_index] * mask[layer_index][:, None, None]  # (H, q, k)
    return Sublayer(weights=weights, v=maps[f"{kind}_v"][layer_index], w_o=w_o, b_o=b_o,
                    residual=residual, norm=norm)


def _decomposition(ckpt, source: str, ids, head_mask) -> dict:
    """One pass and ALTI's arithmetic on it: the maps, each attention sublayer (Sublayer) and
    its sublayer_contributions, per stack."""
    model, config = ckpt.model, ckpt.config
    maps = attention_maps(ckpt, [ckpt.encode_source(source)], [ids], head_mask, values=True,
                          hidden_states=True)[0]
    masks = head_masks(config, given=head_mask)
    parts = {"encoder": [], "decoder": [], "cross": []}  # (Sublayer, its contributions dict)
    for i, layer in enumerate(model.encoder_layers):
        sub = _sublayer(maps, "encoder", i, layer.self_attention,
                        _norm(layer.self_attention_layer_norm, config),
                        maps["encoder_hidden_states"][i], masks["encoder"])
        parts["encoder"].append((sub, sublayer_contributions(sub)))
    for i, layer in enumerate(model.decoder_layers):
        sub = _sublayer(maps, "decoder", i, layer.self_attention,
                        _norm(layer.self_attention_layer_norm, config),
                        maps["decoder_hidden_states"][i], masks["decoder"])
        self_part = sublayer_contributions(sub)
        parts["decoder"].append((sub, self_part))
        sub = _sublayer(maps, "cross", i, layer.cross_attention,
                        _norm(layer.cross_attention_layer_norm, config),
                        self_part["output"], masks["cross"])
        parts["cross"].append((sub, sublayer_contributions(sub, cross=True)))
    rollout = alti_rollout(*([c["contributions"] for _, c in parts[kind]]
                             for kind in ("encoder", "decoder", "cross")))
    return {"maps": maps, "parts": parts, "rollout": rollout}


def alti(ckpt, source: str, target: str | None = None, *, output_ids=None,
         head_mask=None) -> dict:
    """ALTI+ for the output ids OpenedModel.attention would score (the typed target's, or the
    translation's). Returns a dict:

        "method": "alti", "source_tokens" (N), "target_tokens" (T: the decoder's inputs, the
        start token first), "output_tokens" (T), "log_probs" (T,);
        "source" (T, N), "target" (T, T): row t, what output token t took from each source
        token and each decoder input (columns after t are 0); rows of both together sum to 1;
        "source_share" (T,): row t's source total, in [0, 1];
        "encoder_layers" (L_enc, N, N), "decoder_layers" (L_dec, T, T), "cross_layers"
        (L_dec, T, N + 1): each layer's own contributions (the last cross column: the
        residual's), rows summing to 1;
        "encoder_rollout" (L_enc, N, N), "rollout" (L_dec, T, N + T): the rollout after each
        layer (see transformer.analysis.alti).

    head_mask: {kind: (layers, heads)}, any subset: a silenced head's terms are 0.
    """
    ids = scored_ids(ckpt, source, target, output_ids, head_mask)
    if not ids:
        raise ValueError("there is no output token to attribute")
    found = _decomposition(ckpt, source, ids, head_mask)
    maps, parts = found["maps"], found["parts"]
    result = {"method": "alti", "source_tokens": maps["source_tokens"],
              "target_tokens": maps["target_tokens"], "output_tokens": maps["output_tokens"],
              "log_probs": maps["log_probs"]}
    result.update({name: np.asarray(value, np.float32)
                   for name, value in found["rollout"].items()})
    result.update({name: np.stack([c["contributions"] for _, c in parts[kind]]).astype(
        np.float32) for name, kind in (("encoder_layers", "encoder"),
                                       ("decoder_layers", "decoder"), ("cross_layers", "cross"))})
    return result


def _any_norm(layer, config) -> Norm:
    """A norm layer as a Norm, whichever side of the sublayer it sits (a pre-LN stack's final
    norm included)."""
    if config.norm == "rms":
        return Norm("rms", layer.scale.numpy().astype(np.float64), None, float(layer.epsilon))
    return Norm("layer", layer.gamma.numpy().astype(np.float64),
                layer.beta.numpy().astype(np.float64), float(layer.epsilon))


def _unembedding(model, ids) -> np.ndarray:
    """The output projection's row of each id, times the output scale: (len(ids), d_model)."""
    c = model.config
    table = (model.target_token_embedding.embeddings.numpy() if c.tie_output
             else model.output_projection.kernel.numpy().T)  # (V, d_model)
    return np.asarray(table, np.float64)[np.asarray(ids)] * c.output_scale


def _feedforward_z(layer, y) -> np.ndarray:
    """The feed-forward sublayer's sum before a post-LN norm (its output in a pre-LN model):
    y + FFN(y), or y + FFN(LN(y)) pre-LN; y (T, d_model) the cross-attention's output."""
    import tensorflow as tf

    x = tf.constant(np.asarray(y, np.float32)[np.newaxis])
    h = layer._sublayer_input(x, layer.feedforward_layer_norm)
    return np.asarray(y, np.float64) + layer.feedforward(h).numpy()[0].astype(np.float64)


def alti_logit_attributions(ckpt, source: str, target: str | None = None, *, output_ids=None,
                            head_mask=None, foil=None, on_progress=None) -> dict:
    """ALTI-Logit (transformer.analysis.alti_logit) for the output ids OpenedModel.attention
    would score: each source and prefix token's contribution to each output token's logit (with
    foil, one id or None per output step, to its logit minus the foil's). Returns a dict:
    "method": "alti_logit", the tokens, "log_probs" (T,), "source" (T, N) and "target" (T, T)
    (signed, in logits), "layer_source" (L_dec, T, N) and "layer_target" (L_dec, T, T) (each
    decoder layer's part), "self_updates" (L_dec, T, T) and "cross_updates" (L_dec, T, N) (each
    key token's direct logit update, before the rollout), "scores" (T,): the logit of each
    output token (minus the foil's where there is one); with foil "foil_ids", "foil_tokens".
    on_progress(done, total): after the pass and ALTI's decomposition, then after each decoder
    layer's updates."""
    from transformer.analysis.alti_logit import alti_logit, logit_updates, readouts
    from transformer.inference.gradients import NO_FOIL, _checked_foils

    ids = scored_ids(ckpt, source, target, output_ids, head_mask)
    if not ids:
        raise ValueError("there is no output token to attribute")
    foils = _checked_foils(ckpt, ids, foil)  # (T,) int32, NO_FOIL where none
    model, config = ckpt.model, ckpt.config
    found = _decomposition(ckpt, source, ids, head_mask)
    maps, parts = found["maps"], found["parts"]
    layers = len(model.decoder_layers)
    if on_progress is not None:
        on_progress(1, layers + 1)
    u = _unembedding(model, ids)  # (T, d_model)
    has_foil = foils != NO_FOIL
    u[has_foil] -= _unembedding(model, foils[has_foil])
    ffn_z = [_feedforward_z(layer, parts["cross"][i][1]["output"])
             for i, layer in enumerate(model.decoder_layers)]
    if config.norm_first:
        final = _any_norm(model.decoder_norm, config)
        reads = readouts(u, layers, final=(final, final.scale(ffn_z[-1])))
        logits = final(ffn_z[-1]) @ u.T  # the last stream, normed, read out
    else:
        norms = []
        for i, layer in enumerate(model.decoder_layers):
            z = {"self": parts["decoder"][i][1]["z"], "cross": parts["cross"][i][1]["z"],
                 "ffn": ffn_z[i]}
            by = {"self": layer.self_attention_layer_norm,
                  "cross": layer.cross_attention_layer_norm, "ffn": layer.feedforward_layer_norm}
            norm = {k: _any_norm(by[k], config) for k in z}
            norms.append({k: (norm[k], norm[k].scale(z[k])) for k in z})
        reads = readouts(u, layers, post_ln=norms)
        last = norms[-1]["ffn"]
        logits = last[0](ffn_z[-1]) @ u.T
    self_updates, cross_updates = [], []
    for i in range(layers):
        self_updates.append(logit_updates(parts["decoder"][i][0], reads["self"][i]))
        cross_updates.append(logit_updates(parts["cross"][i][0], reads["cross"][i]))
        if on_progress is not None:
            on_progress(i + 2, layers + 1)
    out = alti_logit(self_updates, cross_updates, found["rollout"]["encoder_rollout"][-1],
                     found["rollout"]["rollout"])
    bias = (model.output_bias.numpy() if config.tie_output and config.output_bias else
            model.output_projection.bias.numpy() if not config.tie_output and config.output_bias
            else np.zeros(config.tgt_vocab_size))
    scores = np.diagonal(logits) + bias[ids] - np.where(has_foil, bias[np.maximum(foils, 0)], 0)
    result = {"method": "alti_logit", "source_tokens": maps["source_tokens"],
              "target_tokens": maps["target_tokens"], "output_tokens": maps["output_tokens"],
              "log_probs": maps["log_probs"], "scores": scores.astype(np.float64),
              "self_updates": np.stack(self_updates).astype(np.float32),
              "cross_updates": np.stack(cross_updates).astype(np.float32)}
    result.update({name: np.asarray(value, np.float32) for name, value in out.items()})
    if has_foil.any():
        tok = ckpt.target_tokenizer
        result.update(foil_ids=[int(f) if f != NO_FOIL else None for f in foils],
                      foil_tokens=[tok.id_to_piece(int(f)) if f != NO_FOIL else None
                                   for f in foils])
    return result
