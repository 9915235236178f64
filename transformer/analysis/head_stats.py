"""What each attention head does, in numbers: per-head statistics and head-to-head similarity.

NumPy only (SciPy for the clustering order, imported when used); never TensorFlow, so the module
loads on its own. Inputs are the dicts OpenedModel.attention (or transformer.inference.batch.attention_batch)
returns: "<kind>" (L, H, q, k) with rows = queries summing to 1, "<kind>_mask" (q, k) bool
(True = may attend), "source_tokens" and "target_tokens".

Every statistic of a head is a mean over its real query rows: rows whose mask allows some key,
whose query token is not padding, and whose weights do not all equal 0 (the other rows are
skipped). Per row i with weights p_i over keys j:

    entropy      -sum_j p_ij ln p_ij (nats; 0 ln 0 = 0): 0 = one key, ln k = uniform over k keys
    max_weight   max_j p_ij
    distance     sum_j p_ij |i - j|: how far, in positions, the head looks
    diagonal     p_ii (the query's own position)
    previous     p_i,i-1 (0 for the first row)
    next         p_i,i+1 (0 for the last; always 0 in the causal decoder)
    special      sum of p_ij over keys that are <s>, </s> or <pad> (attention sinks)
    alignment    cross-attention only: 1 if argmax_j p_ij equals the argmax of the consensus
                 alignment's row i, else 0, where the consensus alignment is the cross-attention
                 averaged over every layer and head of the sentence. The mean is the fraction of
                 target positions on which the head points at the same source token as the model
                 as a whole.

For cross-attention, i is the target position and j the source position: distance, diagonal,
previous and next compare the two sides' indices as they are (target position i against source
position j), so they are only meaningful where the two run roughly in parallel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from transformer.core import kinds as _kinds

KINDS = _kinds.KIND_NAMES
SINK_TOKENS = ("<s>", "</s>", "<pad>")  # start, end, padding
PAD_TOKEN = "<pad>"
STATISTICS = {  # name: what it measures, for tables and menus
    "entropy": "Entropy (nats)",
    "max_weight": "Mean max weight",
    "distance": "Mean attention distance (positions)",
    "diagonal": "Weight on the same position",
    "previous": "Weight on the previous position",
    "next": "Weight on the next position",
    "special": "Weight on <s>, </s>, <pad>",
    "alignment": "Agreement with the argmax alignment",
}
CROSS_ONLY = ("alignment",)
SHARES = ("max_weight", "diagonal", "previous", "next", "special", "alignment")  # all in [0, 1]

__all__ = ["CROSS_ONLY", "KINDS", "SHARES", "SINK_TOKENS", "STATISTICS", "batch_statistics",
           "cluster_order", "cosine_similarity", "head_divergence", "head_labels",
           "head_similarity_matrix", "head_statistics", "js_divergence", "statistics_names",
           "statistics_table"]


def statistics_names(kind: str) -> list[str]:
    """The statistics computed for a kind of attention, in table order."""
    _check_kind(kind)
    return [name for name in STATISTICS if kind == "cross" or name not in CROSS_ONLY]


def _check_kind(kind: str) -> None:
    _kinds.kind(kind)


def _unpack(maps: Mapping, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights (L, H, q, k), real rows (L, H, q) bool, sink keys (k,) bool) of one kind."""
    _check_kind(kind)
    weights = np.asarray(maps[kind], dtype=float)
    if weights.ndim != 4:
        raise ValueError(f"maps[{kind!r}] must be (layers, heads, queries, keys), got shape "
                         f"{weights.shape}")
    q, k = weights.shape[-2:]
    mask = np.asarray(maps.get(f"{kind}_mask", np.ones((q, k), bool)), dtype=bool)
    if mask.shape != (q, k):
        raise ValueError(f"maps[{kind + '_mask'!r}] has shape {mask.shape} but the maps are "
                         f"{q} x {k}")
    query_name, key_name = _kinds.KINDS[kind].query_tokens, _kinds.KINDS[kind].key_tokens
    query_tokens = [str(t) for t in maps.get(query_name, [""] * q)]
    key_tokens = [str(t) for t in maps.get(key_name, [""] * k)]
    if len(query_tokens) != q or len(key_tokens) != k:
        raise ValueError(f"maps[{kind!r}] is {q} x {k} but there are {len(query_tokens)} query "
                         f"and {len(key_tokens)} key tokens")
    real = mask.any(axis=1) & (np.asarray(query_tokens) != PAD_TOKEN)  # (q,)
    real = real & (weights.sum(axis=-1) > 0)  # (L, H, q): all-zero rows skipped
    sinks = np.isin(np.asarray(key_tokens, dtype=object), SINK_TOKENS)
    return weights, real, sinks


