"""What each token contributed to each output token, drawn: the source share over the steps,
one contribution map (output tokens down, source tokens or decoder inputs across), and one
step's contributions as bars.

The numbers come from OpenedModel.contributions (transformer.inference: ALTI+, saliency, input x
gradient, integrated gradients) and transformer.analysis.flow (attention, rollout); this module
only draws them (NumPy + Plotly).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import (
    LEGEND_BELOW,
    WEIGHT_SCALE,
    WINDOW_ROWS,
    cell_hover_data,
    check_matrix,
    colorbar,
    diverging,
    gaps,
    plotly_text,
    positions,
    readable,
    tick_text,
    title_dict,
    token_axis,
    unvalidated_figure,
    window_height,
)

__all__ = ["contribution_map_fig", "source_share_fig", "step_bars_fig"]

LINE_COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea")  # one per method on the share plot
SOURCE_COLOUR, TARGET_COLOUR = "#2563eb", "#f59e0b"


def source_share_fig(output_tokens, shares: dict, *, title: str = "") -> go.Figure:
    """One line per method over the output steps: shares {name: (T,)} in [0, 1], the part of
    each output token's prediction that came from the source (the rest: the target prefix).
    x: the steps, ticked with the output tokens; a dashed line at 0.5."""
    labels = tick_text(output_tokens)
    x = list(range(len(labels)))
    fig = go.Figure()
    for i, (name, values) in enumerate(shares.items()):
        values = np.asarray(values, dtype=float).reshape(-1)
        if len(values) != len(labels):
            raise ValueError(f"{name}: {len(values)} shares for {len(labels)} output tokens")
        fig.add_trace(go.Scatter(
            x=x, y=values, mode="lines+markers", name=plotly_text(name),
            line=dict(color=LINE_COLOURS[i % len(LINE_COLOURS)], width=2),
            customdata=labels,
            hovertemplate=f"{plotly_text(name)}<br>step %{{x}} (%{{customdata}})<br>"
                          "source share %{y:.3f}<extra></extra>"))
    fig.add_hline(y=0.5, line=dict(color="#9ca3af", dash="dash", width=1))
    fig.update_xaxes(**token_axis(list(output_tokens), title=dict(text="output token (step)")))
    fig.update_yaxes(range=[0, 1.02], title="source share")
    fig.update_layout(title=plotly_text(title) if title else None, height=360,
                      margin=dict(l=10, r=10, t=60 if title else 20, b=40),
                      legend=LEGEND_BELOW)
    return readable(fig)


def contribution_map_fig(matrix, rows, cols, *, title: str = "", value_name: str = "share",
                         signed: bool = False, zmax: float | None = None,
                         x_title: str = "source token", y_title: str = "output token"
                         ) -> go.Figure:
    """matrix (T, k): row t what output token t took from each column's token. Unsigned values
    on the weights' blue from 0 to zmax (default: the largest value); signed ones (integrated
    gradients) on a red-white-blue scale centred on 0, from -zmax to zmax (default: the largest
    magnitude; a fixed zmax keeps maps of one quantity comparable, and a map of tiny values
    pale). Hover: both tokens and the value."""
    rows, cols = [str(t) for t in rows], [str(t) for t in cols]
    matrix = check_matrix(np.asarray(matrix, dtype=float), len(rows), len(cols))
    customdata, where = cell_hover_data(rows, cols, y_title, x_title)
    largest = float(np.nanmax(np.abs(matrix))) if matrix.size else 0.0
    scale = (diverging(zmax if zmax is not None else largest) if signed else
             dict(colorscale=WEIGHT_SCALE, zmin=0.0,
                  zmax=zmax if zmax is not None else (largest if largest > 0 else 1.0)))
    trace = dict(type="heatmap", z=matrix.tolist(), x=positions(cols), y=positions(rows),
                 colorbar=colorbar(value_name), **scale, **gaps(matrix.shape),
                 hovertemplate=f"{where}<br>{plotly_text(value_name)} %{{z:.4f}}<extra></extra>")
    if customdata is not None:
        trace["customdata"] = customdata.tolist()
    layout = dict(title=title_dict(title),
                  xaxis=token_axis(cols, title=dict(text=x_title)),
                  yaxis=token_axis(rows, window=WINDOW_ROWS, autorange="reversed",
                                   title=dict(text=y_title)),
                  height=window_height(len(rows), base=170, per_row=22, minimum=300),
                  margin=dict(l=10, r=10, t=60 if title else 20, b=10))
    return unvalidated_figure([trace], layout)


def step_bars_fig(source_tokens, source_values, prefix_tokens, prefix_values, *,
                  title: str = "", value_name: str = "contribution") -> go.Figure:
    """One output step's contributions as bars: the source tokens (blue), then the decoder
    inputs it could see (amber), on one axis; signed values go below 0."""
    src = np.asarray(source_values, dtype=float).reshape(-1)
    tgt = np.asarray(prefix_values, dtype=float).reshape(-1)
    source_labels, prefix_labels = tick_text(source_tokens), tick_text(prefix_tokens)
    if len(src) != len(source_labels) or len(tgt) != len(prefix_labels):
        raise ValueError(f"{len(src)} source values for {len(source_labels)} tokens, "
                         f"{len(tgt)} prefix values for {len(prefix_labels)} tokens")
    x = [f"src {i}: {t}" for i, t in enumerate(source_labels)]
    x += [f"tgt {i}: {t}" for i, t in enumerate(prefix_labels)]
    fig = go.Figure()
    for name, xs, values, colour in (("source", x[:len(src)], src, SOURCE_COLOUR),
                                     ("target prefix", x[len(src):], tgt, TARGET_COLOUR)):
        fig.add_trace(go.Bar(x=xs, y=values, name=name, marker_color=colour,
                             hovertemplate=f"%{{x}}<br>{plotly_text(value_name)} "
                                           "%{y:.4f}<extra></extra>"))
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=x, tickangle=-45)
    fig.update_yaxes(title=plotly_text(value_name))
    fig.update_layout(title=plotly_text(title) if title else None, height=360, bargap=0.15,
                      margin=dict(l=10, r=10, t=60 if title else 20, b=40),
                      legend=LEGEND_BELOW)
    return readable(fig)
