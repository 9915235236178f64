"""Source and target contributions of each token: ALTI+ (Ferrando et al., EMNLP 2022, "Towards
Opening the Black Box of Neural Machine Translation: Source and Target Contributions of Each
Token"), built on ALTI (Ferrando et al., EMNLP 2022, "Measuring the Mixing of Contextual
Information in the Transformer").

One attention sublayer with its residual connection writes, for query i,

    z_i = x_i + sum_j T_i(x_j) + b_O,    T_i(x_j) = sum_h alpha^h_ij f_h(x_j),
    f_h(x) = (x W_V^h + b_V^h) W_O^h                      (transformer.analysis.value_norm)

(cross-attention: the keys j are the encoder's outputs and x_i, the residual, is one more
term). The sublayer's output y_i is z_i itself in a pre-LN model (norm_first: the norm comes
before the next sublayer, on its input) and LN(z_i) in a post-LN model, where the LayerNorm is
linearised as the paper does, its standard deviation taken as a constant of query i:

    LN(z_i) = gamma (.) (z_i - mean(z_i)) / sigma(z_i) + beta
            = sum_j L_i(T_i(x_j)) + L_i(x_i) + L_i(b_O) + beta,
    L_i(v) = gamma (.) (v - mean(v)) / sigma(z_i)      (RMSNorm: gamma (.) v / rms(z_i))

with sigma(z_i) = sqrt(var(z_i) + epsilon), the one the layer divides by, so the terms sum to
the layer's output exactly. (The authors' script divides by the unbiased standard deviation of
z_i + epsilon instead, which differs from it by about 1/(2 d_model).) Each token's term
x_{i<-j} (L_i(T_i(x_j)), plus L_i(x_i) for j = i in self-attention; for cross-attention the
residual L_i(x_i) is its own column) gets the contribution

    c_ij = max(0, ||y_i||_1 - ||y_i - x_{i<-j}||_1) / sum_k max(0, ...)

(the L1 distance: a term close to the output contributes much, one far from it little; the
biases count in y_i, not in any term). Rows sum to 1.

Rollout (the paper's section 3): the encoder's layers multiply, R_enc = C_L ... C_1 (N, N).
In decoder layer l the self-attention's C^self (T, T) and the cross-attention's C^cross
(T, N + 1) (the last column: the residual, which carries the self-attention's output) join as

    J_l = [C^cross[:, :N] R_enc | C^cross[:, N] (.) C^self]      (T, N + T)

and the decoder's rollout is R_1 = J_1, R_l = [J_l^src + J_l^tgt R_{l-1}^src | J_l^tgt R_{l-1}^tgt]
(J^tgt the second block; the target prefix's own rows), each row renormalised to 1 against
rounding. Row t of R_L: what output token t's prediction took from each source token (N
columns) and each decoder input (T columns: the start token, then the prefix); the source share
is the first block's sum. The feed-forward sublayers act on each token alone and mix nothing:
they are not in the rollout (as in the paper).

NumPy only: the inputs are what one teacher-forced pass captured (each kind's weights and
per-head values, each stack's layer inputs) and each sublayer's weights; the inference
module transformer.inference.alti_inputs gathers them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from transformer.analysis.value_norm import head_slices

__all__ = ["Norm", "Sublayer", "alti_rollout", "sublayer_contributions"]

# (query, key, d_model) cells of one block of term vectors: 32 MB of float64.
_BLOCK_CELLS = 1 << 22


@dataclass(frozen=True)
class Norm:
    """A post-LN sublayer's norm: kind "layer" (gamma, beta) or "rms" (gamma alone), epsilon
    as the layer adds it to the variance (or the mean square)."""

    kind: str
    gamma: np.ndarray  # (d_model,)
    beta: np.ndarray | None  # (d_model,), None for RMSNorm
    epsilon: float

    def scale(self, z: np.ndarray) -> np.ndarray:
        """1 / sigma(z_i) per row of z (q, d_model): (q, 1)."""
        if self.kind == "rms":
            return 1.0 / np.sqrt((z ** 2).mean(-1, keepdims=True) + self.epsilon)
        return 1.0 / np.sqrt(z.var(-1, keepdims=True) + self.epsilon)

    def linear(self, v: np.ndarray, scale: np.ndarray) -> np.ndarray:
        """L_i(v) for vectors v (..., q, d_model) of the rows whose 1 / sigma is scale
        (q, 1): gamma (.) (v - mean(v)) / sigma (RMSNorm: no mean taken)."""
        if self.kind == "layer":
            v = v - v.mean(-1, keepdims=True)
        return v * scale * self.gamma

    def adjoint(self, u: np.ndarray, scale: np.ndarray) -> np.ndarray:
        """The transpose of `linear` applied to row vectors u (q, d_model): u . L_i(v) =
        adjoint(u)_i . v for every v (what a readout vector u sees through the norm)."""
        g = u * scale * self.gamma
        return g - g.mean(-1, keepdims=True) if self.kind == "layer" else g

    def __call__(self, z: np.ndarray) -> np.ndarray:
        """The norm itself, for rows z (q, d_model)."""
        out = self.linear(z, self.scale(z))
        return out if self.beta is None else out + self.beta


@dataclass(frozen=True)
class Sublayer:
    """One attention sublayer as ALTI needs it.

    weights (H, q, k): the attention alpha (a silenced head's rows times its mask);
    v (H, k, head_dim): the per-head values x W_V^h + b_V^h of the keys;
    w_o (H * head_dim, d_model), b_o (d_model,) or None: the output projection;
    residual (q, d_model): x_i, what the residual connection adds (the sublayer's input,
    before a pre-LN norm);
    norm: the post-LN norm after the sum, or None (pre-LN: the output is the sum itself).
    """

    weights: np.ndarray
    v: np.ndarray
    w_o: np.ndarray
    b_o: np.ndarray | None
    residual: np.ndarray
    norm: Norm | None = None

    def attention_output(self) -> np.ndarray:
        """sum_j T_i(x_j) + b_O for every query: (q, d_model) float64 (what the sublayer adds
        to the residual stream)."""
        f = self._transformed()  # (H, k, d_model)
        out = np.einsum("hqk,hkd->qd", np.asarray(self.weights, np.float64), f)
        return out if self.b_o is None else out + self.b_o

    def _transformed(self) -> np.ndarray:
        """f_h(x_j) for every head and key: (H, k, d_model) float64."""
        heads = self.v.shape[0]
        w_o = head_slices(np.asarray(self.w_o, np.float64), heads)  # (H, head_dim, d_model)
        return np.matmul(np.asarray(self.v, np.float64), w_o)


def sublayer_contributions(layer: Sublayer, cross: bool = False) -> dict[str, np.ndarray]:
    """ALTI's contributions of one sublayer (the module docstring's c_ij): a dict with
    "contributions" (q, k) for self-attention, (q, k + 1) for cross-attention (the last column
    the residual's), rows summing to 1 (float64), "output" (q, d_model): y_i, the sublayer's
    output the terms decompose, and "z" (q, d_model): the sum before a post-LN norm (y itself
    in a pre-LN model)."""
    weights = np.asarray(layer.weights, np.float64)  # (H, q, k)
    residual = np.asarray(layer.residual, np.float64)  # (q, d_model)
    heads, queries, keys = weights.shape
    if layer.v.shape[:2] != (heads, keys):
        raise ValueError(f"v must be (heads, keys, head_dim) = ({heads}, {keys}, head_dim), got "
                         f"{layer.v.shape}")
    if not cross and queries != keys:
        raise ValueError(f"self-attention needs as many queries as keys, got {weights.shape}")
    f = layer._transformed()  # (H, k, d_model)
    d_model = f.shape[-1]
    z = residual + np.einsum("hqk,hkd->qd", weights, f)  # (q, d_model)
    if layer.b_o is not None:
        z = z + layer.b_o
    norm = layer.norm
    scale = norm.scale(z) if norm is not None else None  # (q, 1)
    y = norm(z) if norm is not None else z  # the sublayer's output, biases included
    y_l1 = np.abs(y).sum(-1)  # (q,)
    columns = keys + 1 if cross else keys
    distance = np.empty((queries, columns))  # ||y_i - x_{i<-j}||_1
    per_t = max(1, _BLOCK_CELLS // max(1, keys * d_model))
    f_by_key = np.ascontiguousarray(f.transpose(1, 0, 2))  # (k, H, d_model)
    for start in range(0, queries, per_t):
        stop = min(queries, start + per_t)
        a = np.ascontiguousarray(weights[:, start:stop].transpose(2, 1, 0))  # (k, b, H)
        terms = np.matmul(a, f_by_key)  # (k, b, d_model): T_i(x_j) for the block's queries
        if not cross:  # the residual joins its own token's term
            rows = np.arange(start, stop)
            terms[rows, rows - start] += residual[start:stop]
        if norm is not None:
            terms = norm.linear(terms, scale[start:stop])
        distance[start:stop, :keys] = np.abs(y[start:stop] - terms).sum(-1).T
    if cross:
        own = residual if norm is None else norm.linear(residual, scale)
        distance[:, keys] = np.abs(y - own).sum(-1)
    gain = np.maximum(y_l1[:, None] - distance, 0.0)  # (q, columns)
    total = gain.sum(-1, keepdims=True)
    contributions = np.divide(gain, total, out=np.zeros_like(gain), where=total > 0)
    return {"contributions": contributions, "output": y, "z": z}


def alti_rollout(encoder: Sequence[np.ndarray], decoder: Sequence[np.ndarray],
                 cross: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """The rollout of the module docstring from each layer's contributions: encoder (N, N) per
    layer, decoder (T, T) per layer, cross (T, N + 1) per layer. Returns float64 arrays:
    "encoder_rollout" (L_enc, N, N): R after each encoder layer; "rollout" (L_dec, T, N + T):
    the decoder's after each layer; "source" (T, N), "target" (T, T), "source_share" (T,): the
    last layer's."""
    n = cross[0].shape[1] - 1
    t = cross[0].shape[0]
    r_enc = np.eye(n)
    encoder_rollout = []
    for c in encoder:
        r_enc = _rows_to_one(c @ r_enc)
        encoder_rollout.append(r_enc)
    rollout, previous = [], None
    for c_self, c_cross in zip(decoder, cross):
        from_source = c_cross[:, :n] @ r_enc  # (T, N)
        through_prefix = c_cross[:, n:] * c_self  # (T, T): the residual's share, spread
        if previous is None:
            joint = np.concatenate([from_source, through_prefix], axis=1)
        else:
            joint = np.concatenate([from_source + through_prefix @ previous[:, :n],
                                    through_prefix @ previous[:, n:]], axis=1)
        previous = _rows_to_one(joint)  # (T, N + T)
        rollout.append(previous)
    last = rollout[-1] if rollout else np.concatenate([np.zeros((t, n)), np.eye(t)], axis=1)
    source, target = last[:, :n], np.tril(last[:, n:])
    return {"encoder_rollout": np.stack(encoder_rollout) if encoder_rollout
            else np.eye(n)[None],
            "rollout": np.stack(rollout) if rollout else last[None],
            "source": source, "target": target, "source_share": source.sum(-1)}


def _rows_to_one(matrix: np.ndarray) -> np.ndarray:
    total = matrix.sum(-1, keepdims=True)
    return np.divide(matrix, total, out=np.zeros_like(matrix), where=total > 0)