def _row_statistics(weights, sinks, kind) -> dict[str, np.ndarray]:
    """Each statistic per row: {name: (L, H, q)}."""
    q, k = weights.shape[-2:]
    rows, cols = np.arange(q)[:, None], np.arange(k)[None, :]
    logs = np.log(weights, out=np.zeros_like(weights), where=weights > 0)
    stats = {
        "entropy": -(weights * logs).sum(-1),
        "max_weight": weights.max(-1, initial=0.0),
        "distance": (weights * np.abs(rows - cols)).sum(-1),
        "diagonal": (weights * (cols == rows)).sum(-1),
        "previous": (weights * (cols == rows - 1)).sum(-1),
        "next": (weights * (cols == rows + 1)).sum(-1),
        "special": weights[..., sinks].sum(-1),
    }
    if kind == "cross":
        consensus = weights.mean(axis=(0, 1)).argmax(-1) if k else np.zeros(q, int)  # (q,)
        stats["alignment"] = (weights.argmax(-1) == consensus).astype(float) if k else \
            np.zeros(weights.shape[:-1])
    return stats


def _statistics_and_rows(maps: Mapping, kind: str):
    """({name: (L, H) mean over real rows, NaN where none}, real rows per head (L, H))."""
    weights, real, sinks = _unpack(maps, kind)
    counts = real.sum(-1)  # (L, H)
    stats = {}
    for name, values in _row_statistics(weights, sinks, kind).items():
        total = np.where(real, values, 0.0).sum(-1)
        stats[name] = np.divide(total, counts, out=np.full(counts.shape, np.nan),
                                where=counts > 0)
    return stats, counts


def head_statistics(maps: Mapping, kind: str) -> dict[str, np.ndarray]:
    """{statistic: (L, H)} for every head of one kind of one sentence (see the module's
    docstring for the definitions); NaN for a head without a real query row."""
    return _statistics_and_rows(maps, kind)[0]


def batch_statistics(list_of_maps: Sequence[Mapping], kind: str) -> dict[str, np.ndarray]:
    """{statistic: (L, H)} over many sentences: each sentence's value weighted by its number of
    real query rows, so the result is the mean over every real row of the batch."""
    if not list_of_maps:
        raise ValueError("batch_statistics needs at least one sentence")
    totals, rows = None, None
    for maps in list_of_maps:
        stats, counts = _statistics_and_rows(maps, kind)
        if totals is None:
            totals = {name: np.zeros(counts.shape) for name in stats}
            rows = np.zeros(counts.shape)
        if counts.shape != rows.shape:
            raise ValueError(f"the sentences' {kind} maps have different numbers of layers and "
                             f"heads: {rows.shape} and {counts.shape}")
        for name, values in stats.items():
            totals[name] += np.where(counts > 0, values, 0.0) * counts
        rows += counts
    return {name: np.divide(total, rows, out=np.full(rows.shape, np.nan), where=rows > 0)
            for name, total in totals.items()}


def statistics_table(stats_by_kind: Mapping[str, Mapping[str, np.ndarray]]) -> list[dict]:
    """Rows {"kind", "layer", "head", <each statistic>} for a sortable table, one per head of
    each kind; a statistic a kind lacks (alignment outside cross-attention) or a NaN is None."""
    table = []
    for kind, stats in stats_by_kind.items():
        if not stats:
            continue
        shapes = {np.shape(values) for values in stats.values()}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise ValueError(f"the {kind} statistics must all be (layers, heads), got shapes "
                             f"{sorted(shapes)}")
        n_layers, n_heads = shapes.pop()
        for layer in range(n_layers):
            for head in range(n_heads):
                row = {"kind": kind, "layer": layer, "head": head}
                for name in STATISTICS:
                    value = stats[name][layer, head] if name in stats else np.nan
                    row[name] = None if np.isnan(value) else float(value)
                table.append(row)
    return table


# ---------------------------------------------------------------- head similarity
def _normalise(p) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    total = p.sum(-1, keepdims=True)
    return np.divide(p, total, out=np.zeros_like(p), where=total > 0)


