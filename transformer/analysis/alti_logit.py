"""Each input token's contribution to an output token's logit: ALTI-Logit (Ferrando et al.,
ACL 2023, "Explaining How Transformers Use Context to Build Predictions"), here on an
encoder-decoder.

Every attention sublayer adds to the residual stream of query i one term per key j (ALTI's
T_i(x_j) = sum_h alpha^h_ij f_h(x_j): transformer.analysis.alti). Its direct effect on the
logit of token w at output step i (the logit update) is the term read out by the unembedding
row u_w along the residual path to the output:

    Delta^l_{i<-j} = u_w . D_i^l(T_i(x_j)),

D_i^l the linear map from the sublayer to the logits at position i: in a pre-LN model the
final norm linearised (its scale taken from the final stream at i, as ALTI linearises a
norm); in a post-LN model the sublayer's own norm and every later sublayer's at position i
(each linearised), the feed-forward and attention functions left out (the direct path); times
the model's output scale (T5 v1.0). With a foil f, u_w - u_f: the update of the logit
difference. Computed as the readout vector r_i = D_i^T u_w, from the output down through each
norm's adjoint (Norm.adjoint), so that Delta^l_{i<-j} = sum_h alpha^h_ij f_h(x_j) . r_i.

A key j of decoder layer l's self-attention is the layer's input at prefix position j, which
ALTI's rollout splits over the input tokens (R^{l-1}, the decoder's rollout after layer l - 1,
(T, N + T); before the first layer every position is its own token); a key of its
cross-attention is the encoder's output at source position j (R_enc, (N, N)). ALTI-Logit
distributes each update over the inputs the key is made of:

    logit_{i<-s} = sum_l [ sum_j Delta^{l,self}_{i<-j} R^{l-1}_{j,s}
                           + sum_j Delta^{l,cross}_{i<-j} R_enc_{j,s} ]   (s a source token)

and the same over the prefix columns of R^{l-1} for a target-prefix token. Signed: positive
pushes the token's logit (or its lead over the foil) up. The feed-forward sublayers, the
biases and the embeddings' own direct path are not attributed to any token (as in the paper).

NumPy only: the inputs are ALTI's sublayers (transformer.inference.alti_inputs gathers them)
and the readout vectors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from transformer.analysis.alti import Norm, Sublayer

__all__ = ["alti_logit", "logit_updates", "readouts"]


def readouts(u: np.ndarray, layers: int, *, final: tuple[Norm, np.ndarray] | None = None,
             post_ln: Sequence[dict] | None = None) -> dict[str, np.ndarray]:
    """The readout vectors r_i = D_i^T u of each decoder layer's attention sublayers: u (T,
    d_model), row i the (scaled) unembedding row, or the difference of two, of output step i.
    Pre-LN: final = (the final norm, its scale (T, 1)), or None without one; every sublayer
    reads out through it alike. Post-LN: post_ln[l] = {"self", "cross", "ffn"}: (Norm, scale
    (T, 1)) of layer l's three norms. Returns "self" and "cross" (L_dec, T, d_model)."""
    u = np.asarray(u, np.float64)
    if post_ln is None:
        r = u if final is None else final[0].adjoint(u, final[1])
        stacked = np.repeat(r[np.newaxis], layers, axis=0)
        return {"self": stacked, "cross": stacked.copy()}
    out = {"self": [None] * layers, "cross": [None] * layers}
    r = u
    for layer in reversed(range(layers)):  # the direct path, from the output down
        norms = post_ln[layer]
        r = norms["ffn"][0].adjoint(r, norms["ffn"][1])
        r = out["cross"][layer] = norms["cross"][0].adjoint(r, norms["cross"][1])
        r = out["self"][layer] = norms["self"][0].adjoint(r, norms["self"][1])
    return {kind: np.stack(rows) for kind, rows in out.items()}


def logit_updates(sublayer: Sublayer, readout: np.ndarray) -> np.ndarray:
    """Delta_{i<-j} = sum_h alpha^h_ij f_h(x_j) . r_i for every query i and key j: (q, k)
    float64, readout r (q, d_model)."""
    f = sublayer._transformed()  # (H, k, d_model)
    seen = np.einsum("hkd,qd->hqk", f, np.asarray(readout, np.float64))  # f_h(x_j) . r_i
    return np.einsum("hqk,hqk->qk", np.asarray(sublayer.weights, np.float64), seen)


def alti_logit(self_updates: Sequence[np.ndarray], cross_updates: Sequence[np.ndarray],
               encoder_rollout: np.ndarray, decoder_rollout: np.ndarray) -> dict[str, np.ndarray]:
    """The module docstring's sums: self_updates (L_dec of (T, T)), cross_updates (L_dec of
    (T, N)), encoder_rollout (N, N): R_enc after the last encoder layer, decoder_rollout
    (L_dec, T, N + T): ALTI's after each decoder layer. Returns float64 "layer_source"
    (L_dec, T, N) and "layer_target" (L_dec, T, T): each layer's part; "source" (T, N) and
    "target" (T, T): their sums."""
    t, n = np.shape(cross_updates[0])
    before = np.concatenate([np.zeros((t, n)), np.eye(t)], axis=1)  # each position its own
    layer_source, layer_target = [], []
    for layer, (d_self, d_cross) in enumerate(zip(self_updates, cross_updates)):
        r_prev = before if layer == 0 else decoder_rollout[layer - 1]  # (T, N + T)
        through_self = np.asarray(d_self, np.float64) @ r_prev  # (T, N + T)
        layer_source.append(through_self[:, :n] + np.asarray(d_cross, np.float64)
                            @ encoder_rollout)
        layer_target.append(np.tril(through_self[:, n:]))
    layer_source, layer_target = np.stack(layer_source), np.stack(layer_target)
    return {"layer_source": layer_source, "layer_target": layer_target,
            "source": layer_source.sum(0), "target": layer_target.sum(0)}
