"""Helpers shared by the figure modules: token axes, escaped labels, matrix checks.

Token axes place cells by POSITION (0 .. n - 1 on a numeric axis) and write the tokens exactly as
they are as tick labels (Plotly tickvals / ticktext): a token that occurs twice shows twice, the
same text at two positions. Hover names the position and the token ("key 3 (2021)").
"""

from __future__ import annotations

import html
import math

import numpy as np

MAX_TICKS = 60  # a longer token axis labels every k-th position (hover still names each one)


def plotly_text(label) -> str:
    """A label safe for Plotly, which reads "<s>" as a strike-through tag and shows nothing."""
    return html.escape(str(label), quote=False)


def tick_text(tokens) -> list[str]:
    """The tokens as Plotly shows them: exactly as they are, markup escaped."""
    return [plotly_text(t) for t in tokens]


def positions(tokens) -> list[int]:
    """Where a token axis puts its cells: 0 .. len(tokens) - 1."""
    return list(range(len(tokens)))


def token_axis(tokens, **settings) -> dict:
    """Settings for a numeric axis whose cells sit at positions 0 .. n - 1, ticked with the
    tokens as they are. Up to MAX_TICKS tokens every position is ticked; beyond, every
    ceil(n / MAX_TICKS)-th. Extra settings (title, tickangle, autorange) are passed through."""
    text = tick_text(tokens)
    step = max(1, math.ceil(len(text) / MAX_TICKS))
    ticked = list(range(0, len(text), step))
    return dict(type="linear", tickmode="array", tickvals=ticked,
                ticktext=[text[i] for i in ticked], showgrid=False, zeroline=False, **settings)


def cell_tokens(query_tokens, key_tokens) -> np.ndarray:
    """(q, k, 2) strings: the query token and the key token of every cell, escaped, for a
    heatmap's customdata (hover "query %{y:d} (%{customdata[0]})")."""
    rows, cols = tick_text(query_tokens), tick_text(key_tokens)
    out = np.empty((len(rows), len(cols), 2), dtype=object)
    for i, row in enumerate(rows):
        out[i, :, 0] = row
    for j, col in enumerate(cols):
        out[:, j, 1] = col
    return out


def cell_hover(query_title: str = "query", key_title: str = "key") -> str:
    """The hover lines naming a heatmap cell by position and token, for customdata from
    cell_tokens: "query 2 (0)<br>key 3 (2021)". Positions are written "%{x:d}": a bare "%{x}"
    on a token axis shows the tick text (the token) instead of the position."""
    return (f"{query_title} %{{y:d}} (%{{customdata[0]}})<br>"
            f"{key_title} %{{x:d}} (%{{customdata[1]}})")


def number_text(value: float) -> str:
    """A number written for people: a true minus sign, no "+" or leading zeros in the exponent
    (-1e9 -> "−1e9", -10000.0 -> "−10000", -3.4e38 -> "−3.4e38")."""
    text = f"{float(value):g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text.replace("-", "−")


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