def js_divergence(p, q) -> np.ndarray:
    """Jensen-Shannon divergence between rows (last axis) of p and q (broadcast against each
    other), in bits: 0 for identical rows, 1 for rows on disjoint keys, symmetric. Rows are
    first rescaled to sum to 1; zero weights are fine (0 log 0 = 0); a row of zeros counts as
    putting no weight anywhere."""
    p, q = _normalise(p), _normalise(q)
    try:
        p, q = np.broadcast_arrays(p, q)
    except ValueError:
        raise ValueError(f"p and q must have the same shape (or broadcast), got {p.shape} and "
                         f"{q.shape}") from None
    m = 0.5 * (p + q)

    def kl(a):  # KL(a || m) in bits; a > 0 implies m > 0
        return (a * np.log2(np.divide(a, m, out=np.ones_like(a), where=a > 0))).sum(-1)

    return np.clip(0.5 * kl(p) + 0.5 * kl(q), 0.0, 1.0)


def head_divergence(a, b) -> float:
    """Mean JS divergence (bits) between two heads' maps (q, k), over the query rows where both
    put some weight; NaN if there is no such row."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"head maps must be two (queries, keys) arrays of one shape, got "
                         f"{a.shape} and {b.shape}")
    rows = (a.sum(-1) > 0) & (b.sum(-1) > 0)
    return float(js_divergence(a[rows], b[rows]).mean()) if rows.any() else float("nan")


def cosine_similarity(a, b) -> float:
    """Cosine of the angle between two maps flattened to vectors (1 = same pattern up to
    scale); 0 if either is all zeros."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"maps must have the same size, got {a.size} and {b.size}")
    norms = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / norms) if norms > 0 else 0.0


def head_labels(kind: str, n_layers: int, n_heads: int) -> list[str]:
    """The label of every head of one kind ("cross L0 H1", transformer.core.kinds.head_label),
    layer-major: the order of head_similarity_matrix."""
    return _kinds.head_labels({kind: (n_layers, n_heads)})


SIMILARITY_BLOCK_VALUES = 2**24  # float64 values of one block of head pairs (128 MB): 192 heads
# of 400 x 400 maps made 44 GB at once


def head_similarity_matrix(list_of_maps: Sequence[Mapping], kind: str) -> np.ndarray:
    """(L*H, L*H): the mean JS divergence (head_divergence, over real query rows) between every
    pair of heads of one kind, averaged over the sentences (each sentence counts once). Heads are
    numbered layer-major (index = layer * H + head; see head_labels). 0 = the same pattern."""
    if not list_of_maps:
        raise ValueError("head_similarity_matrix needs at least one sentence")
    total, count = None, None
    for maps in list_of_maps:
        weights, real, _ = _unpack(maps, kind)
        n_layers, n_heads, q, k = weights.shape
        heads = weights.reshape(n_layers * n_heads, q, k)
        real = real.reshape(n_layers * n_heads, q)
        both = real[:, None] & real[None, :]  # (LH, LH, q)
        rows = both.sum(-1)
        divergence = np.zeros(rows.shape)  # (LH, LH): summed over the real rows
        block = max(1, SIMILARITY_BLOCK_VALUES // max(1, len(heads) * q * k))
        for start in range(0, len(heads), block):  # (block, LH, q, k) at a time, not all pairs
            part = js_divergence(heads[start:start + block, None], heads[None, :])  # (b, LH, q)
            divergence[start:start + block] = np.where(both[start:start + block], part,
                                                       0.0).sum(-1)
        mean = np.divide(divergence, rows, out=np.zeros(rows.shape), where=rows > 0)
        if total is None:
            total, count = np.zeros_like(mean), np.zeros_like(mean)
        if mean.shape != total.shape:
            raise ValueError(f"the sentences' {kind} maps have different numbers of heads")
        total += mean
        count += rows > 0
    return np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)


def cluster_order(matrix) -> list[int]:
    """An order of the heads that puts similar heads next to each other: the leaves of an
    average-linkage hierarchical clustering (SciPy) of the symmetric distance matrix. NaN
    distances count as the largest distance."""
    from scipy.cluster.hierarchy import leaves_list, linkage
    from scipy.spatial.distance import squareform

    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"matrix must be square, got shape {matrix.shape}")
    n = matrix.shape[0]
    if n < 3:
        return list(range(n))
    finite = matrix[np.isfinite(matrix)]
    distances = np.where(np.isfinite(matrix), matrix, finite.max() if finite.size else 1.0)
    distances = np.clip(0.5 * (distances + distances.T), 0.0, None)
    np.fill_diagonal(distances, 0.0)
    return [int(i) for i in leaves_list(linkage(squareform(distances, checks=False), "average"))]
