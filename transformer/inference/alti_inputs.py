"""ALTI+ of one sentence pair: OpenedModel.contributions(method="alti").

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

__all__ = ["alti"]


def _norm(layer, config) -> Norm | None:
    """A post-LN sublayer's norm as a Norm; None in a pre-LN model (norm_first), where the
    sublayer's output is the residual stream's sum itself."""
    if config.norm_first:
        return None
    if config.norm == "rms":
        return Norm("rms", layer.scale.numpy().astype(np.float64), None, float(layer.epsilon))
    return Norm("layer", layer.gamma.numpy().astype(np.float64),
                layer.beta.numpy().astype(np.float64), float(layer.epsilon))


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
    model, config = ckpt.model, ckpt.config
    maps = attention_maps(ckpt, [ckpt.encode_source(source)], [ids], head_mask, values=True,
                          hidden_states=True)[0]
    masks = head_masks(config, given=head_mask)
    encoder, decoder, cross = [], [], []
    for i, layer in enumerate(model.encoder_layers):
        sub = _sublayer(maps, "encoder", i, layer.self_attention,
                        _norm(layer.self_attention_layer_norm, config),
                        maps["encoder_hidden_states"][i], masks["encoder"])
        encoder.append(sublayer_contributions(sub)["contributions"])
    for i, layer in enumerate(model.decoder_layers):
        sub = _sublayer(maps, "decoder", i, layer.self_attention,
                        _norm(layer.self_attention_layer_norm, config),
                        maps["decoder_hidden_states"][i], masks["decoder"])
        self_part = sublayer_contributions(sub)
        decoder.append(self_part["contributions"])
        sub = _sublayer(maps, "cross", i, layer.cross_attention,
                        _norm(layer.cross_attention_layer_norm, config),
                        self_part["output"], masks["cross"])
        cross.append(sublayer_contributions(sub, cross=True)["contributions"])
    out = alti_rollout(encoder, decoder, cross)
    result = {"method": "alti", "source_tokens": maps["source_tokens"],
              "target_tokens": maps["target_tokens"], "output_tokens": maps["output_tokens"],
              "log_probs": maps["log_probs"]}
    result.update({name: np.asarray(value, np.float32) for name, value in out.items()})
    result.update(encoder_layers=np.stack(encoder).astype(np.float32),
                  decoder_layers=np.stack(decoder).astype(np.float32),
                  cross_layers=np.stack(cross).astype(np.float32))
    return result
