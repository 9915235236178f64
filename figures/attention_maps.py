"""Attention maps: one head as a heatmap, every head as small multiples, the linked view.

Rows are queries (top to bottom in token order), columns are keys; cells sit at positions
(0 .. n - 1) and the ticks are the tokens as they are (figures.common.token_axis), so a repeated
token shows twice; hover names position and token ("key 3 (2021)"). ``blocked`` arrays use
True = BLOCKED; the masks of ``OpenedModel.attention`` use True = may attend, so callers pass
``~mask``. Blocked cells are NaN in the weights' heatmap and drawn by a second heatmap named
"blocked (masked)": grey cells marked '×', so they never look like small weights.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from transformer.core.kinds import KIND_NAMES, KINDS

from .common import (
    WEIGHT_SCALE,
    WINDOW_ROWS,
    cell_hover,
    cell_tokens,
    check_matrix,
    plotly_text,
    position_hover,
    positions,
    subplot_axes,
    subplot_layout,
    tick_text,
    token_axis,
    tokens_in_hover,
    unvalidated_figure,
    window_height,
)

COLORSCALE = WEIGHT_SCALE
BLOCKED_NAME = "blocked (masked)"
BLOCKED_CELL, BLOCKED_MARK = "#d1d5db", "#4b5563"
MAX_MARKED_CELLS = 60  # beyond this many rows or columns, blocked cells are grey without '×'
HIGHLIGHT_COLOR, SELECTED_COLOR = "#dc2626", "#dc2626"
ROW_PICKER = "pick a row"


def _check_blocked(blocked, shape, name="blocked") -> np.ndarray:
    """A bool array of the weights' shape (True = blocked), or all False."""
    if blocked is None:
        return np.zeros(shape, bool)
    blocked = np.asarray(blocked, bool)
    if blocked.shape != shape:
        raise ValueError(f"{name} has shape {blocked.shape} but the weights have shape {shape}")
    return blocked


