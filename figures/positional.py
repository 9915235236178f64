"""Positional encodings: the (position, dimension) matrix, single dimensions as waves,
position-to-position similarity, the encoder's input (token part + position part = sum), and a
relative position bias (T5's) by the key's offset from the query.

Token axes put cells at positions, ticked with the tokens as they are (figures.common.token_axis).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import (
    cell_hover,
    cell_tokens,
    check_matrix,
    colorbar,
    diverging,
    positions,
    readable,
    subplot_axes,
    subplot_layout,
    tick_text,
    token_axis,
    unvalidated_figure,
)

__all__ = ["bias_by_offset", "dot_similarity", "encoder_input_fig", "offset_fig",
           "positional_heatmap_fig", "relative_bias_fig", "similarity_fig", "sinusoids_fig",
           "value_scale"]

_MARGIN = dict(l=10, r=10, t=50, b=10)


def positional_heatmap_fig(pe, title: str | None = None) -> go.Figure:
    """(length, d_model) codes as a heatmap: position down, dimension across."""
    pe = check_matrix(pe, name="pe")
    length, d_model = pe.shape
    fig = go.Figure(go.Heatmap(  # float32, as the model holds them: half the bytes sent
        z=pe.astype(np.float32), x=np.arange(d_model), y=np.arange(length),
        **diverging(np.abs(pe).max(initial=0)),
        colorbar=colorbar("value"),
        hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.4f}<extra></extra>"))
    fig.update_xaxes(title="dimension")
    fig.update_yaxes(title="position", autorange="reversed")
    fig.update_layout(title=title or f"Positional encoding: {length} positions × {d_model} "
                                     "dimensions",
                      height=min(720, 260 + 4 * length), margin=_MARGIN)
    return readable(fig)


def sinusoids_fig(pe, dims, title: str | None = None) -> go.Figure:
    """Column ``d`` of the codes over position, one line per chosen dimension."""
    pe = check_matrix(pe, name="pe")
    length, d_model = pe.shape
    fig = go.Figure()
    for d in dims:
        if not 0 <= int(d) < d_model:
            raise ValueError(f"dimension {d} is out of range for codes of {d_model} dimensions")
        fig.add_trace(go.Scatter(
            x=np.arange(length), y=pe[:, int(d)], mode="lines", name=f"dimension {int(d)}",
            hovertemplate=f"dimension {int(d)}<br>position %{{x}}<br>value %{{y:.4f}}"
                          "<extra></extra>"))
    fig.update_xaxes(title="position")
    fig.update_yaxes(title="value")
    fig.update_layout(title=title or "Chosen dimensions over position", height=360, margin=_MARGIN)
    return readable(fig)


def bias_by_offset(bias, causal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values (heads, offsets)) of a relative position bias (heads, q, k) added to the
    scores: value[h, o] is the mean of bias[h, i, i + o] over the pairs at offset o = key − query
    (T5's bias depends on the offset alone, so each mean is that one number). causal: offsets
    up to 0 only (a decoder's later keys are masked)."""
    bias = np.asarray(bias, dtype=float)
    if bias.ndim != 3:
        raise ValueError(f"bias must be (heads, queries, keys), got shape {bias.shape}")
    _, q, k = bias.shape
    offsets = np.arange(-(q - 1), (0 if causal else k - 1) + 1) if q and k else np.arange(0)
    values = np.stack([np.diagonal(bias, offset=int(o), axis1=1, axis2=2).mean(-1)
                       for o in offsets], axis=-1) if len(offsets) else bias[:, :0, 0]
    return offsets, values


