"""Masks as heatmaps, and what masking does to one attention row.

Convention (transformer.model.masks): 1 = the query may attend to the key, 0 = the key is blocked.
The blocked score (what the model adds to blocked scores, transformer.core.masking.BLOCKED_SCORE) is
passed in by the caller: this module imports no TensorFlow. Token axes put cells at positions,
ticked with the tokens as they are (figures.common.token_axis).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import (
    CHAR_PX,
    CHART_WIDTH,
    WINDOW_ROWS,
    WORD_START,
    WORD_START_MARK,
    cell_hover,
    cell_tokens,
    check_matrix,
    fit_text,
    gaps,
    number_text,
    plotly_text,
    position_hover,
    positions,
    subplot_axes,
    subplot_layout,
    tick_step,
    tick_text,
    title_dict,
    token_axis,
    tokens_in_hover,
    unvalidated_figure,
    window_height,
)

ALLOWED_COLOR, BLOCKED_COLOR = "#2563eb", "#e5e7eb"
MASK_COLORSCALE = [[0.0, BLOCKED_COLOR], [0.5, BLOCKED_COLOR],  # two flat halves: 0 and 1
                   [0.5, ALLOWED_COLOR], [1.0, ALLOWED_COLOR]]
SCORE_COLOR, WEIGHT_COLOR, BLOCKED_MARK = "#64748b", "#ea580c", "#6b7280"
MAX_CELL_TEXT = 40  # a mask with more rows or columns has no 0 / 1 written in its cells


def row_panels(blocked_score: float) -> tuple[str, str, str]:
    """The three panel titles of masking_row_fig, the blocked score written in."""
    return ("1. Raw scores QKᵀ/√d_k (before masking)",
            f"2. Scores after masking (blocked keys get {number_text(blocked_score)}: weight 0)",
            "3. Softmax weights (the model's attention row)")


def masked_softmax(scores, mask, *, blocked_score: float) -> np.ndarray:
    """The model's rule redone in NumPy for checking, over the last axis: softmax(scores +
    (1 − mask)·blocked_score) × mask, so blocked keys get exactly 0 and a row with every key
    blocked is all 0. blocked_score: transformer.core.masking.BLOCKED_SCORE."""
    scores, allowed = np.asarray(scores, dtype=float), np.asarray(mask) != 0
    if scores.shape != allowed.shape:
        raise ValueError(f"scores have shape {scores.shape} but the mask has shape {allowed.shape}")
    if scores.size == 0:
        return np.zeros_like(scores)
    masked = scores + (~allowed) * float(blocked_score)
    exp = np.exp(masked - masked.max(axis=-1, keepdims=True))  # finite even if all are blocked
    return exp / exp.sum(axis=-1, keepdims=True) * allowed


def mask_heatmap_fig(mask, row_labels, col_labels, title: str, *, x_title: str = "key",
                     y_title: str = "query") -> go.Figure:
    """A (rows, cols) 0/1 mask drawn cell by cell at positions, the labels as they are as ticks,
    row 0 at the top. customdata per cell: (row label, column label, meaning)."""
    rows, cols = [str(x) for x in row_labels], [str(x) for x in col_labels]
    mask = check_matrix(mask, len(rows), len(cols), name="mask")
    heatmap = dict(type="heatmap", z=mask.astype(np.uint8), x=positions(cols), y=positions(rows),
                   zmin=0, zmax=1, colorscale=MASK_COLORSCALE, showscale=False)
    if tokens_in_hover(len(rows), len(cols)):  # each cell named, its 0 or 1 written in it
        meaning = np.where(mask != 0, "may attend", "blocked").astype(object)
        heatmap.update(
            customdata=np.concatenate([cell_tokens(rows, cols), meaning[..., None]], axis=-1),
            hovertemplate=f"{cell_hover(y_title, x_title)}<br>mask %{{z:.3f}}: "
                          "%{customdata[2]}<extra></extra>")
    else:  # 400 x 400: positions in the hover, the tokens on the axes
        heatmap["hovertemplate"] = (f"{position_hover(y_title, x_title)}<br>mask %{{z:d}} "
                                    "(1 may attend, 0 blocked)<extra></extra>")
    if max(mask.shape) <= MAX_CELL_TEXT:
        heatmap.update(xgap=1, ygap=1, texttemplate="%{z:.0f}")
    layout = dict(title=title_dict(title),
                  height=window_height(len(rows), base=160, per_row=28, minimum=320),
                  margin=dict(l=10, r=10, t=80, b=10),
                  xaxis=token_axis(cols, title=dict(text=x_title)),
                  yaxis=token_axis(rows, window=WINDOW_ROWS, title=dict(text=y_title),
                                   autorange="reversed"))
    return unvalidated_figure([heatmap], layout)


def batch_mask_fig(mask, ids, tokens, row_labels, title: str, width: int = CHART_WIDTH
                   ) -> go.Figure:
    """A (B, N) padding mask: one row per sentence, one column per padded position; each cell
    shows its token, shortened ("…") to what a cell of a `width`-pixel chart holds so it never
    spills into the next (the hover shows it whole, with its id). Rows at positions, ticked
    with row_labels as they are."""
    rows = [str(x) for x in row_labels]
    mask = check_matrix(mask, len(rows), name="mask")
    ids = np.asarray(ids)
    if ids.shape != mask.shape:
        raise ValueError(f"ids have shape {ids.shape} but the mask has shape {mask.shape}")
    if len(tokens) != mask.shape[0] or any(len(row) != mask.shape[1] for row in tokens):
        raise ValueError(f"tokens have row lengths {[len(row) for row in tokens]} but the mask has "
                         f"shape {mask.shape}")
    cell_px = (width - CHAR_PX * max(map(len, rows), default=0) - 60) / max(mask.shape[1], 1)
    whole = np.array(tick_text([t for row in tokens for t in row]), dtype=object).reshape(
        mask.shape)
    wide = cell_px >= 2 * CHAR_PX  # room for a character and "…"; else no text (hover has it)
    text = [[plotly_text(fit_text(t, cell_px)).replace(WORD_START, WORD_START_MARK) if wide
             else "" for t in row] for row in tokens]
    meaning = np.where(mask != 0, "may attend", "blocked (padding)")
    names = np.broadcast_to(np.array(tick_text(rows), dtype=object)[:, None], mask.shape)
    heatmap = dict(
        type="heatmap", z=mask, x=positions(range(mask.shape[1])), y=positions(rows), zmin=0,
        zmax=1, colorscale=MASK_COLORSCALE, showscale=False, **gaps(mask.shape), text=text,
        texttemplate="%{text}", textfont=dict(size=12),
        customdata=np.stack([ids.astype(str).astype(object), meaning.astype(object), names,
                             whole], axis=-1),
        hovertemplate="%{customdata[2]}<br>position %{x}: %{customdata[3]} (id "
                      "%{customdata[0]})<br>"
                      "mask %{z:.3f}: %{customdata[1]}<extra></extra>")
    layout = dict(title=title_dict(title), height=150 + 45 * mask.shape[0],
                  margin=dict(l=10, r=10, t=80, b=10),
                  xaxis=dict(title=dict(text="position"), tickmode="linear", tick0=0,
                             dtick=tick_step(mask.shape[1]), showgrid=False, zeroline=False),
                  yaxis=token_axis(rows, title=dict(text="batch row"), autorange="reversed"))
    return unvalidated_figure([heatmap], layout)


def _runs(indices) -> list[tuple[int, int]]:
    """Sorted positions as runs of neighbours: [0, 1, 2, 5] -> [(0, 2), (5, 5)] (one shaded
    rectangle per run: a look-ahead row blocks hundreds of keys in one run)."""
    runs = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def masking_row_fig(scores, mask, weights, key_tokens, title: str | None = None, *,
                    blocked_score: float) -> go.Figure:
    """Three stacked panels over the keys of one query (bars at key positions, ticked with the
    tokens as they are): raw scores, scores after masking (blocked keys left empty, shaded and
    marked "blocked"), softmax weights. blocked_score: transformer.core.masking.BLOCKED_SCORE, for
    the titles and hovers. Built as dicts (figures.common.unvalidated_figure): Plotly's
    add_vrect per blocked key took 30 s for 100 blocked keys (bench/figure_build.py)."""
    keys = list(key_tokens)
    arrays = {"scores": scores, "mask": mask, "weights": weights}
    for name, values in arrays.items():
        values = arrays[name] = np.asarray(values, dtype=float)
        if values.ndim != 1 or values.shape[0] != len(keys):
            raise ValueError(
                f"{name} has shape {values.shape} but there are {len(keys)} key tokens")
    scores, allowed, weights = arrays["scores"], arrays["mask"] != 0, arrays["weights"]
    blocked = [i for i in range(len(keys)) if not allowed[i]]
    x, names = positions(keys), tick_text(keys)
    key = "key %{x:d} (%{customdata})"
    panel = [subplot_axes(row, 1, 1) for row in (1, 2, 3)]  # the traces' axes, top to bottom
    data = [
        dict(type="bar", x=x, y=scores, name="raw score", marker=dict(color=SCORE_COLOR),
             customdata=names, hovertemplate=f"{key}<br>score %{{y:.4f}}<extra></extra>",
             **panel[0]),
        dict(type="bar", x=x, y=[float(s) if a else None for s, a in zip(scores, allowed)],
             name="masked score", marker=dict(color=ALLOWED_COLOR), customdata=names,
             hovertemplate=f"{key}<br>score %{{y:.4f}} (may attend)<extra></extra>", **panel[1]),
        dict(type="scatter", x=blocked, y=[0.0] * len(blocked), name="blocked",
             mode="markers+text", text=["blocked"] * len(blocked), textposition="top center",
             customdata=[names[i] for i in blocked],
             marker=dict(symbol="x-thin", size=12, line=dict(width=2, color=BLOCKED_MARK)),
             textfont=dict(color=BLOCKED_MARK),
             hovertemplate=f"{key}: blocked (mask 0)<br>score + ({number_text(blocked_score)}) "
                           "→ weight 0<extra></extra>", **panel[1]),
        dict(type="bar", x=x, y=weights, name="softmax weight", marker=dict(color=WEIGHT_COLOR),
             customdata=names, hovertemplate=f"{key}<br>weight %{{y:.4f}}<extra></extra>",
             **panel[2]),
    ]
    layout = subplot_layout(3, 1, shared_xaxes=True, vertical_spacing=0.09,
                            subplot_titles=list(row_panels(blocked_score)))
    # Shade blocked keys in every panel: position i spans [i - 0.5, i + 0.5].
    shapes = [dict(type="rect", x0=start - 0.5, x1=end + 0.5, xref=axes["xaxis"],
                   yref=f"{axes['yaxis']} domain", y0=0, y1=1, fillcolor=BLOCKED_MARK,
                   opacity=0.15, line=dict(width=0), layer="below")
              for start, end in _runs(blocked) for axes in panel]
    for row, y_title in enumerate(("score", "score", "weight"), start=1):
        suffix = "" if row == 1 else str(row)
        layout[f"xaxis{suffix}"].update(token_axis(keys, range=[-0.5, max(len(keys), 1) - 0.5]))
        layout[f"yaxis{suffix}"]["title"] = dict(text=y_title)
    layout["xaxis3"]["title"] = dict(text="key")
    layout.update(title=title_dict(title), height=620, showlegend=False, bargap=0.25,
                  margin=dict(l=10, r=10, t=80 if title else 40, b=10))
    if shapes:
        layout["shapes"] = shapes
    return unvalidated_figure(data, layout)
