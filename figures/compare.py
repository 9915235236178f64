"""Comparing attention heads: several maps on one colour scale, the difference of two, head
importance under ablation, and the head labels the comparison pages use.

NumPy and Plotly only. Maps are (queries, keys) arrays; rows are queries, columns keys.
"""

from __future__ import annotations

import re

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import axis_labels, check_matrix

KINDS = ("encoder", "decoder", "cross")
COLOUR_SCALE = "Blues"
DIFFERENCE_SCALE = "RdBu_r"  # red: the first map is larger, blue: the second
KIND_COLOURS = {"encoder": "#2563eb", "decoder": "#16a34a", "cross": "#ea580c"}
_LABEL = re.compile(r"^\s*(encoder|decoder|cross)\s+L(\d+)\s+H(\d+)\s*$")

__all__ = ["difference_fig", "head_label", "head_labels", "importance_fig", "parse_head_label",
           "side_by_side_fig", "token_log_prob_fig"]


# ------------------------------------------------------------------ labels
def head_label(kind: str, layer: int, head: int) -> str:
    """("cross", 1, 2) -> "cross L1 H2"."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if int(layer) < 0 or int(head) < 0:
        raise ValueError(f"layer and head must be >= 0, got layer {layer} and head {head}")
    return f"{kind} L{int(layer)} H{int(head)}"


def parse_head_label(label: str) -> tuple[str, int, int]:
    """"cross L1 H2" -> ("cross", 1, 2); ValueError for anything else."""
    match = _LABEL.match(str(label))
    if not match:
        raise ValueError(f'a head label looks like "cross L1 H2" (kind among {KINDS}), '
                         f"got {label!r}")
    return match.group(1), int(match.group(2)), int(match.group(3))


def head_labels(shapes: dict) -> list[str]:
    """Every head's label, given {kind: (layers, heads)} (e.g. from the maps' shapes)."""
    return [head_label(kind, layer, head) for kind in KINDS if kind in shapes
            for layer in range(int(shapes[kind][0])) for head in range(int(shapes[kind][1]))]


# ------------------------------------------------------------------ figures
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
    map (maps of different sizes). Hover shows query, key and the weight to 3 decimals."""
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
    fig = make_subplots(rows=1, cols=len(maps), subplot_titles=titles, horizontal_spacing=0.05)
    for i, (matrix, q, k) in enumerate(zip(matrices, queries, keys)):
        rows, cols = axis_labels(q), axis_labels(k)
        fig.add_trace(go.Heatmap(
            z=matrix, x=cols, y=rows, coloraxis="coloraxis", name=titles[i], xgap=1, ygap=1,
            hovertemplate=f"{titles[i]}<br>query %{{y}}<br>key %{{x}}<br>weight %{{z:.3f}}"
                          "<extra></extra>"), row=1, col=i + 1)
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=cols,
                         tickangle=-45, showgrid=False, title="key", row=1, col=i + 1)
        fig.update_yaxes(type="category", categoryorder="array", categoryarray=rows,
                         autorange="reversed", showgrid=False, row=1, col=i + 1)
    fig.update_yaxes(title="query", row=1, col=1)
    longest = max(len(q) for q in queries)
    fig.update_layout(title=title, showlegend=False,
                      coloraxis=dict(colorscale=COLOUR_SCALE, cmin=0.0, cmax=float(zmax),
                                     colorbar=dict(title=dict(text="weight"))),
                      height=min(900, max(380, 200 + 24 * longest)),
                      margin=dict(l=10, r=10, t=90 if title else 60, b=10))
    return fig