def relative_bias_fig(bias, causal: bool = False, title: str | None = None) -> go.Figure:
    """A relative position bias (heads, q, k) by offset (bias_by_offset): one line per head,
    key − query across, the number added to the score down."""
    offsets, values = bias_by_offset(bias, causal)
    fig = go.Figure()
    for head, row in enumerate(values):
        fig.add_trace(go.Scatter(
            x=offsets, y=row, mode="lines+markers", name=f"head {head}", marker=dict(size=4),
            hovertemplate=f"head {head}<br>key − query %{{x}}<br>bias %{{y:.4f}}<extra></extra>"))
    fig.add_vline(x=0, line=dict(color="#9ca3af", width=1, dash="dot"))
    fig.update_xaxes(title="key position − query position")
    fig.update_yaxes(title="added to the score")
    fig.update_layout(title=title or "Relative position bias by offset", height=380,
                      margin=_MARGIN)
    return readable(fig)


def dot_similarity(codes) -> np.ndarray:
    """(length, length) dot products of every pair of rows (positions) of ``codes``."""
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise ValueError(f"codes must be 2-D (positions, dimensions), got shape {codes.shape}")
    return codes @ codes.T


def value_scale(values) -> dict:
    """Heatmap colour settings for `values`: one-signed values on a sequential scale over their
    range (all >= 0: light to dark blue, the diverging scale's positive side; all <= 0: dark
    red to light), so the map's contrast is spent on the values it has; values of both signs
    on the diverging scale centred on 0 (figures.common.diverging)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    if low >= 0 and high > low:
        return dict(colorscale="Blues", zmin=low, zmax=high)
    if high <= 0 and high > low:
        return dict(colorscale="Reds", reversescale=True, zmin=low, zmax=high)
    return diverging(max(abs(low), abs(high)))


def _position_axis(**settings) -> dict:
    """A numeric position axis with Plotly's own round ticks (0, 10, 20, ...), horizontal."""
    return dict(type="linear", tickmode="auto", nticks=12, showgrid=False, zeroline=False,
                **settings)


def similarity_fig(matrix, labels: list[str], title: str | None = None) -> go.Figure:
    """A square similarity matrix with the same labels on both axes; hover "position 2 (0) ·
    position 3 (0)", or "position 2 · position 3" when the labels are the positions: then the
    axes are plain position axes with round ticks, else cells at positions ticked with the
    labels as they are. Colours: value_scale (sequential when the values are one-signed)."""
    labels = [str(x) for x in labels]
    matrix = check_matrix(matrix, rows=len(labels), cols=len(labels), name="similarity matrix")
    if labels == [str(i) for i in range(len(labels))]:
        # no per-cell labels to send: 512 positions' pairs as strings were 6 MB of JSON and
        # about a second to write (issue 40, goal 6)
        where, cells = "position %{y:d} · position %{x:d}", {}
        xaxis = _position_axis(title=dict(text="position"))
        yaxis = _position_axis(title=dict(text="position"), autorange="reversed")
    else:
        where = cell_hover("position", "position").replace("<br>", " · ")
        cells = {"customdata": cell_tokens(labels, labels)}
        xaxis = token_axis(labels, title=dict(text="position"))
        yaxis = token_axis(labels, title=dict(text="position"), autorange="reversed")
    heatmap = dict(
        type="heatmap", z=matrix, x=positions(labels), y=positions(labels),
        **value_scale(matrix), colorbar=colorbar("dot product", thickness=14), **cells,
        hovertemplate=f"{where}<br>%{{z:.4f}}<extra></extra>")
    layout = dict(xaxis=xaxis, yaxis=yaxis, height=420, margin=_MARGIN,
                  title=dict(text=title or "Dot product between positions"))
    return unvalidated_figure([heatmap], layout)


