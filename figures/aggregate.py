"""Aggregated attention maps: one heatmap per layer side by side on a shared colour axis.

The maps come from transformer.analysis.flow (heads reduced, rollouts, source-to-target flow); this
module only draws them and lays them out as a table for export.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import (
    WEIGHT_SCALE,
    WINDOW_ROWS,
    cell_hover_data,
    check_matrix,
    colorbar,
    gaps,
    positions,
    subplot_axes,
    subplot_layout,
    title_dict,
    token_axis,
    unvalidated_figure,
    window_height,
)

COLOUR_SCALE = WEIGHT_SCALE

__all__ = ["layer_grid_fig", "stacked_table"]


def _check_maps(maps, n_rows: int, n_cols: int, titles) -> np.ndarray:
    maps = np.asarray(maps, dtype=float)
    if maps.ndim != 3:
        raise ValueError(f"maps must be (maps, queries, keys), got shape {maps.shape}")
    for i, matrix in enumerate(maps):
        check_matrix(matrix, n_rows, n_cols, name=f"map {i}")
    if len(titles) != maps.shape[0]:
        raise ValueError(f"there are {maps.shape[0]} maps but {len(titles)} titles")
    return maps


def layer_grid_fig(maps, query_tokens, key_tokens, titles, *, zmax: float | None = None,
                   title: str | None = None, x_title: str = "key",
                   y_title: str = "query", value_name: str = "weight") -> go.Figure:
    """maps (L, q, k), e.g. one per layer, as L heatmaps side by side: query tokens down, key
    tokens across (cells at positions, ticked with the tokens as they are), one colour axis from
    0 to zmax (default: the largest value of any map, at most 1: the maps are weights; value
    norms pass their own top). value_name titles the colour bar ("weight", "‖α f(x)‖").
    Hover shows query and key (position and token) and the value to 4 decimals. Built as dicts
    (figures.common.unvalidated_figure): redrawn on every kind or layer change."""
    rows, cols = [str(t) for t in query_tokens], [str(t) for t in key_tokens]
    maps = _check_maps(maps, len(rows), len(cols), titles)
    tokens, where = cell_hover_data(rows, cols, y_title, x_title)  # (q, k, 2) or None
    if zmax is None:
        zmax = min(float(maps.max()), 1.0) if maps.size and maps.max() > 0 else 1.0
    data = [dict(
        type="heatmap", z=matrix, x=positions(cols), y=positions(rows), coloraxis="coloraxis",
        name=titles[i], **gaps(matrix.shape),
        hovertemplate=f"{titles[i]}<br>{where}<br>value %{{z:.4f}}<extra></extra>",
        **subplot_axes(1, i + 1, len(maps))) for i, matrix in enumerate(maps)]
    if tokens is not None:
        for trace in data:
            trace["customdata"] = tokens
    layout = subplot_layout(1, max(len(maps), 1), subplot_titles=list(titles),
                            shared_yaxes=True, horizontal_spacing=0.04)
    for name in [k for k in layout if k.startswith(("xaxis", "yaxis"))]:
        layout[name].update(token_axis(cols, title=dict(text=x_title)) if name[0] == "x" else
                            token_axis(rows, window=WINDOW_ROWS, autorange="reversed"))
    layout["yaxis"]["title"] = dict(text=y_title)
    layout.update(title=title_dict(title),
                  coloraxis=dict(colorscale=COLOUR_SCALE, cmin=0.0, cmax=zmax,
                                 colorbar=colorbar(value_name)),
                  height=window_height(len(rows), base=200, per_row=24, minimum=360),
                  margin=dict(l=10, r=10, t=90 if title else 60, b=10))
    return unvalidated_figure(data, layout)


def stacked_table(maps, query_tokens, titles) -> tuple[np.ndarray, list[str]]:
    """maps (L, q, k) as one (L * q, k) table for a CSV, rows labelled "<title> | <token>"."""
    query_tokens = [str(t) for t in query_tokens]
    maps = np.asarray(maps, dtype=float)
    if maps.ndim != 3:
        raise ValueError(f"maps must be (maps, queries, keys), got shape {maps.shape}")
    maps = _check_maps(maps, len(query_tokens), maps.shape[2], titles)
    labels = [f"{t} | {token}" for t in titles for token in query_tokens]
    return maps.reshape(-1, maps.shape[2]), labels
