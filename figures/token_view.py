"""The token view (as in BertViz's head view, drawn with Plotly): queries on the left, keys on
the right, one line from each query to each key with opacity and width growing with the weight.

Lines are grouped to keep the figure small: weights are bucketed into LEVELS opacity levels and
each (head, level) pair is one Scatter trace whose segments are separated by None. Line traces carry
meta = {"head": h, "level": b}; the token columns are the traces named "queries" and "keys".
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import hex_to_rgb, qualitative

from .common import WINDOW_ROWS, plotly_text, tick_text, unvalidated_figure, window_height

LEVELS = 10  # opacity levels: a weight w is drawn at level ceil(w * LEVELS)
MAX_LINES = 2000  # lines drawn unless every line is asked for: the strongest ones
DEFAULT_MIN_WEIGHT = 0.05  # the page's first threshold: weights under 5% are hardly visible
QUERY_X, KEY_X = 0.0, 1.0
HEAD_COLOURS = qualitative.D3
TOKEN_COLOUR, DIM_COLOUR, MARKER_COLOUR = "#111827", "#9ca3af", "#d1d5db"
TOP_KEYS = 3  # keys listed per head in a query token's hover


def head_colour(head: int) -> str:
    """The colour of head `head` (the same head keeps its colour whatever else is selected)."""
    return HEAD_COLOURS[head % len(HEAD_COLOURS)]


def _rgba(colour: str, alpha: float) -> str:
    r, g, b = hex_to_rgb(colour)
    return f"rgba({r},{g},{b},{alpha:.3f})"


def _check(weights, query_tokens, key_tokens, head_labels, colours, query_index) -> np.ndarray:
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 3:
        raise ValueError(f"weights must be 3-D (heads, queries, keys), got shape {weights.shape}")
    heads, queries, keys = weights.shape
    if queries != len(query_tokens):
        raise ValueError(f"weights have {queries} queries but there are {len(query_tokens)} "
                         "query tokens")
    if keys != len(key_tokens):
        raise ValueError(f"weights have {keys} keys but there are {len(key_tokens)} key tokens")
    if heads != len(head_labels):
        raise ValueError(f"weights have {heads} heads but there are {len(head_labels)} head labels")
    if colours is not None and len(colours) != heads:
        raise ValueError(f"weights have {heads} heads but there are {len(colours)} colours")
    if query_index is not None and not 0 <= query_index < queries:
        raise ValueError(f"query_index {query_index} is out of range for {queries} queries")
    return weights


def strongest(drawn, weights, max_lines: int | None) -> np.ndarray:
    """`drawn` (a bool array over weights) keeping only its max_lines largest weights (ties:
    the earlier head, query, key), or as it is within the cap or when max_lines is None."""
    if max_lines is None or int(drawn.sum()) <= max_lines:
        return drawn
    where = np.flatnonzero(drawn)
    order = np.argsort(-weights.ravel()[where], kind="stable")[:max(max_lines, 0)]
    kept = np.zeros(drawn.size, bool)
    kept[where[order]] = True
    return kept.reshape(drawn.shape)


def token_view_fig(weights, query_tokens, key_tokens, *, head_labels, query_index=None,
                   min_weight: float = 0.0, colours=None, title: str | None = None,
                   max_lines: int | None = MAX_LINES, scale: float = 1.0,
                   value_name: str = "weight") -> go.Figure:
    """Lines from query tokens (left) to key tokens (right) for several heads of one layer.

    weights: (heads, queries, keys), each head drawn in its own colour (colours, default
    head_colour(0..)); a line's opacity and width grow with its weight. query_index: draw only that
    query's lines. Lines with weight below min_weight, and weight-0 lines (blocked keys), are not
    drawn. Of the lines left, at most max_lines are drawn, the strongest (None: all); the
    layout's meta says {"lines": drawn, "lines_possible": before the cap}. Hovering a query token
    lists its strongest keys for each head. A column of more than WINDOW_ROWS tokens opens on
    its first WINDOW_ROWS (drag up and down for the others).

    scale: the value drawn darkest and widest (1 for weights; value norms, which are not
    0..1, pass their largest): a line's level is ceil(w / scale * LEVELS), and min_weight is
    in the values' own units. value_name names the values in the keys' hover.
    """
    weights = _check(weights, query_tokens, key_tokens, head_labels, colours, query_index)
    heads, queries, keys = weights.shape
    colours = list(colours) if colours is not None else [head_colour(h) for h in range(heads)]
    q_text = tick_text(query_tokens)
    k_text = tick_text(key_tokens)

    drawn_all = (weights >= min_weight) & (weights > 0)  # (heads, queries, keys)
    if query_index is not None:
        drawn_all &= (np.arange(queries) == query_index)[None, :, None]
    possible = int(drawn_all.sum())
    drawn_all = strongest(drawn_all, weights, max_lines)
    data = []
    for h in range(heads):
        group = f"head{h}"
        data.append(dict(type="scatter", x=[None], y=[None], mode="lines",
                         name=str(head_labels[h]), legendgroup=group,
                         line=dict(color=colours[h], width=3), hoverinfo="skip"))
        drawn = drawn_all[h]
        level = np.clip(np.ceil(weights[h] / scale * LEVELS), 1, LEVELS).astype(int)
        for b in range(1, LEVELS + 1):
            query, key = np.nonzero(drawn & (level == b))  # row-major: query, then key order
            if not len(query):
                continue
            middle = (b - 0.5) / LEVELS  # the bucket's middle weight
            data.append(dict(
                type="scatter", x=[QUERY_X, KEY_X, None] * len(query),
                y=np.stack([query, key, np.full(len(query), None)], axis=1).ravel().tolist(),
                mode="lines", name=str(head_labels[h]), legendgroup=group, showlegend=False,
                line=dict(color=_rgba(colours[h], middle), width=0.5 + 3.5 * middle),
                hoverinfo="skip", meta={"head": h, "level": b}))

    hover = []
    for i in range(queries):
        lines = [f"query {i}: {q_text[i]}"]
        for h in range(heads):
            top = np.argsort(-weights[h, i], kind="stable")[:TOP_KEYS]
            lines.append(f"{plotly_text(head_labels[h])}: " + ", ".join(
                f"{k_text[j]} {weights[h, i, j]:.4f}" for j in top))
        hover.append("<br>".join(lines))
    chosen = [query_index is None or i == query_index for i in range(queries)]
    data.append(dict(
        type="scatter", x=[QUERY_X] * queries, y=list(range(queries)), mode="markers+text",
        name="queries",
        text=[f"<b>{t}</b>" if query_index == i else t for i, t in enumerate(q_text)],
        textposition="middle left", showlegend=False, customdata=list(range(queries)),
        textfont=dict(size=14, color=[TOKEN_COLOUR if c else DIM_COLOUR for c in chosen]),
        marker=dict(size=9, color=MARKER_COLOUR), hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>"))
    key_hover = [f"key {j}: {k_text[j]}" + "".join(
        f"<br>{plotly_text(head_labels[h])}: {plotly_text(value_name)} "
        f"{weights[h, query_index, j]:.4f}"
        for h in range(heads)) if query_index is not None else f"key {j}: {k_text[j]}"
        for j in range(keys)]
    data.append(dict(
        type="scatter", x=[KEY_X] * keys, y=list(range(keys)), mode="markers+text", name="keys",
        text=k_text, textposition="middle right", showlegend=False,
        customdata=list(range(keys)), textfont=dict(size=14, color=TOKEN_COLOUR),
        marker=dict(size=9, color=MARKER_COLOUR), hovertext=key_hover,
        hovertemplate="%{hovertext}<extra></extra>"))

    length = max(queries, keys, 1)
    annotations = [dict(x=QUERY_X, y=-0.5, text="queries", showarrow=False, yanchor="bottom",
                        xanchor="right", font=dict(color=DIM_COLOUR)),
                   dict(x=KEY_X, y=-0.5, text="keys", showarrow=False, yanchor="bottom",
                        xanchor="left", font=dict(color=DIM_COLOUR))]
    if queries == 0 or keys == 0:
        annotations.append(dict(x=0.5, y=0, text="No tokens to show", showarrow=False))
    windowed = length > WINDOW_ROWS  # opens on the first rows; drag to move
    layout = dict(
        xaxis=dict(visible=False, range=[-0.9, 1.9], fixedrange=True),
        yaxis=dict(visible=False, range=[min(length, WINDOW_ROWS) - 0.5, -0.5],
                   fixedrange=not windowed),
        title={} if title is None else dict(text=title),
        height=window_height(length, base=200, per_row=30),
        meta={"lines": int(drawn_all.sum()), "lines_possible": possible,
              "scale": float(scale)},
        hovermode="closest", plot_bgcolor="white",
        margin=dict(l=10, r=10, t=70 if title else 30, b=40),
        legend=dict(orientation="h", yanchor="top", y=0, x=0, title=dict(text="heads: ")),
        annotations=annotations)
    if windowed:
        layout["dragmode"] = "pan"
    return unvalidated_figure(data, layout)


def drawn_lines(fig: go.Figure) -> list[tuple[int, int, int]]:
    """(head, query, key) of every line in a token_view_fig, for tests and summaries."""
    out = []
    for trace in fig.data:
        if not isinstance(trace.meta, dict) or "head" not in trace.meta:
            continue
        ys = list(trace.y)
        out += [(trace.meta["head"], int(ys[n]), int(ys[n + 1])) for n in range(0, len(ys), 3)]
    return out


def lines_summary(n_lines: int, heads: int, min_weight: float, possible: int | None = None,
                  scale: float = 1.0, value_name: str = "weight") -> str:
    """A caption for the view: how many lines are drawn (of how many, when capped); scale and
    value_name as token_view_fig's (value norms: their largest value, "‖α f(x)‖")."""
    capped = (f" (the strongest {n_lines} of {possible}: tick \"Draw every line\" for all)"
              if possible is not None and possible > n_lines else "")
    if scale == 1.0 and value_name == "weight":
        return (f"{n_lines} lines over {heads} head{'s' * (heads != 1)}{capped}; weights below "
                f"{min_weight:.2f} are hidden. Opacity and width: {LEVELS} levels, level = "
                f"⌈w·{LEVELS}⌉ (so a line's look is its weight to ±{0.5 / LEVELS:.2f}).")
    return (f"{n_lines} lines over {heads} head{'s' * (heads != 1)}{capped}; values "
            f"{value_name} below {min_weight:.3g} are hidden. Opacity and width: {LEVELS} "
            f"levels, level = ⌈v / {scale:.3g} · {LEVELS}⌉ ({scale:.3g}: the largest value "
            "shown).")