def offset_fig(matrix, title: str | None = None) -> go.Figure:
    """A similarity matrix read along its diagonals: the mean dot product of the positions
    `offset` apart (p − q = offset), with the least and greatest as a band (none for
    sinusoids, whose dot product depends only on the offset)."""
    matrix = check_matrix(matrix, name="similarity matrix")
    n = min(matrix.shape)
    diagonals = [np.diagonal(matrix, k) for k in range(n)]
    offsets = np.arange(n)
    mean = np.array([d.mean() for d in diagonals])
    low, high = (np.array([f(d) for d in diagonals]) for f in (np.min, np.max))
    spread = bool(np.any(high - low > 1e-6 * (1 + np.abs(mean))))  # else one value per offset
    fig = go.Figure([
        go.Scatter(x=offsets, y=high, mode="lines", line=dict(width=0), showlegend=False,
                   hoverinfo="skip", visible=spread),
        go.Scatter(x=offsets, y=low, mode="lines", line=dict(width=0), fill="tonexty",
                   fillcolor="rgba(33,102,172,0.15)", name="least .. greatest",
                   hoverinfo="skip", visible=spread),
        go.Scatter(x=offsets, y=mean, mode="lines", name="mean", line=dict(color="#2166ac"),
                   showlegend=spread,
                   hovertemplate="offset %{x}<br>dot product %{y:.4f}<extra></extra>")])
    fig.update_xaxes(title="offset p − q (positions apart)", rangemode="tozero")
    fig.update_yaxes(title="dot product")
    fig.update_layout(title=title or "Dot product by offset", height=420, margin=_MARGIN,
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right"))
    return readable(fig)


def encoder_input_fig(token_part, position_part, total, tokens: list[str],
                      shared_scale: bool = True,
                      total_name: str = "sum = encoder input") -> go.Figure:
    """(tokens × d_model) heatmaps side by side: token embedding, position code and their sum,
    the encoder's input (total_name: what the third is, where a norm follows the sum).
    position_part=None (a model that adds no position code, as T5): two panels, the token
    embedding and the input, no empty one between. shared_scale: one colour scale for all.
    Built as dicts (figures.common.unvalidated_figure), as similarity_fig: both are large."""
    token_part = check_matrix(token_part, rows=len(tokens), name="token_part")
    d_model = token_part.shape[1]
    total = check_matrix(total, len(tokens), d_model, name="total")
    panels = [("token embedding", token_part)]
    if position_part is not None:
        panels.append(("position code", check_matrix(position_part, len(tokens), d_model,
                                                     name="position_part")))
    panels.append((total_name, total))
    n = len(panels)
    rows = np.broadcast_to(np.array(tick_text(tokens), dtype=object)[:, None],
                           (len(tokens), d_model))  # each cell's token, for the hover
    data = []
    for k, (name, part) in enumerate(panels):
        scale = dict(coloraxis="coloraxis") if shared_scale else dict(
            **diverging(np.abs(part).max(initial=0)),
            colorbar=colorbar("value", x=(k + 1) / n - 0.01, thickness=8, len=0.9))
        data.append(dict(
            type="heatmap", z=part, x=np.arange(d_model), y=positions(tokens), name=name,
            customdata=rows, **scale,
            hovertemplate=f"{name}<br>token %{{y:d}} (%{{customdata}}), dimension %{{x}}"
                          "<br>%{z:.4f}<extra></extra>", **subplot_axes(1, k + 1, n)))
    layout = subplot_layout(1, n, shared_yaxes=True, subplot_titles=[name for name, _ in panels],
                            horizontal_spacing=0.03)
    suffixes = [""] + [str(k) for k in range(2, n + 1)]
    for suffix in suffixes:
        layout[f"xaxis{suffix}"]["title"] = dict(text="dimension")
        layout[f"yaxis{suffix}"].update(token_axis(tokens, autorange="reversed"))
    if shared_scale:
        bound = max(np.abs(part).max(initial=0) for _, part in panels)
        scale = diverging(bound)
        layout["coloraxis"] = dict(colorscale=scale["colorscale"], cmid=0, cmin=scale["zmin"],
                                   cmax=scale["zmax"], colorbar=colorbar("value"))
    layout.update(height=max(320, 140 + 22 * len(tokens)), margin=_MARGIN)
    return unvalidated_figure(data, layout)
