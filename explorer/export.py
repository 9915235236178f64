"""Exports of what a view shows: CSV of one matrix, NPZ of every attention map of a sentence.

Pure functions (NumPy only), so they are tested without Streamlit."""

from __future__ import annotations

import csv
import io

import numpy as np

from transformer.core.kinds import KINDS


def matrix_csv(matrix, row_labels, col_labels, corner: str = "query \\\\ key") -> bytes:
    """A labelled matrix as UTF-8 CSV: header row of column labels, one row per row label."""
    matrix = np.asarray(matrix)
    if matrix.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix has shape {matrix.shape} but there are {len(row_labels)} row "
                         f"and {len(col_labels)} column labels")
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([corner, *col_labels])
    for label, row in zip(row_labels, matrix):
        writer.writerow([label, *(f"{x:.6g}" for x in row)])
    return out.getvalue().encode("utf-8")


def attention_npz(maps: dict) -> bytes:
    """Every attention map, mask and token list of one sentence in one .npz (no pickles:
    tokens are stored as unicode arrays, loadable with allow_pickle=False)."""
    arrays = {}
    for name, kind in KINDS.items():
        arrays[name] = np.asarray(maps[name], np.float32)  # (layers, heads, q, k)
        if kind.mask in maps:
            arrays[kind.mask] = np.asarray(maps[kind.mask], bool)
    for name in ("source_tokens", "target_tokens", "output_tokens"):
        if name in maps:
            arrays[name] = np.asarray(maps[name], dtype=str)
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)
    return out.getvalue()


def arrays_npz(**arrays) -> bytes:
    """Named arrays in one compressed .npz, lists of strings as unicode arrays (loadable with
    allow_pickle=False)."""
    out = io.BytesIO()
    np.savez_compressed(out, **{name: np.asarray(value, dtype=str)
                                if isinstance(value, list) and value and isinstance(value[0], str)
                                else np.asarray(value) for name, value in arrays.items()})
    return out.getvalue()
