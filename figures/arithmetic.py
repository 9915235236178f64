"""The arithmetic of one attention head for one query token, redone in NumPy from the model's
own q, K and V, and drawn step by step.

The rule is transformer.model.attention's: scores = q·Kᵀ / √d_k; blocked keys (mask 0) get the
blocked score added (the model's constant, transformer.core.masking.BLOCKED_SCORE, which the caller
passes in: this module imports no TensorFlow); softmax; then weights × mask, so blocked keys get
exactly 0 and a query whose keys are all blocked gets an all-zero row. The context (the head's
output for this query) = Σ_j w_j · V_j. Key axes put cells at positions, ticked with the tokens
as they are (figures.common.token_axis).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import (
    DIVERGING_SCALE,
    WEIGHT_SCALE,
    WINDOW_ROWS,
    cell_tokens,
    colorbar,
    gaps,
    number_text,
    positions,
    subplot_axes,
    subplot_layout,
    tick_text,
    title_dict,
    token_axis,
    unvalidated_figure,
    window_height,
)
from .mask_maps import BLOCKED_COLOR, MASK_COLORSCALE

MAX_CELL_TEXT = 24  # write numbers in the cells of rows at most this long
VALUE_SCALE = DIVERGING_SCALE  # q, K, V and scores: positive blue, as everywhere
STEPS = (  # (result key, row title; {blocked} is the blocked score as written by number_text)
    ("dots", "q·Kᵀ"),
    ("scaled", "÷ √d_k"),
    ("mask", "mask (1 = may attend)"),
    ("masked", "masked (+ {blocked})"),
    ("weights", "softmax"),
)


def step_titles(blocked_score: float, scale: bool = True, position_bias: bool = False
                ) -> list[str]:
    """The rows' titles of score_steps_fig, the blocked score written in ("masked (+ −1e9)");
    the scores' row says what made them from the dot products: "÷ √d_k", and T5's "+ position
    bias" (it does not scale)."""
    scores = ("÷ √d_k" if scale else "not scaled") + (" + position bias" if position_bias else "")
    return [scores if key == "scaled" else label.format(blocked=number_text(blocked_score))
            for key, label in STEPS]


def head_arithmetic(q_row, K, V, mask_row=None, *, blocked_score: float, scale: bool = True,
                    position_bias=None) -> dict:
    """Every intermediate of one head's attention for one query, in float64.

    q_row: (d_k,); K: (k_len, d_k); V: (k_len, d_v); mask_row: (k_len,), nonzero = may attend
    (None: every key allowed); blocked_score: what the model adds to blocked scores
    (transformer.core.masking.BLOCKED_SCORE). Returns "q", "K", "V", "d_k", "dots" (k_len,) = K q,
    "scaled" = dots / √d_k (dots when scale is False, T5's), plus position_bias (k_len,) when
    given (T5's relative position bias of this query: "position_bias" in the result too),
    "mask" (0/1 floats), "masked" = scaled + (1 − mask)·blocked_score,
    "weights" (the softmax times the mask), "weighted_values" (k_len, d_v) = w_j V_j,
    "context" (d_v,) = their sum, and "blocked_score" (for the figures' labels).
    """
    q, K, V = (np.asarray(a, dtype=np.float64) for a in (q_row, K, V))
    if q.ndim != 1:
        raise ValueError(f"q_row must be 1-D (d_k,), got shape {q.shape}")
    if K.ndim != 2 or K.shape[1] != q.shape[0]:
        raise ValueError(f"K has shape {K.shape} but q_row has d_k = {q.shape[0]}")
    if V.ndim != 2 or V.shape[0] != K.shape[0]:
        raise ValueError(f"V has shape {V.shape} but K has {K.shape[0]} keys")
    k_len = K.shape[0]
    mask = np.ones(k_len) if mask_row is None else (np.asarray(mask_row) != 0).astype(np.float64)
    if mask.shape != (k_len,):
        raise ValueError(f"mask_row has shape {mask.shape} but K has {k_len} keys")
    d_k = q.shape[0]
    dots = K @ q  # (k_len,)
    scaled = dots / np.sqrt(d_k) if scale else dots.copy()
    bias = None
    if position_bias is not None:
        bias = np.asarray(position_bias, dtype=np.float64)
        if bias.shape != (k_len,):
            raise ValueError(f"position_bias has shape {bias.shape} but K has {k_len} keys")
        scaled = scaled + bias
    masked = scaled + (1.0 - mask) * float(blocked_score)
    if k_len:
        exp = np.exp(masked - masked.max())  # finite even when every key is blocked
        weights = exp / exp.sum() * mask
    else:
        weights = np.zeros(0)
    weighted_values = weights[:, None] * V  # (k_len, d_v)
    return {"q": q, "K": K, "V": V, "d_k": d_k, "dots": dots, "scaled": scaled, "mask": mask,
            "masked": masked, "weights": weights, "weighted_values": weighted_values,
            "context": weighted_values.sum(axis=0), "blocked_score": float(blocked_score),
            "scale": bool(scale), "position_bias": bias}


