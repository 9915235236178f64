"""Value zeroing (Mohebbi et al., EACL 2023, "Quantifying Context Mixing in Transformers"):
the NumPy arithmetic on the layer outputs transformer.inference.value_zeroing captures.

For one attention sublayer of layer l and a key token j, the layer is run again on its clean
input with token j's value vectors zeroed in every head (j is still attended to; its value adds
nothing), and each query token i's layer output is compared with the clean one: the score of
(i, j) is the cosine distance 1 - cos(h_i, h_i^{-j}). A token that mixes nothing from j keeps
its output (0); one built from j moves away from it.

`normalized` is the paper's (and inseq's) reading as a distribution over the keys: scores below
a threshold set to 0, each row divided by its sum (a row of zeros stays zeros)."""

from __future__ import annotations

import numpy as np

__all__ = ["MIN_SCORE", "cosine_distances", "normalized"]

MIN_SCORE = 1e-5  # scores below this are float noise: 0 before a row is normalised (inseq's)


def cosine_distances(clean: np.ndarray, zeroed: np.ndarray) -> np.ndarray:
    """clean (q, d): each query token's layer output; zeroed (k, q, d): the same with key j's
    values zeroed (row j). Returns (q, k): 1 - cos(clean[i], zeroed[j, i]), in float64 (a zero
    vector's cosine is taken as 1: nothing moved)."""
    clean = np.asarray(clean, np.float64)
    zeroed = np.asarray(zeroed, np.float64)
    dots = np.einsum("qd,kqd->kq", clean, zeroed)  # (k, q)
    norms = np.linalg.norm(clean, axis=-1)[None] * np.linalg.norm(zeroed, axis=-1)  # (k, q)
    cosine = np.divide(dots, norms, out=np.ones_like(dots), where=norms > 0)
    return (1.0 - cosine).T  # (q, k)


def normalized(scores: np.ndarray, min_score: float = MIN_SCORE) -> np.ndarray:
    """scores (..., q, k) -> each row over the keys summing to 1: below min_score set to 0
    first; a row with nothing left stays 0."""
    kept = np.where(scores < min_score, 0.0, scores)
    totals = kept.sum(-1, keepdims=True)
    return np.divide(kept, totals, out=np.zeros_like(kept), where=totals > 0)