def difference_fig(a, b, query_tokens, key_tokens, title: str | None = None) -> go.Figure:
    """a - b of two (q, k) maps of the same size, on a diverging colour scale centred at 0
    (symmetric range +-max|a - b|). Hover shows both weights and the difference to 3 decimals."""
    rows, cols = axis_labels(query_tokens), axis_labels(key_tokens)
    a = check_matrix(a, len(rows), len(cols), name="map a")
    b = check_matrix(b, len(rows), len(cols), name="map b")
    diff = a - b
    bound = float(np.nanmax(np.abs(diff))) if diff.size else 0.0
    bound = bound if bound > 0 else 1e-6  # an all-zero difference still needs a range
    fig = go.Figure(go.Heatmap(
        z=diff, x=cols, y=rows, customdata=np.stack([a, b], axis=-1), name="difference",
        colorscale=DIFFERENCE_SCALE, zmid=0.0, zmin=-bound, zmax=bound, xgap=1, ygap=1,
        colorbar=dict(title=dict(text="a − b")),
        hovertemplate="query %{y}<br>key %{x}<br>a %{customdata[0]:.3f} − b "
                      "%{customdata[1]:.3f}<br>difference %{z:.3f}<extra></extra>"))
    fig.update_xaxes(title="key", type="category", categoryorder="array", categoryarray=cols,
                     tickangle=-45, showgrid=False)
    fig.update_yaxes(title="query", type="category", categoryorder="array", categoryarray=rows,
                     autorange="reversed", showgrid=False)
    fig.update_layout(title=title, height=min(900, max(360, 160 + 26 * len(rows))),
                      margin=dict(l=10, r=10, t=70 if title else 30, b=10))
    return fig


def importance_fig(entries, title: str | None = None) -> go.Figure:
    """Head importance as horizontal bars, one per head, sorted by the change in
    log-probability when that head alone is silenced (most harmful first, at the top), coloured
    by kind. entries: [{"kind", "layer", "head", "delta_log_prob"}] (transformer.ablation)."""
    entries = sorted(entries, key=lambda e: (float(e["delta_log_prob"]),
                                             KINDS.index(e["kind"]), e["layer"], e["head"]))
    fig = go.Figure()
    labels = [head_label(e["kind"], e["layer"], e["head"]) for e in entries]
    for kind in KINDS:
        chosen = [(label, float(e["delta_log_prob"])) for label, e in zip(labels, entries)
                  if e["kind"] == kind]
        if not chosen:
            continue
        fig.add_trace(go.Bar(
            y=[c[0] for c in chosen], x=[c[1] for c in chosen], orientation="h", name=kind,
            marker_color=KIND_COLOURS[kind],
            hovertemplate="%{y}<br>change in log-probability %{x:.4f}<extra></extra>"))
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=labels,
                     autorange="reversed", title="head silenced alone")
    fig.update_xaxes(title="change in log-probability of the original output", zeroline=True)
    fig.update_layout(title=title, barmode="overlay", legend=dict(title=dict(text="kind")),
                      height=max(300, 120 + 18 * len(labels)),
                      margin=dict(l=10, r=10, t=60 if title else 30, b=10))
    return fig


def token_log_prob_fig(tokens, original, ablated, title: str | None = None) -> go.Figure:
    """The log-probability of each scored output token without and with the ablation, as grouped
    bars (one pair per token, in output order). Hover shows both to 4 decimals."""
    labels = axis_labels(tokens)
    values = [np.asarray(original, float).reshape(-1), np.asarray(ablated, float).reshape(-1)]
    if any(v.size != len(labels) for v in values):
        raise ValueError(f"there are {len(labels)} tokens but {values[0].size} original and "
                         f"{values[1].size} ablated log-probabilities")
    fig = go.Figure()
    for name, row, colour in (("original model", values[0], "#64748b"),
                              ("heads silenced", values[1], "#dc2626")):
        fig.add_trace(go.Bar(x=labels, y=row, name=name, marker_color=colour,
                             hovertemplate=f"{name}<br>token %{{x}}<br>log-probability "
                                           "%{y:.4f}<extra></extra>"))
    fig.update_xaxes(title="output token", type="category", categoryorder="array",
                     categoryarray=labels, tickangle=-45)
    fig.update_yaxes(title="log-probability")
    fig.update_layout(title=title, barmode="group", height=360,
                      margin=dict(l=10, r=10, t=60 if title else 30, b=10))
    return fig