def arithmetic_words(d_k: int, scale: bool, position_bias: bool) -> str:
    """What the page says of the scores: the √d_k they are divided by, or T5's unscaled scores
    and the relative position bias it adds as a term (the same one for every layer of a stack,
    one value per head for each bucket of the distance key − query)."""
    text = (f"d_k = {d_k}, so the dot products are divided by √{d_k} = {d_k ** 0.5:.4f}. "
            if scale else "This model does not scale its dot products (T5's rule: no ÷ √d_k). ")
    if position_bias:
        text += ("Its position bias is added as a term: a learned number per head for the "
                 "bucket of each key's distance from the query (T5 has no other position "
                 "information). ")
    return text + ("Blocked keys (mask 0) get −10⁹ added before the softmax and end with weight "
                   "exactly 0.")


def max_abs_difference(ours, theirs) -> float:
    """max |ours − theirs| over two equally shaped arrays (0.0 when empty)."""
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if ours.shape != theirs.shape:
        raise ValueError(f"cannot compare shape {ours.shape} with shape {theirs.shape}")
    return float(np.abs(ours - theirs).max()) if ours.size else 0.0


def steps_table(result: dict) -> tuple[np.ndarray, list[str]]:
    """The steps over the keys as a (5, k_len) matrix, one row per step, and the steps' names
    (for a CSV export with the keys as columns)."""
    return np.stack([result[k] for k, _ in STEPS]), [k for k, _ in STEPS]


def dimension_labels(n: int) -> list[str]:
    return [str(i) for i in range(n)]


def _axis_hover(title: str, axis: str, labels, index: int) -> str:
    """Hover for one axis: "key %{x:d} (%{customdata[1]})" ("key 3 (2021)") when the labels say
    more than the positions, "dimension %{x:d}" when they are the positions themselves."""
    text = f"{title} %{{{axis}:d}}"
    if [str(x) for x in labels] == [str(i) for i in range(len(labels))]:
        return text
    return f"{text} (%{{customdata[{index}]}})"


def _heatmap(z, x_labels, y_labels, *, colorscale, zmid=None, zmin=None, zmax=None,
             name="value", text_format=".3f", showscale=False, x_title="dimension",
             y_title=None) -> dict:
    """Cells at positions, as a trace dict for figures.common.unvalidated_figure. Hover names
    the row (y_title and position, or only the row's label when y_title is None) and the column
    (x_title and position, and its label unless the labels are the positions); customdata holds
    each cell's (row label, column label)."""
    z = np.asarray(z, dtype=float)
    row = _axis_hover(y_title, "y", y_labels, 0) if y_title else "%{customdata[0]}"
    where = f"{row}<br>{_axis_hover(x_title, 'x', x_labels, 1)}"
    trace = dict(
        type="heatmap", z=z, x=positions(x_labels), y=positions(y_labels), colorscale=colorscale,
        zmid=zmid, zmin=zmin, zmax=zmax, showscale=showscale, name=name, **gaps(z.shape),
        colorbar=colorbar(name) if showscale else None,
        customdata=cell_tokens(y_labels, x_labels), hoverongaps=False,
        texttemplate=f"%{{z:{text_format}}}" if z.shape[-1] <= MAX_CELL_TEXT else None,
        hovertemplate=f"{where}<br>{name} %{{z:.6f}}<extra></extra>")
    return {key: value for key, value in trace.items() if value is not None}


def vector_fig(values, labels, title: str, *, x_title: str = "dimension",
               name: str = "value") -> go.Figure:
    """One row of numbers (e.g. the query q, the context) as a one-row heatmap."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or values.shape[0] != len(labels):
        raise ValueError(f"values have shape {values.shape} but there are {len(labels)} labels")
    trace = _heatmap(values[None], labels, [name], colorscale=VALUE_SCALE, zmid=0, name=name,
                     showscale=True, x_title=x_title)
    layout = dict(xaxis=token_axis(labels, title=dict(text=x_title)), yaxis=token_axis([name]),
                  title=title_dict(title), height=230, margin=dict(l=10, r=10, t=60, b=10))
    return unvalidated_figure([trace], layout)


def matrix_fig(matrix, row_labels, col_labels, title: str, *, x_title: str = "dimension",
               y_title: str = "key", name: str = "value") -> go.Figure:
    """A matrix (e.g. K or V: one row per key token) as a heatmap, row 0 at the top; rows and
    columns at positions, ticked with the labels as they are."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2 or matrix.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix has shape {matrix.shape} but there are {len(row_labels)} row "
                         f"and {len(col_labels)} column labels")
    trace = _heatmap(matrix, col_labels, row_labels, colorscale=VALUE_SCALE, zmid=0, name=name,
                     showscale=True, x_title=x_title, y_title=y_title)
    layout = dict(xaxis=token_axis(col_labels, title=dict(text=x_title)),
                  yaxis=token_axis(row_labels, window=WINDOW_ROWS, title=dict(text=y_title),
                                   autorange="reversed"),
                  title=title_dict(title),
                  height=window_height(len(row_labels), base=120, per_row=24, minimum=260),
                  margin=dict(l=10, r=10, t=60, b=10))
    return unvalidated_figure([trace], layout)


