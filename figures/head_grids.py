"""Head statistics drawn: one statistic as a layers x heads grid, and the head similarity matrix.

The numbers come from transformer.analysis.head_stats; this module only draws them (NumPy + Plotly).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import check_matrix, plotly_text, readable

STAT_COLOUR_SCALE = "Viridis"
DIVERGENCE_COLOUR_SCALE = "Blues_r"  # dark = similar (small divergence)

__all__ = ["similarity_matrix_fig", "stat_heatmap_fig"]


def stat_heatmap_fig(values, title: str, *, colorbar_title: str = "",
                     zmin: float | None = None, zmax: float | None = None) -> go.Figure:
    """values (L, H): layers down, heads across, each cell written to 3 decimals; hover
    "layer l, head h: value". NaN cells (no data) stay blank."""
    values = check_matrix(values, name="values")
    n_layers, n_heads = values.shape
    fig = go.Figure(go.Heatmap(
        z=values, x=[f"head {h}" for h in range(n_heads)],
        y=[f"layer {layer}" for layer in range(n_layers)], zmin=zmin, zmax=zmax,
        colorscale=STAT_COLOUR_SCALE, xgap=2, ygap=2, texttemplate="%{z:.3f}",
        colorbar=dict(title=plotly_text(colorbar_title)),
        hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
    fig.update_xaxes(type="category", side="top")
    fig.update_yaxes(type="category", autorange="reversed")
    fig.update_layout(title=plotly_text(title), height=max(260, 140 + 60 * n_layers),
                      margin=dict(l=10, r=10, t=90, b=10))
    return readable(fig)


def similarity_matrix_fig(matrix, labels, order=None, *, title: str | None = None,
                          measure: str = "JS divergence") -> go.Figure:
    """matrix (n, n) of divergences between heads, rows and columns put in `order` (e.g. the
    clustering's; default as given), labelled like "L0 H1". Dark = similar. Hover "a vs b:
    value" to 3 decimals."""
    labels = [str(label) for label in labels]
    matrix = check_matrix(matrix, len(labels), len(labels), name="matrix")
    order = list(range(len(labels))) if order is None else [int(i) for i in order]
    if sorted(order) != list(range(len(labels))):
        raise ValueError(f"order must hold every index of 0..{len(labels) - 1} once, got {order}")
    shown = [plotly_text(labels[i]) for i in order]
    z = matrix[np.ix_(order, order)]
    finite = z[np.isfinite(z)]
    fig = go.Figure(go.Heatmap(
        z=z, x=shown, y=shown, zmin=0.0,
        zmax=float(finite.max()) if finite.size and finite.max() > 0 else 1.0,
        colorscale=DIVERGENCE_COLOUR_SCALE, xgap=1, ygap=1,
        colorbar=dict(title=plotly_text(measure)),
        hovertemplate=f"%{{y}} vs %{{x}}: {plotly_text(measure)} %{{z:.3f}}<extra></extra>"))
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category", autorange="reversed")
    fig.update_layout(title=plotly_text(title) if title else None,
                      height=max(360, 160 + 28 * len(labels)),
                      margin=dict(l=10, r=10, t=60 if title else 30, b=10))
    return readable(fig)