def _cells(weights, blocked, query_tokens, key_tokens, *, query_title="query",
           key_title="key", zmin=0.0, zmax=1.0, coloraxis=None, value_name="weight") -> list:
    """The heatmap of one map (blocked cells NaN) and, when any cell is blocked, a grey one, as
    trace dicts for unvalidated_figure. Cells at positions; customdata holds each cell's (query
    token, key token) for the hover, in the trace that shows the cell only (None in the other),
    so the figure stays small."""
    rows, cols = positions(query_tokens), positions(key_tokens)
    named = tokens_in_hover(len(rows), len(cols))
    tokens = cell_tokens(query_tokens, key_tokens) if named else None  # (q, k, 2)
    where = (cell_hover if named else position_hover)(query_title, key_title)
    dtype = np.float64 if named else np.float32  # a large map: half the bytes, 7 digits
    heatmap = dict(
        type="heatmap", z=np.where(blocked, np.nan, weights).astype(dtype), x=cols, y=rows,
        name=value_name, hoverongaps=False,
        hovertemplate=f"{where}<br>{plotly_text(value_name)}: %{{z:.3f}}<extra></extra>")
    if named:
        heatmap["customdata"] = np.where(blocked[..., None], None, tokens)
    if coloraxis:
        heatmap["coloraxis"] = coloraxis
    else:
        heatmap.update(zmin=zmin, zmax=zmax, colorscale=COLORSCALE,
                       colorbar=dict(title=dict(text=plotly_text(value_name))))
    traces = [heatmap]
    if blocked.any():  # grey cells, '×' in each while the map is small enough to read them
        marks = max(blocked.shape) <= MAX_MARKED_CELLS
        grey = dict(
            type="heatmap", z=np.where(blocked, 1.0, np.nan).astype(dtype), x=cols, y=rows, name=BLOCKED_NAME,
            zmin=0, zmax=1, colorscale=[[0, BLOCKED_CELL], [1, BLOCKED_CELL]], showscale=False,
            hoverongaps=False,
            textfont=dict(color=BLOCKED_MARK, size=max(8, min(16, 360 // max(blocked.shape)))),
            hovertemplate=f"{where}<br>blocked (masked)<extra></extra>")
        if named:
            grey["customdata"] = np.where(blocked[..., None], tokens, None)
        if marks:
            grey.update(text=np.where(blocked, "×", ""), texttemplate="%{text}")
        traces.append(grey)
    return traces


def _row_outline(row: int, n_cols: int, color=HIGHLIGHT_COLOR, name="highlight") -> dict:
    """A rectangle around row `row` (the row at position r spans r - 0.5 .. r + 0.5)."""
    return dict(type="rect", x0=-0.5, x1=n_cols - 0.5, y0=row - 0.5, y1=row + 0.5, name=name,
                line=dict(color=color, width=3), fillcolor="rgba(0,0,0,0)", layer="above")


def _check_row(row, n_rows, name="highlight_row") -> int:
    if not 0 <= int(row) < n_rows:
        raise ValueError(f"{name} is {row} but there are {n_rows} query rows")
    return int(row)


def attention_heatmap_fig(weights, query_tokens, key_tokens, *, title=None, colour_scale="fixed",
                          blocked=None, highlight_row=None, query_title="query",
                          key_title="key", zmax: float = 1.0,
                          value_name: str = "weight") -> go.Figure:
    """One (q, k) attention map: query tokens as rows (top to bottom), key tokens as columns.

    colour_scale "fixed" maps 0..zmax (1: weights; a value-norm map passes its own top), "fit"
    the min..max of the unblocked cells. blocked (q, k), True = blocked: NaN in the weights,
    grey '×' cells in the trace "blocked (masked)". highlight_row outlines that query row.
    value_name names the values in the hover and on the colour bar ("weight", "‖α f(x)‖")."""
    rows, cols = list(query_tokens), list(key_tokens)
    weights = check_matrix(weights, len(rows), len(cols), name="weights")
    blocked = _check_blocked(blocked, weights.shape)
    if colour_scale == "fixed":
        zmin, zmax = 0.0, float(zmax)
    elif colour_scale == "fit":
        shown = weights[~blocked]
        zmin, zmax = (float(shown.min()), float(shown.max())) if shown.size else (0.0, 1.0)
        if zmax - zmin < 1e-9:  # a flat map: widen so Plotly has a range to map
            zmin, zmax = zmin - 1e-6, zmax + 1e-6
    else:
        raise ValueError(f'colour_scale must be "fixed" or "fit", got {colour_scale!r}')
    data = _cells(weights, blocked, rows, cols, query_title=query_title, key_title=key_title,
                  zmin=zmin, zmax=zmax, value_name=value_name)
    layout = dict(
        xaxis=token_axis(cols, title=dict(text=key_title)),
        yaxis=token_axis(rows, window=WINDOW_ROWS, title=dict(text=query_title),
                         autorange="reversed"),
        showlegend=False, height=window_height(len(rows), base=160, per_row=26, minimum=360),
        margin=dict(l=10, r=10, t=70 if title else 30, b=10))
    layout["title"] = {} if title is None else dict(text=title)
    if highlight_row is not None:
        layout["shapes"] = [_row_outline(_check_row(highlight_row, len(rows)), len(cols))]
    return unvalidated_figure(data, layout)


def block_max_pool(weights, max_cells: int = 64):
    """Downsample the last two axes (q, k) to at most max_cells each by the max over blocks of
    (fq, fk) = (ceil(q / max_cells), ceil(k / max_cells)) cells (the last block may be short).
    Returns (pooled (..., ceil(q / fq), ceil(k / fk)), (fq, fk)), in the weights' own floating
    type (a maximum is exact in any)."""
    weights = np.asarray(weights)
    if weights.dtype.kind != "f":
        weights = weights.astype(float)
    if max_cells < 1:
        raise ValueError(f"max_cells must be >= 1, got {max_cells}")
    *lead, q, k = weights.shape
    fq, fk = max(1, math.ceil(q / max_cells)), max(1, math.ceil(k / max_cells))
    if fq == fk == 1:
        return weights, (1, 1)
    qp, kp = math.ceil(q / fq), math.ceil(k / fk)
    pad = [(0, 0)] * len(lead) + [(0, qp * fq - q), (0, kp * fk - k)]
    padded = np.pad(weights, pad, constant_values=-np.inf)
    blocks = padded.reshape(*lead, qp, fq, kp, fk)
    return blocks.max(axis=(-3, -1)), (fq, fk)


def model_view_fig(weights, query_tokens, key_tokens, *, layer_labels=None, selected=None,
                   max_cells=64, title=None, zmax: float = 1.0,
                   value_name: str = "weight") -> go.Figure:
    """Every head of one attention kind: a layers x heads grid of small heatmaps sharing one
    colour axis (0..zmax: 1 for weights, a value-norm map's own top), no tick labels, the heads
    named above their columns and the layers right of their rows; the colour bar's title is
    value_name.

    The grid is one heatmap: the thumbnails tiled into one matrix, a gap of empty (NaN) cells
    between them (model_view_tile says where each sits; layout.meta["model_view"] holds the
    sizes). A grid of subplots, an axis pair per head, took the browser 1.1-1.5 s to draw for
    nllb-200-distilled-600M's 12 x 16 heads, the tiled one 50 ms. One invisible marker at each
    thumbnail's centre (trace "cell", customdata [layer, head]): hovering anywhere in a
    thumbnail names its layer and head (the nearest marker), and a click selects it (Plotly
    cannot select heatmap cells). selected=(layer, head) outlines that thumbnail. When q or k
    exceeds max_cells, thumbnails show block maxima (see block_max_pool) rounded to 3 decimals
    and the title says so."""
    weights = np.asarray(weights)  # pooled as computed (float32), widened after
    if weights.dtype.kind != "f":
        weights = weights.astype(float)
    if weights.ndim != 4:
        raise ValueError(f"weights must be (layers, heads, q, k), got shape {weights.shape}")
    layers, heads, q, k = weights.shape
    if q != len(query_tokens):
        raise ValueError(f"weights have {q} query rows but there are {len(query_tokens)} query "
                         "tokens")
    if k != len(key_tokens):
        raise ValueError(f"weights have {k} key columns but there are {len(key_tokens)} key "
                         "tokens")
    layer_labels = list(layer_labels) if layer_labels is not None else [
        f"layer {layer}" for layer in range(layers)]
    if len(layer_labels) != layers:
        raise ValueError(f"weights have {layers} layers but there are {len(layer_labels)} "
                         "layer labels")
    pooled, (fq, fk) = block_max_pool(weights, max_cells)
    downsampled = (fq, fk) != (1, 1)
    # float32 once downsampled (3 decimals); else in the weights' own precision, each value as
    # the model computed it (a model's float32 maps sent as float32: half the bytes of float64,
    # and the same numbers)
    pooled = np.round(pooled, 3).astype(np.float32) if downsampled else pooled
    qp, kp = pooled.shape[-2:]
    last_rows, last_columns = model_view_tile(layers - 1, heads - 1, qp, kp)
    tiled = np.full((last_rows.stop, last_columns.stop), np.nan, pooled.dtype)  # the whole grid
    for layer in range(layers):
        for head in range(heads):
            tiled[model_view_tile(layer, head, qp, kp)] = pooled[layer, head]
    # each thumbnail's centre: a layer's rows, a head's columns
    rows = [model_view_tile(layer, 0, qp, kp)[0].start + (qp - 1) / 2 for layer in range(layers)]
    columns = [model_view_tile(0, head, qp, kp)[1].start + (kp - 1) / 2 for head in range(heads)]
    data = [dict(type="heatmap", z=tiled, coloraxis="coloraxis", hoverinfo="skip",
                 name="every head"),
            dict(type="scatter", x=[x for _ in rows for x in columns],
                 y=[y for y in rows for _ in columns],
                 customdata=[[layer, head] for layer in range(layers) for head in range(heads)],
                 text=[label for label in layer_labels for _ in range(heads)], mode="markers",
                 name="cell", showlegend=False, marker=dict(size=1, opacity=0),
                 hovertemplate="%{text}, head %{customdata[1]}<br>click to open this head"
                               "<extra></extra>")]
    bare = dict(showticklabels=False, ticks="", showgrid=False, zeroline=False)
    layout = {"xaxis": dict(range=[-0.5, tiled.shape[1] - 0.5], **bare),
              "yaxis": dict(range=[tiled.shape[0] - 0.5, -0.5], **bare),  # the first layer on top
              # the heads above their columns, the layers right of their rows (as subplot titles)
              "annotations": [dict(text=f"head {h}", x=x, xref="x", y=1.0, yref="paper",
                                   xanchor="center", yanchor="bottom", showarrow=False,
                                   font=dict(size=14)) for h, x in enumerate(columns)]
              + [dict(text=plotly_text(label), x=1.0, xref="paper", y=y, yref="y",
                      xanchor="left", yanchor="middle", textangle=90, showarrow=False,
                      font=dict(size=14)) for label, y in zip(layer_labels, rows)],
              "meta": {"model_view": {"rows": qp, "columns": kp, "row_gap": _tile_gap(qp),
                                      "column_gap": _tile_gap(kp)}}}
    if selected is not None:
        layer, head = (int(x) for x in selected)
        if not (0 <= layer < layers and 0 <= head < heads):
            raise ValueError(f"selected is {tuple(selected)} but there are {layers} layers and "
                             f"{heads} heads")
        tile = model_view_tile(layer, head, qp, kp)
        layout["shapes"] = [dict(type="rect", xref="x", yref="y", name="selected",
                                 x0=tile[1].start - 0.5, x1=tile[1].stop - 0.5,
                                 y0=tile[0].start - 0.5, y1=tile[0].stop - 0.5,
                                 line=dict(color=SELECTED_COLOR, width=4))]
    if title is None:
        title = f"All {layers} layers × {heads} heads ({q} queries × {k} keys)"
    if downsampled:
        title += (f"<br><sup>Downsampled to {qp} × {kp}: each cell is the max over a block of "
                  f"{fq} × {fk} cells, rounded to 3 decimals</sup>")
    layout.update(
        title=dict(text=title),
        coloraxis=dict(cmin=0, cmax=float(zmax), colorscale=COLORSCALE,
                       colorbar=dict(title=dict(text=plotly_text(value_name)), x=1.04)),
        height=90 + 150 * layers, margin=dict(l=10, r=10, t=90, b=10),
        plot_bgcolor="white",  # the gaps between thumbnails: white, as the page around them
        hovermode="closest", hoverdistance=-1, clickmode="event+select", showlegend=False)
    return unvalidated_figure(data, layout)


def _tile_gap(cells: int) -> int:
    """Empty cells between two thumbnails along a side of `cells` cells: a sixth of it, at
    least one."""
    return max(1, math.ceil(cells / 6))


def model_view_tile(layer: int, head: int, rows: int, columns: int) -> tuple[slice, slice]:
    """Where model_view_fig's one heatmap holds the thumbnail of (layer, head), each thumbnail
    `rows` x `columns` cells (the queries and keys, downsampled or not): its (rows, columns)
    slices of the tiled matrix."""
    top = layer * (rows + _tile_gap(rows))
    left = head * (columns + _tile_gap(columns))
    return slice(top, top + rows), slice(left, left + columns)


def model_view_cell(points) -> tuple[int, int] | None:
    """(layer, head) of the first model-view marker among Plotly selection points, else None."""
    for point in points or ():
        data = point.get("customdata") if isinstance(point, dict) else None
        if isinstance(data, (list, tuple)) and len(data) == 2:
            try:
                return int(data[0]), int(data[1])
            except (TypeError, ValueError):
                continue
    return None


def linked_view_fig(encoder, decoder, cross, source_tokens, target_tokens, *,
                    selected_target=None, blocked: dict | None = None, panel_titles=None,
                    title=None, zmax: float = 1.0, value_name: str = "weight") -> go.Figure:
    """Encoder self (N, N) | decoder self (T, T) | cross (T, N) attention side by side, one colour
    axis (0..zmax: 1 for weights, value norms' own top; value_name titles its colour bar and
    names the values in the hover); each panel's query and key sides come from
    transformer.core.kinds. selected_target
    (a target row) is outlined in the panels whose queries are target tokens (decoder, cross).
    blocked: {"encoder" | "decoder" | "cross": bool array, True = blocked}, any subset.
    panel_titles default to the kinds' labels.

    In the target-query panels every cell carries an invisible marker (trace ROW_PICKER) whose
    customdata starts with its target row, and which hovers the cell: a click on a row selects
    it (Plotly cannot select heatmap cells; read it back with clicked_row)."""
    tokens = {"source": list(source_tokens), "target": list(target_tokens)}
    kinds = [KINDS[name] for name in KIND_NAMES]
    maps = {}
    for kind, values in zip(kinds, (encoder, decoder, cross)):
        maps[kind.name] = check_matrix(values, len(tokens[kind.query_side]),
                                       len(tokens[kind.key_side]), name=f"{kind.name} weights")
    blocked = blocked or {}
    unknown = set(blocked) - set(KIND_NAMES)
    if unknown:
        raise ValueError(f"blocked keys must be among {KIND_NAMES}, got {sorted(unknown)}")
    panel_titles = list(panel_titles or [kind.label for kind in kinds])
    widths = np.array([len(tokens[k.key_side]) for k in kinds], float) + 4  # room for short ones
    layout = subplot_layout(1, 3, subplot_titles=panel_titles, horizontal_spacing=0.07,
                            column_widths=list(widths / widths.sum()))
    data, shapes = [], []
    for col, kind in enumerate(kinds, start=1):
        rows, cols = tokens[kind.query_side], tokens[kind.key_side]
        query_title, key_title = f"{kind.query_side} query", f"{kind.key_side} key"
        mask = _check_blocked(blocked.get(kind.name), maps[kind.name].shape,
                              name=f"blocked[{kind.name!r}]")
        traces = _cells(maps[kind.name], mask, rows, cols, query_title=query_title,
                        key_title=key_title, coloraxis="coloraxis", value_name=value_name)
        if kind.query_side == "target":  # the markers hover and pick the cells instead
            for trace in traces:
                trace["hoverinfo"] = "skip"
                trace.pop("hovertemplate")
            traces.append(_row_picker(maps[kind.name], mask, rows, cols, query_title, key_title,
                                      value_name))
        axes = subplot_axes(1, col, 3)
        data += [{**trace, **axes} for trace in traces]
        layout["xaxis" + axes["xaxis"][1:]].update(token_axis(cols, title=dict(text=key_title)))
        layout["yaxis" + axes["yaxis"][1:]].update(
            token_axis(rows, window=WINDOW_ROWS, autorange="reversed"))
        if selected_target is not None and kind.query_side == "target":
            row = _check_row(selected_target, len(tokens["target"]), name="selected_target")
            shapes.append({**_row_outline(row, len(cols)), "xref": axes["xaxis"],
                           "yref": axes["yaxis"]})
    if shapes:
        layout["shapes"] = shapes
    layout.update(
        showlegend=False, hovermode="closest", hoverdistance=-1, clickmode="event+select",
        coloraxis=dict(cmin=0, cmax=float(zmax), colorscale=COLORSCALE,
                       colorbar=dict(title=dict(text=plotly_text(value_name)))),
        height=window_height(max(len(t) for t in tokens.values()), base=180, per_row=22,
                             minimum=380),
        margin=dict(l=10, r=10, t=90 if title else 50, b=10))
    layout["title"] = {} if title is None else dict(text=title)
    return unvalidated_figure(data, layout)


MAX_PICKER_MARKERS = 12_000  # a larger panel's row picker has a marker every few columns


def _row_picker(weights, blocked, rows, cols, query_title, key_title,
                value_name="weight") -> dict:
    """One invisible marker per cell of a target-query panel: its hover is the cell's, its
    customdata [row, query token, key token, weight or "blocked"]; a click selects its row.
    A panel of more than MAX_PICKER_MARKERS cells gets a marker on every row but only every
    few columns, hovering the row alone (a click still picks the row under the pointer)."""
    q, k = weights.shape
    if q * k > MAX_PICKER_MARKERS:
        return _sparse_row_picker(q, k, rows, query_title)
    grid_y, grid_x = np.divmod(np.arange(q * k), k)
    names = cell_tokens(rows, cols).reshape(-1, 2)
    values = np.where(blocked.ravel(), "blocked (masked)",
                      np.char.mod(f"{value_name}: %.3f", weights.ravel()))
    data = [[int(r), str(a), str(b), str(v)] for r, (a, b), v in zip(grid_y, names, values)]
    return dict(
        type="scatter", x=grid_x, y=grid_y, mode="markers", name=ROW_PICKER, customdata=data,
        showlegend=False, marker=dict(size=6, opacity=0),
        hovertemplate=f"{query_title} %{{y:d}} (%{{customdata[1]}})<br>{key_title} %{{x:d}} "
                      "(%{customdata[2]})<br>%{customdata[3]}<br>click to pick this row"
                      "<extra></extra>")


def _sparse_row_picker(q: int, k: int, rows, query_title: str) -> dict:
    """The row picker of a large panel: markers on every row at every stride-th column,
    customdata [row, query token, "", ""] (the dense picker's four fields)."""
    stride = max(1, -(-q * k // MAX_PICKER_MARKERS))
    columns = np.arange(0, k, stride)
    grid_y = np.repeat(np.arange(q), len(columns))
    names = np.array(tick_text(rows), dtype=object)
    return dict(
        type="scatter", x=np.tile(columns, q), y=grid_y, mode="markers", name=ROW_PICKER,
        customdata=np.stack([grid_y.astype(object), names[grid_y], np.full(len(grid_y), ""),
                             np.full(len(grid_y), "")], axis=1).astype(object),
        showlegend=False, marker=dict(size=6, opacity=0),
        hovertemplate=f"{query_title} %{{y:d}} (%{{customdata[1]}}): click to pick this row"
                      "<extra></extra>")


def clicked_row(points) -> int | None:
    """The target row of the first ROW_PICKER marker among Plotly selection points, else None."""
    for point in points or ():
        data = point.get("customdata") if isinstance(point, dict) else None
        if isinstance(data, (list, tuple)) and len(data) == 4:
            try:
                return int(data[0])
            except (TypeError, ValueError):
                continue
    return None


def top_keys(weights_row, key_tokens, k: int = 3, blocked=None) -> list[tuple[int, str, float]]:
    """The k largest weights of one attention row as (key position, token, weight), largest
    first (ties: earlier position first); blocked keys (True) are left out."""
    row = np.asarray(weights_row, dtype=float)
    if row.ndim != 1 or row.shape[0] != len(key_tokens):
        raise ValueError(f"weights_row has shape {row.shape} but there are {len(key_tokens)} "
                         "key tokens")
    allowed = ~_check_blocked(blocked, row.shape)
    order = [i for i in np.argsort(-row, kind="stable") if allowed[i]]
    return [(int(i), str(key_tokens[i]), float(row[i])) for i in order[:k]]


def heatmap_json_size(fig: go.Figure) -> int:
    """Characters in the figure's JSON: what the browser is sent."""
    return len(fig.to_json())