def _axis_names(layout: dict, letter: str) -> list[str]:
    """The layout's axes of one letter ("x": xaxis, xaxis2, ...), as update_xaxes reaches them."""
    return [key for key in layout if key.startswith(f"{letter}axis")]


def score_steps_fig(result: dict, key_tokens, title: str | None = None) -> go.Figure:
    """The steps over the keys, one row each: q·Kᵀ, ÷√d_k, the mask, the masked scores (blocked
    keys drawn grey and labelled with the blocked score, unblocked keys with their score) and
    the softmax weights. result: head_arithmetic's dict (its "blocked_score" labels the row).
    Built as dicts (figures.common.unvalidated_figure): redrawn on every head or query change."""
    keys = list(key_tokens)
    if result["dots"].shape != (len(keys),):
        raise ValueError(f"the result has {result['dots'].shape[0]} keys but there are "
                         f"{len(keys)} key tokens")
    allowed = result["mask"] != 0
    blocked_text = number_text(result["blocked_score"])
    titles = step_titles(result["blocked_score"], result.get("scale", True),
                         result.get("position_bias") is not None)
    scale = float(np.abs(result["scaled"]).max()) if len(keys) else 1.0
    axes = dict(x_title="key", y_title=None)  # rows named by their step, keys by position
    data = []
    for row, ((key, _), label) in enumerate(zip(STEPS, titles), start=1):
        values = result[key]
        if key == "mask":
            trace = _heatmap(values[None], keys, [label], colorscale=MASK_COLORSCALE, zmin=0,
                             zmax=1, name=key, text_format=".0f", **axes)
        elif key == "weights":
            trace = _heatmap(values[None], keys, [label], colorscale=WEIGHT_SCALE, zmin=0,
                             zmax=max(float(values.max(initial=0.0)), 1e-9), name="weight",
                             **axes)
        else:
            shown = np.where(allowed, values, np.nan) if key == "masked" else values
            bound = float(np.abs(values).max(initial=0.0)) if key == "dots" else scale
            trace = _heatmap(shown[None], keys, [label], colorscale=VALUE_SCALE, zmid=0,
                             zmin=-bound, zmax=bound, name=key, **axes)
        data.append({**trace, **subplot_axes(row, 1, 1)})
        if key == "masked" and not allowed.all():
            # Only blocked cells carry the blocked label: a constant texttemplate would be
            # written on every cell, over the real scores of the unblocked ones.
            marks = len(keys) <= MAX_CELL_TEXT
            cells = np.empty((1, len(keys), 2), dtype=object)
            cells[0, :, 0], cells[0, :, 1] = tick_text(keys), values
            grey = dict(
                type="heatmap", z=np.where(allowed, np.nan, 1.0)[None], x=positions(keys), y=[0],
                showscale=False, colorscale=[[0, BLOCKED_COLOR], [1, BLOCKED_COLOR]], xgap=1,
                ygap=1, name="blocked", customdata=cells, hoverongaps=False,
                hovertemplate=f"key %{{x:d}} (%{{customdata[0]}}): blocked<br>score + "
                              f"({blocked_text}) = %{{customdata[1]:.6g}}<extra></extra>",
                **subplot_axes(row, 1, 1))
            if marks:
                grey.update(text=np.where(allowed, "", blocked_text)[None],
                            texttemplate="%{text}")
            data.append(grey)
    layout = _key_rows_layout(keys, [f"{n + 1}. {label}" for n, label in enumerate(titles)],
                              vertical_spacing=0.06)
    layout.update(title=title_dict(title), height=560,
                  margin=dict(l=10, r=10, t=80 if title else 40, b=10))
    return unvalidated_figure(data, layout)


