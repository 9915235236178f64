"""Helpers shared by the figure modules."""

from __future__ import annotations

import html

import numpy as np


def unique_labels(tokens: list[str]) -> list[str]:
    """Plotly merges equal category labels: make repeated tokens distinct ("0", "0 ·2")."""
    seen: dict[str, int] = {}
    out = []
    for token in tokens:
        seen[token] = seen.get(token, 0) + 1
        out.append(token if seen[token] == 1 else f"{token} ·{seen[token]}")
    return out


def check_matrix(matrix, rows: int | None = None, cols: int | None = None, name="matrix"):
    """A 2-D float array, with ValueError naming both sizes when it does not fit the labels."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {matrix.shape}")
    if rows is not None and matrix.shape[0] != rows:
        raise ValueError(f"{name} has {matrix.shape[0]} rows but {rows} row labels")
    if cols is not None and matrix.shape[1] != cols:
        raise ValueError(f"{name} has {matrix.shape[1]} columns but {cols} column labels")
    return matrix


def plotly_text(label) -> str:
    """A label safe for Plotly, which reads "<s>" as a strike-through tag and shows nothing."""
    return html.escape(str(label), quote=False)


def axis_labels(tokens) -> list[str]:
    """Tick labels for a token axis: repeated tokens made distinct, markup escaped."""
    return [plotly_text(t) for t in unique_labels([str(t) for t in tokens])]
