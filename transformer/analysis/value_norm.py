"""Value-weighted attention: the norm of what each key token adds to each query's output
(Kobayashi et al., EMNLP 2020, "Attention is not only a weight: analyzing Transformers with
vector norms").

Head h of a multi-head attention layer writes, for query i,

    y_i = sum_h sum_j alpha^h_ij f_h(x_j) + b_O,    f_h(x) = (x W_V^h + b_V^h) W_O^h

where W_V^h, b_V^h are the head's columns of the value projection (d_model -> head_dim) and
W_O^h is the head's slice of the output projection, rows h * head_dim .. (h + 1) * head_dim - 1
of W_O (num_heads * head_dim -> d_model). The paper's measure of what key j gives query i is
the norm of its term, per head ||alpha^h_ij f_h(x_j)|| = alpha^h_ij ||f_h(x_j)||, and for the
whole layer ||sum_h alpha^h_ij f_h(x_j)||, which can be less than the sum over heads (heads
cancel).

The output projection's bias b_O is left out, as the paper leaves it out: it is added once to
every query's output whatever the query attends to, so it is no key token's contribution. The
value bias b_V^h is part of f_h (it moves with alpha); models without biases (T5) have none.
How the scores were computed (scaled or not, T5's relative position bias) does not matter here:
alpha is the attention the layer used.

NumPy only (no TensorFlow): the inputs are the tensors a forward pass captured, the per-head
values v = x W_V^h + b_V^h ("<kind>_v" of OpenedModel.attention(details=True), (layers, heads,
keys, head_dim)) and each layer's W_O (transformer.inference.contributions gathers both).
f_h is computed in float32 as the model computes, its Gram matrices in float64, and the head
sums so that rounding moves them by about 1e-7 of sum_h alpha^h_ij ||f_h(x_j)|| (see
value_weighted); the results are float32, as the maps are.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gram_factor", "head_slices", "transformed_norms", "transformed_values",
           "value_weighted"]


def head_slices(w_o, num_heads: int) -> np.ndarray:
    """W_O (..., num_heads * head_dim, d_model) -> (..., num_heads, head_dim, d_model): row
    block h is W_O^h, the rows head h's output is multiplied by (heads are merged head-major)."""
    w_o = np.asarray(w_o)
    inner, d_model = w_o.shape[-2:]
    if inner % num_heads:
        raise ValueError(f"W_O has {inner} rows, not a multiple of num_heads ({num_heads})")
    return w_o.reshape(w_o.shape[:-2] + (num_heads, inner // num_heads, d_model))


def _check(v, w_o) -> tuple[np.ndarray, np.ndarray]:
    """v (L, H, k, head_dim) and W_O (L, H * head_dim, d_model) as float32 (the model's), W_O
    split per head (L, H, head_dim, d_model); ValueError when the shapes do not fit."""
    v = np.asarray(v, np.float32)
    w_o = np.asarray(w_o, np.float32)
    if v.ndim != 4:
        raise ValueError(f"v must be (layers, heads, keys, head_dim), got shape {v.shape}")
    if w_o.ndim != 3 or w_o.shape[0] != v.shape[0] or w_o.shape[1] != v.shape[1] * v.shape[3]:
        raise ValueError(f"W_O must be (layers, heads * head_dim, d_model) = ({v.shape[0]}, "
                         f"{v.shape[1] * v.shape[3]}, d_model) for v of shape {v.shape}, got "
                         f"{w_o.shape}")
    return v, head_slices(w_o, v.shape[1])


def transformed_values(v, w_o) -> np.ndarray:
    """f_h(x_j) = v^h_j W_O^h for every layer, head and key: v (L, H, k, head_dim), W_O
    (L, H * head_dim, d_model) -> (L, H, k, d_model) float32 (the vectors the Head arithmetic
    page shows; value_weighted builds them one layer at a time)."""
    v, w_o = _check(v, w_o)
    return np.matmul(v, w_o)  # (L, H, k, d_model)


def transformed_norms(v, w_o) -> np.ndarray:
    """||f_h(x_j)|| for every layer, head and key: (L, H, k) float32."""
    v, w_o = _check(v, w_o)
    return np.stack([np.linalg.norm(np.matmul(v[i], w_o[i]).astype(np.float64), axis=-1)
                     for i in range(v.shape[0])]).astype(np.float32)  # (L, H, k)


def value_weighted(weights, v, w_o, head_mask=None, overwrite: bool = False
                   ) -> dict[str, np.ndarray]:
    """The paper's norms for one attention kind.

    weights: the attention alpha (L, H, q, k) (rows sum to 1 over the keys a query may see);
    v: the per-head values (L, H, k, head_dim), x W_V^h + b_V^h of each key;
    w_o: each layer's output projection (L, H * head_dim, d_model);
    head_mask: (L, H) or None, the mask the pass ran with (0 silences a head: its output is
    multiplied by the mask before W_O, so its terms are too);
    overwrite: weights (a float32 array) may be overwritten with "weighted" (a caller that owns
    the maps saves a copy of them).

    Returns float32 arrays:
      "weighted" (L, H, q, k): ||alpha^h_ij f_h(x_j)|| (= alpha^h_ij ||f_h(x_j)||);
      "summed" (L, q, k): ||sum_h alpha^h_ij f_h(x_j)||, what key j adds to query i's output
        through all the heads of the layer;
      "norms" (L, H, k): ||f_h(x_j)||, the transformed value's norm alone.

    The head sum's norm comes from the heads' Gram matrix per key, G_j[h, g] = <f_h(x_j),
    f_g(x_j)> (float64): ||sum_h a_h f_h||^2 = a^T G_j a, for a small map in float64, for a
    large one as ||F_j^T a||^2 with F_j F_j^T = G_j (gram_factor), a sum of squares that
    float32 keeps accurate however much the heads cancel. No (q, k, d_model) array is built
    (a 512-token sentence would need 1 GB per layer).
    """
    weights = np.asarray(weights, np.float32)
    v, w_o = _check(v, w_o)
    layers, heads, keys = v.shape[:3]
    if weights.ndim != 4 or weights.shape[:2] != (layers, heads) or weights.shape[3] != keys:
        raise ValueError(f"weights must be (layers, heads, queries, keys) = ({layers}, {heads}, "
                         f"q, {keys}) for v of shape {v.shape}, got {weights.shape}")
    if head_mask is not None:
        head_mask = np.asarray(head_mask, np.float32)
        if head_mask.shape != (layers, heads):
            raise ValueError(f"head_mask must be (layers, heads) = {(layers, heads)}, got "
                             f"{head_mask.shape}")
        weights = weights * head_mask[:, :, None, None]
    gram = np.empty((layers, keys, heads, heads))  # (L, k, H, H): <f_h(x_j), f_g(x_j)>
    for i in range(layers):  # one layer's f at a time: (H, k, d_model) is 8 MB at 512 keys
        f = np.matmul(v[i], w_o[i]).transpose(1, 0, 2)  # (k, H, d_model): f_h(x_j), float32
        f = f.astype(np.float64)  # products and sums of the Gram matrix exact to float64
        gram[i] = np.matmul(f, f.transpose(0, 2, 1))
    norms = np.sqrt(np.diagonal(gram, axis1=2, axis2=3)).transpose(0, 2, 1)  # (L, H, k)
    if weights.shape[2] * keys >= _FACTOR_FROM:
        summed = _summed_by_factor(weights, gram)
    else:  # per key j, G_j (H, H) times its column of weights (H, q), batched
        a = np.ascontiguousarray(weights.transpose(0, 3, 1, 2), np.float64)  # (L, k, H, q)
        squared = (np.matmul(gram, a) * a).sum(axis=2).transpose(0, 2, 1)  # (L, q, k)
        # Rounding may leave -1e-17 where the sum is 0.
        summed = np.sqrt(np.maximum(squared, 0.0)).astype(np.float32)  # (L, q, k)
    # alpha ||f|| (alpha >= 0; a head mask may be any number: |alpha m| ||f||), last: it may
    # take the weights' place
    if head_mask is not None:
        np.abs(weights, out=weights)  # weights is the masked copy
    scale = norms.astype(np.float32)[:, :, None, :]
    writable = overwrite or head_mask is not None
    weighted = np.multiply(weights, scale, out=weights if writable else None)  # (L, H, q, k)
    return {"weighted": weighted, "summed": summed,
            "norms": norms.astype(np.float32)}


# From this many (query, key) cells on, the head sum's norm is computed from a factor of each
# key's Gram matrix, block by block of query rows (_summed_by_factor); below it the batched
# matmul's one call beats the blocks' H^2 calls (0.16 ms against 0.22 for 4 heads and 64 x 64
# cells, 0.3 against 9 for 16 heads and 30 x 30).
_FACTOR_FROM = 4096

# (query, key) cells per block: 128 kB a float32 buffer, in cache. bench/value_norm_cost.py's
# tiny512 (2 heads, 512 x 512 cells) took 20 ms a call with blocks of the Gram form in float64,
# 34 ms with whole planes (each call page-faulting new 2 MB arrays).
_BLOCK_CELLS = 1 << 15


def gram_factor(gram: np.ndarray) -> np.ndarray:
    """A lower-triangular F with F F^T = G for each positive semi-definite G (..., H, H)
    (Cholesky; float64): then a^T G a = ||F^T a||^2, a sum of squares. A pivot that is 0
    (f_m in the span of the heads before it) leaves its column 0: the heads after it are
    written with the others."""
    heads = gram.shape[-1]
    factor = np.zeros_like(gram, dtype=np.float64)
    scale = np.sqrt(np.max(np.diagonal(gram, axis1=-2, axis2=-1), axis=-1))  # (...)
    for m in range(heads):
        pivot = gram[..., m, m] - (factor[..., m, :m] ** 2).sum(axis=-1)
        pivot = np.sqrt(np.maximum(pivot, 0.0))  # rounding may leave -1e-17 for a 0
        factor[..., m, m] = pivot
        usable = pivot > 1e-12 * scale
        inverse = np.where(usable, 1.0 / np.where(usable, pivot, 1.0), 0.0)
        for h in range(m + 1, heads):
            factor[..., h, m] = (gram[..., h, m] - (factor[..., h, :m] * factor[..., m, :m])
                                 .sum(axis=-1)) * inverse
    return factor


def _summed_by_factor(weights: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """||sum_h a_h f_h(x_j)|| = ||F_j^T a|| for every layer, query i and key j, a =
    weights[l, :, i, j]: weights (L, H, q, k) float32, gram (L, k, H, H) -> (L, q, k) float32.

    The factor comes from the float64 Gram matrices; c_m = sum_{h >= m} F_j[h, m] a_h is then
    computed in float32 on blocks of query rows, in place, and its squares summed: a sum of
    squares, so rounding moves the result by about 1e-7 of sum_h a_h ||f_h||, however much the
    heads cancel (the Gram form a^T G a in float32 would lose up to 3e-4 of it there)."""
    layers, heads, queries, keys = weights.shape
    factor = gram_factor(gram)  # (L, k, H, H)
    rows_of = np.ascontiguousarray(factor.transpose(0, 3, 2, 1), np.float32)  # [l, m, h]: F[h, m]
    out = np.empty((layers, queries, keys), np.float32)
    rows = max(1, _BLOCK_CELLS // keys)
    c_block, term_block = (np.empty((rows, keys), np.float32) for _ in range(2))
    for i in range(layers):
        for start in range(0, queries, rows):
            n = min(rows, queries - start)
            a = weights[i, :, start:start + n]  # (H, n, k)
            squared, c, term = out[i, start:start + n], c_block[:n], term_block[:n]
            for m in range(heads):
                target = squared if m == 0 else c  # c_m, then its square
                np.multiply(a[m], rows_of[i, m, m], out=target)
                for h in range(m + 1, heads):
                    np.multiply(a[h], rows_of[i, m, h], out=term)
                    target += term
                target *= target
                if m:
                    squared += c
            np.sqrt(squared, out=squared)
    return out