def _key_rows_layout(keys, row_titles, vertical_spacing: float) -> dict:
    """The layout of one-row heatmaps stacked over the same keys: one subplot per row title,
    the x axes ticked with the keys (the last one titled "key"), no y ticks (each row's title
    names it)."""
    layout = subplot_layout(len(row_titles), 1, shared_xaxes=True,
                            vertical_spacing=vertical_spacing, subplot_titles=list(row_titles))
    for name in _axis_names(layout, "x"):
        layout[name].update(token_axis(keys))
    layout[f"xaxis{len(row_titles)}"]["title"] = dict(text="key")
    for name in _axis_names(layout, "y"):
        layout[name].update(showticklabels=False, showgrid=False, zeroline=False)
    return layout


def contributions_fig(weighted_values, context, key_tokens, title: str | None = None
                      ) -> go.Figure:
    """Each key's contribution w_j·V_j (one row per key, at its position, ticked with its token)
    above their sum, the context vector, on one colour scale."""
    weighted_values = np.asarray(weighted_values, dtype=float)
    context = np.asarray(context, dtype=float)
    keys = list(key_tokens)
    if weighted_values.ndim != 2 or weighted_values.shape[0] != len(keys):
        raise ValueError(f"weighted_values have shape {weighted_values.shape} but there are "
                         f"{len(keys)} key tokens")
    if context.shape != (weighted_values.shape[1],):
        raise ValueError(f"context has shape {context.shape} but weighted_values have "
                         f"{weighted_values.shape[1]} columns")
    dims = dimension_labels(context.shape[0])
    bound = max(float(np.abs(weighted_values).max(initial=0.0)),
                float(np.abs(context).max(initial=0.0)), 1e-9)
    data = [
        {**_heatmap(weighted_values, dims, keys, colorscale=VALUE_SCALE, zmid=0, zmin=-bound,
                    zmax=bound, name="w·v", showscale=True, y_title="key"),
         **subplot_axes(1, 1, 1)},
        {**_heatmap(context[None], dims, ["context"], colorscale=VALUE_SCALE, zmid=0,
                    zmin=-bound, zmax=bound, name="context"), **subplot_axes(2, 1, 1)},
    ]
    layout = subplot_layout(
        2, 1, shared_xaxes=True, vertical_spacing=0.08,
        row_heights=[min(max(len(keys), 1), WINDOW_ROWS), 1.5],
        subplot_titles=["w_j · V_j: each key's weighted value row",
                        "Σ_j w_j · V_j: the head's output (context) for the query"])
    for name in _axis_names(layout, "x"):
        layout[name].update(token_axis(dims))
    layout["xaxis2"]["title"] = dict(text="dimension")
    layout["yaxis"].update(token_axis(keys, window=WINDOW_ROWS, autorange="reversed"))
    layout["yaxis2"].update(token_axis(["context"]))
    layout.update(title=title_dict(title),
                  height=window_height(len(keys), base=200, per_row=24, minimum=360),
                  margin=dict(l=10, r=10, t=80 if title else 50, b=10))
    return unvalidated_figure(data, layout)


VALUE_NORM_ROWS = (  # (trace name, row title) of value_norm_steps_fig
    ("α", "αᵢⱼ: the weight (softmax)"),
    ("‖f(x)‖", "‖f(xⱼ)‖: the transformed value's length"),
    ("‖α f(x)‖", "αᵢⱼ ‖f(xⱼ)‖: what key j adds to the query (weight × value norm)"),
)


def value_norm_steps_fig(weights_row, norms, key_tokens, title: str | None = None
                         ) -> go.Figure:
    """Kobayashi et al.'s weight × value norm for one query row, over the keys: the weights
    αᵢⱼ (k_len,), the norms ‖f(xⱼ)‖ (k_len,) and their product, one row each, each on a colour
    scale from 0 to its own largest value (the three are in different units). Trace names are
    VALUE_NORM_ROWS' ("α", "‖f(x)‖", "‖α f(x)‖")."""
    weights_row = np.asarray(weights_row, dtype=float)
    norms = np.asarray(norms, dtype=float)
    keys = list(key_tokens)
    if weights_row.shape != (len(keys),) or norms.shape != (len(keys),):
        raise ValueError(f"weights_row {weights_row.shape} and norms {norms.shape} must both be "
                         f"({len(keys)},), one value per key token")
    rows = (weights_row, norms, weights_row * norms)
    data = []
    for row, ((name, label), values) in enumerate(zip(VALUE_NORM_ROWS, rows), start=1):
        trace = _heatmap(values[None], keys, [label], colorscale=WEIGHT_SCALE, zmin=0,
                         zmax=max(float(values.max(initial=0.0)), 1e-9), name=name,
                         x_title="key", y_title=None)
        data.append({**trace, **subplot_axes(row, 1, 1)})
    layout = _key_rows_layout(keys, [label for _, label in VALUE_NORM_ROWS],
                              vertical_spacing=0.12)
    layout.update(title=title_dict(title), height=380,
                  margin=dict(l=10, r=10, t=80 if title else 40, b=10))
    return unvalidated_figure(data, layout)
