"""Comparing attention heads: several maps on one colour scale, the difference of two, and
head importance under ablation.

NumPy and Plotly only. Maps are (queries, keys) arrays; rows are queries, columns keys; cells
sit at positions and the ticks are the tokens as they are (figures.common.token_axis). Head
labels ("cross L1 H2") are transformer.core.kinds'.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.core.kinds import KIND_NAMES, head_label

from .common import (
    CHAR_PX,
    CHART_WIDTH,
    LEGEND_BELOW,
    WEIGHT_SCALE,
    WINDOW_ROWS,
    cell_hover_data,
    check_matrix,
    colorbar,
    diverging,
    gaps,
    positions,
    readable,
    subplot_axes,
    subplot_layout,
    tick_text,
    title_dict,
    token_axis,
    unvalidated_figure,
    window_height,
)

COLOUR_SCALE = WEIGHT_SCALE
KIND_COLOURS = {"encoder": "#2563eb", "decoder": "#16a34a", "cross": "#ea580c"}

__all__ = ["difference_fig", "importance_fig", "side_by_side_fig", "token_log_prob_fig"]


def _per_map(tokens, count: int, name: str) -> list[list[str]]:
    """One token list shared by every map, or one list per map."""
    tokens = list(tokens)
    if tokens and all(isinstance(t, (list, tuple, np.ndarray)) for t in tokens):
        if len(tokens) != count:
            raise ValueError(f"there are {count} maps but {len(tokens)} lists of {name}")
        return [[str(x) for x in t] for t in tokens]
    return [[str(x) for x in tokens]] * count


def side_by_side_fig(maps, titles, query_tokens, key_tokens, *, zmax: float | None = None,
                     title: str | None = None) -> go.Figure:
    """Several (q, k) maps side by side on ONE colour axis, 0 .. zmax (default: the largest
    value of any map). query_tokens / key_tokens: one list shared by every map, or one list per
    map (maps of different sizes). Hover shows query and key (position and token) and the weight
    to 3 decimals. Built as dicts (figures.common.unvalidated_figure), as difference_fig."""
    maps = list(maps)
    titles = [str(t) for t in titles]
    if not maps:
        raise ValueError("side_by_side_fig needs at least one map")
    if len(titles) != len(maps):
        raise ValueError(f"there are {len(maps)} maps but {len(titles)} titles")
    queries = _per_map(query_tokens, len(maps), "query tokens")
    keys = _per_map(key_tokens, len(maps), "key tokens")
    matrices = [check_matrix(m, len(q), len(k), name=f"map {i} ({titles[i]})")
                for i, (m, q, k) in enumerate(zip(maps, queries, keys))]
    if zmax is None:
        zmax = max(float(np.nanmax(m)) if m.size else 0.0 for m in matrices)
        zmax = zmax if zmax > 0 else 1.0
    data = []
    for i, (matrix, q, k) in enumerate(zip(matrices, queries, keys)):
        tokens, where = cell_hover_data(q, k)
        data.append(dict(
            type="heatmap", z=matrix, x=positions(k), y=positions(q), coloraxis="coloraxis",
            name=titles[i], **gaps(matrix.shape),
            hovertemplate=f"{titles[i]}<br>{where}<br>weight %{{z:.3f}}<extra></extra>",
            **subplot_axes(1, i + 1, len(maps))))
        if tokens is not None:
            data[-1]["customdata"] = tokens
    # Room between panels for the next panel's token labels (issue 38: with mixed kinds the y
    # labels ran into the panel before): the longest label after the first panel's, at about
    # CHAR_PX a character, as a share of a full-width chart
    widest = max((len(label) for q in queries[1:] for label in tick_text(q)), default=0)
    spacing = min(0.2, max(0.05, (widest * CHAR_PX + 24) / CHART_WIDTH)) if len(maps) > 1 else 0.05
    layout = subplot_layout(1, len(maps), subplot_titles=titles, horizontal_spacing=spacing)
    for i, (q, k) in enumerate(zip(queries, keys)):
        axes = subplot_axes(1, i + 1, len(maps))  # {"xaxis": "x2", ...}: layout keys xaxis2
        layout["xaxis" + axes["xaxis"][1:]].update(token_axis(k, title=dict(text="key")))
        layout["yaxis" + axes["yaxis"][1:]].update(
            token_axis(q, window=WINDOW_ROWS, autorange="reversed"))
    layout["yaxis"]["title"] = dict(text="query")
    longest = max(len(q) for q in queries)
    layout.update(title=title_dict(title), showlegend=False,
                  coloraxis=dict(colorscale=COLOUR_SCALE, cmin=0.0, cmax=float(zmax),
                                 colorbar=dict(title=dict(text="weight"))),
                  height=window_height(longest, base=200, per_row=24, minimum=380),
                  margin=dict(l=10, r=10, t=90 if title else 60, b=10))
    return unvalidated_figure(data, layout)


def difference_fig(a, b, query_tokens, key_tokens, title: str | None = None) -> go.Figure:
    """a - b of two (q, k) maps of the same size, on the app's diverging colour scale centred at
    0 (symmetric range +-max|a - b|; blue: a is larger, red: b is). Hover shows query and
    key (position and token), both weights and the difference to 3 decimals:
    customdata[..., 0:2] are the query and key tokens, customdata[..., 2:4] the weights a and b."""
    rows, cols = list(query_tokens), list(key_tokens)
    a = check_matrix(a, len(rows), len(cols), name="map a")
    b = check_matrix(b, len(rows), len(cols), name="map b")
    diff = a - b
    bound = float(np.nanmax(np.abs(diff))) if diff.size else 0.0  # 0: diverging widens it
    tokens, where = cell_hover_data(rows, cols)
    weights = np.stack([a, b], axis=-1)
    # (q, k, 4): query token, key token, a, b; a large map: (q, k, 2) a, b only, and float32
    data = (weights.astype(np.float32) if tokens is None
            else np.concatenate([tokens, weights.astype(object)], -1))
    first = 0 if tokens is None else 2
    heatmap = dict(
        type="heatmap", z=diff if tokens is not None else diff.astype(np.float32),
        x=positions(cols), y=positions(rows), customdata=data,
        name="difference", **diverging(bound), **gaps(diff.shape), colorbar=colorbar("a − b"),
        hovertemplate=f"{where}<br>a %{{customdata[{first}]:.3f}} − b "
                      f"%{{customdata[{first + 1}]:.3f}}<br>difference %{{z:.3f}}<extra></extra>")
    layout = dict(xaxis=token_axis(cols, title=dict(text="key")),
                  yaxis=token_axis(rows, window=WINDOW_ROWS, title=dict(text="query"),
                                   autorange="reversed"),
                  title=title_dict(title),
                  height=window_height(len(rows), base=160, per_row=26, minimum=360),
                  margin=dict(l=10, r=10, t=70 if title else 30, b=10))
    return unvalidated_figure([heatmap], layout)


def importance_fig(entries, title: str | None = None) -> go.Figure:
    """Head importance as horizontal bars, one per head, sorted by the change in
    log-probability when that head alone is silenced (most harmful first, at the top), coloured
    by kind, each bar labelled with its value: when one bar dwarfs the others, the small ones
    are still read from their labels. entries: [{"kind", "layer", "head", "delta_log_prob"}]
    (transformer.inference.ablation)."""
    entries = sorted(entries, key=lambda e: (float(e["delta_log_prob"]),
                                             KIND_NAMES.index(e["kind"]), e["layer"], e["head"]))
    fig = go.Figure()
    labels = [head_label(e["kind"], e["layer"], e["head"]) for e in entries]
    for kind in KIND_NAMES:
        chosen = [(label, float(e["delta_log_prob"])) for label, e in zip(labels, entries)
                  if e["kind"] == kind]
        if not chosen:
            continue
        fig.add_trace(go.Bar(
            y=[c[0] for c in chosen], x=[c[1] for c in chosen], orientation="h", name=kind,
            marker_color=KIND_COLOURS[kind], text=[f"{c[1]:+.3g}" for c in chosen],
            textposition="outside", cliponaxis=False, textfont=dict(size=11),
            hovertemplate="%{y}<br>change in log-probability %{x:.4f}<extra></extra>"))
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=labels,
                     autorange="reversed", title="head silenced alone")
    values = [float(e["delta_log_prob"]) for e in entries] or [0.0]
    span = max(max(values), 0.0) - min(min(values), 0.0) or 1.0
    fig.update_xaxes(title="change in log-probability of the original output", zeroline=True,
                     range=[min(min(values), 0.0) - 0.25 * span,  # room for the labels
                            max(max(values), 0.0) + 0.25 * span])
    fig.update_layout(title=title, barmode="overlay", legend=dict(title=dict(text="kind")),
                      height=max(300, 120 + 18 * len(labels)),
                      margin=dict(l=10, r=10, t=60 if title else 30, b=10))
    return readable(fig)


def token_log_prob_fig(tokens, original, ablated, title: str | None = None) -> go.Figure:
    """The log-probability of each scored output token without and with the ablation, as grouped
    bars (one pair per token, in output order, at its position). Hover shows position, token and
    both to 4 decimals."""
    tokens = list(tokens)
    values = [np.asarray(original, float).reshape(-1), np.asarray(ablated, float).reshape(-1)]
    if any(v.size != len(tokens) for v in values):
        raise ValueError(f"there are {len(tokens)} tokens but {values[0].size} original and "
                         f"{values[1].size} ablated log-probabilities")
    fig = go.Figure()
    for name, row, colour in (("original model", values[0], "#64748b"),
                              ("heads silenced", values[1], "#dc2626")):
        fig.add_trace(go.Bar(x=positions(tokens), y=row, name=name, marker_color=colour,
                             customdata=tick_text(tokens),
                             hovertemplate=f"{name}<br>token %{{x:d}} (%{{customdata}})<br>"
                                           "log-probability %{y:.4f}<extra></extra>"))
    fig.update_xaxes(**token_axis(tokens, title="output token"))
    fig.update_yaxes(title="log-probability")
    fig.update_layout(title=title, barmode="group", height=380, legend=LEGEND_BELOW,
                      margin=dict(l=10, r=10, t=60 if title else 30, b=40))
    return readable(fig)
