"""Step-by-step decoding: next-token probabilities, one step's attention, the alignment matrix,
tokens as inline HTML, and beam tables.

Inputs are what transformer.inference.decoded records per step (DecodeStep.top_k, .cross (L, H, N),
.self (L, H, t + 1)); the callers slice a layer (and a head) out. Pure: NumPy and Plotly only.
Token axes put cells and bars at positions, ticked with the tokens as they are
(figures.common.token_axis); hover names position and token. The figures are built as dicts
(figures.common.unvalidated_figure): the decoding page redraws them on every step while
playing. Head labels and head masks for ablation are transformer.core.kinds' (head_labels,
head_masks).
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from .common import (
    WEIGHT_SCALE,
    WINDOW_ROWS,
    WORD_START,
    WORD_START_MARK,
    cell_hover,
    cell_tokens,
    check_matrix,
    colorbar,
    gaps,
    position_hover,
    positions,
    probability_text,
    subplot_axes,
    subplot_layout,
    tick_text,
    title_dict,
    token_axis,
    tokens_in_hover,
    unvalidated_figure,
    window_height,
)

CHOSEN_COLOR, OTHER_COLOR = "#ea580c", "#94a3b8"
HIGHLIGHT_RGB = (37, 99, 235)  # the source highlight: rgba(..., weight / largest weight)
HIGHLIGHT_COLOR = "rgb({}, {}, {})".format(*HIGHLIGHT_RGB)
ATTENTION_SCALE = WEIGHT_SCALE
MAX_CHIPS = 60  # token chips shown before the rest fold under "show all"
_MARKDOWN = "\\`*_{}[]()#+-.!|~$<>&\"'"  # shown as entities so Markdown and LaTeX leave them be


# ------------------------------------------------------------------ figures
def top_k_fig(top_k, chosen_id: int, chosen=None, title: str | None = None) -> go.Figure:
    """Horizontal bars of the next-token probabilities, most probable on top, the chosen token
    coloured. top_k: [(token, id, probability)]; chosen: (token, id, probability) of the token
    picked, drawn as an extra bar when it is not among top_k (beam search can pick it). Bars at
    rank positions 0 .. k - 1, ticked with the tokens as they are; customdata is the ids."""
    rows = [tuple(row) for row in top_k]
    if not rows or any(len(row) != 3 for row in rows):
        raise ValueError(f"top_k must be a non-empty list of (token, id, probability), got {rows}")
    if chosen is not None and int(chosen[1]) not in [int(i) for _, i, _ in rows]:
        rows.append(tuple(chosen))
    tokens = [token for token, _, _ in rows]
    ids = [int(i) for _, i, _ in rows]
    probs = [float(p) for _, _, p in rows]
    colors = [CHOSEN_COLOR if i == int(chosen_id) else OTHER_COLOR for i in ids]
    bars = dict(
        type="bar", x=probs, y=positions(tokens), orientation="h", marker=dict(color=colors),
        customdata=ids, hovertext=tick_text(tokens), text=[probability_text(p) for p in probs],
        textposition="auto",
        hovertemplate="%{hovertext} (id %{customdata})<br>p = %{text}<extra></extra>")
    layout = dict(title=title_dict(title), height=max(240, 120 + 34 * len(rows)),
                  margin=_margin(title), xaxis=dict(title=dict(text="probability"), range=[0, 1]),
                  yaxis=token_axis(tokens, autorange="reversed"))
    return unvalidated_figure([bars], layout)


def step_attention_fig(weights, source_tokens, title: str | None = None) -> go.Figure:
    """One step's cross-attention over the source: (N,) as bars (one head), (H, N) as a
    heatmap with one row per head. Source tokens at positions, hover "source 3 (5)"."""
    sources = list(source_tokens)
    weights = np.asarray(weights, dtype=float)
    if weights.ndim == 1:
        _check_row(weights, len(sources), "source tokens")
        trace = _bars(weights, sources, "source")
        yaxis = dict(title=dict(text="weight"), rangemode="tozero")
        height = 300
    else:
        weights = check_matrix(weights, cols=len(sources), name="weights")
        heads = [f"head {h}" for h in range(weights.shape[0])]
        trace = _heatmap(weights, sources, heads, "source")
        yaxis = dict(type="category", autorange="reversed")
        height = 160 + 34 * len(heads)
    layout = dict(xaxis=token_axis(sources, title=dict(text="source token")), yaxis=yaxis,
                  title=title_dict(title), height=height, margin=_margin(title))
    return unvalidated_figure([trace], layout)


def heads_grid_fig(weights, source_tokens, title: str | None = None, columns: int = 2
                   ) -> go.Figure:
    """Small multiples: one bar chart per head of one layer's (H, N) step weights, same scale.
    """
    sources = list(source_tokens)
    weights = check_matrix(weights, cols=len(sources), name="weights")
    heads = weights.shape[0]
    columns = max(1, min(columns, heads))
    rows = math.ceil(heads / columns)
    height = 80 + 260 * rows
    data = [{**_bars(weights[h], sources, "source", name=f"head {h}"),
             **subplot_axes(h // columns + 1, h % columns + 1, columns)} for h in range(heads)]
    layout = subplot_layout(rows, columns, shared_yaxes=True,
                            vertical_spacing=min(0.5, 110 / height),  # room for the tick labels
                            subplot_titles=[f"head {h}" for h in range(heads)])
    top = max(1e-9, float(weights.max(initial=0))) * 1.1
    for axis in [key for key in layout if key.startswith(("xaxis", "yaxis"))]:
        layout[axis].update(token_axis(sources) if axis[0] == "x" else dict(range=[0, top]))
    layout.update(title=title_dict(title), height=height, showlegend=False,
                  margin=_margin(title, 80))
    return unvalidated_figure(data, layout)


def self_attention_row_fig(weights, prefix_tokens, title: str | None = None) -> go.Figure:
    """The new token's decoder self-attention over the prefix: (t + 1,) as one heatmap row,
    (H, t + 1) as one row per head."""
    prefix = list(prefix_tokens)
    weights = np.asarray(weights, dtype=float)
    if weights.ndim == 1:
        _check_row(weights, len(prefix), "prefix tokens")
        weights, rows = weights[None], ["weight"]
    else:
        weights = check_matrix(weights, cols=len(prefix), name="weights")
        rows = [f"head {h}" for h in range(weights.shape[0])]
    layout = dict(xaxis=token_axis(prefix, title=dict(text="prefix token (decoder input)")),
                  yaxis=dict(type="category", autorange="reversed"), title=title_dict(title),
                  height=170 + 34 * len(rows), margin=_margin(title))
    return unvalidated_figure([_heatmap(weights, prefix, rows, "prefix", text=len(prefix) <= 24)],
                              layout)


def alignment_fig(matrix, target_tokens, source_tokens, title: str | None = None) -> go.Figure:
    """The (T, N) alignment matrix: row t is the cross-attention of the step that produced
    target token t. Both axes at positions, ticked with the tokens as they are."""
    targets, sources = list(target_tokens), list(source_tokens)
    matrix = check_matrix(matrix, len(targets), len(sources), name="alignment")
    named = tokens_in_hover(*matrix.shape)
    where = (cell_hover if named else position_hover)("target", "source")
    heatmap = dict(
        type="heatmap", z=matrix, x=positions(sources), y=positions(targets), zmin=0, zmax=1,
        colorscale=ATTENTION_SCALE, colorbar=colorbar("weight"), **gaps(matrix.shape),
        hovertemplate=f"{where}<br>weight %{{z:.3f}}<extra></extra>")
    if named:
        heatmap["customdata"] = cell_tokens(targets, sources)
    layout = dict(xaxis=token_axis(sources, title=dict(text="source token")),
                  yaxis=token_axis(targets, window=WINDOW_ROWS, title=dict(text="generated token"),
                                   autorange="reversed"),
                  title=title_dict(title),
                  height=window_height(len(targets), base=160, per_row=26, minimum=340),
                  margin=_margin(title))
    return unvalidated_figure([heatmap], layout)

def _heatmap(z, tokens, rows, side: str, text: bool = False) -> dict:
    """Weights with one row per entry of `rows` (category labels such as "head 0") and one
    column per token, at its position, as a trace dict; hover "source 3 (5)<br>head 0"."""
    z = np.asarray(z)
    names = np.broadcast_to(np.array(tick_text(tokens), dtype=object)[None, :], z.shape)
    heatmap = dict(type="heatmap", z=z, x=positions(tokens), y=rows, zmin=0, zmax=1,
                   colorscale=ATTENTION_SCALE, customdata=names, **gaps(z.shape),
                   colorbar=colorbar("weight"),
                   hovertemplate=f"{side} %{{x:d}} (%{{customdata}})<br>%{{y}}<br>"
                                 "weight %{z:.3f}<extra></extra>")
    return {**heatmap, "texttemplate": "%{z:.2f}"} if text else heatmap


def _bars(weights, tokens, side: str, name: str | None = None) -> dict:
    """One bar per token, at its position, as a trace dict; hover "head 0<br>source 3 (5)<br>
    weight 0.250"."""
    head = f"{name}<br>" if name else ""
    bars = dict(type="bar", x=positions(tokens), y=weights, marker=dict(color=HIGHLIGHT_COLOR),
                customdata=tick_text(tokens),
                hovertemplate=f"{head}{side} %{{x:d}} (%{{customdata}})<br>weight %{{y:.3f}}"
                              "<extra></extra>")
    return bars if name is None else {**bars, "name": name}


def _margin(title, top: int = 60) -> dict:
    return {"l": 10, "r": 10, "t": top if title else top - 40, "b": 10}


def _check_row(weights, size: int, what: str) -> None:
    if weights.shape != (size,):
        raise ValueError(f"weights have shape {weights.shape} but there are {size} {what}")


# ------------------------------------------------------------------ inline HTML
def html_token(token) -> str:
    """A token safe inside HTML rendered by Markdown: tags escaped, Markdown/LaTeX characters
    as numeric entities ("<s>" -> "&#60;s&#62;", "$" -> "&#36;"); the word-start mark "▁"
    drawn as the figures draw it (WORD_START_MARK)."""
    text = str(token).replace(WORD_START, WORD_START_MARK)
    return "".join(f"&#{ord(ch)};" if ch in _MARKDOWN else ch for ch in text)


def highlighted_source_html(tokens, weights, top: int = 3) -> str:
    """The source tokens inline, each on a background whose opacity is its weight divided by
    the largest weight; the `top` most attended are bold and outlined; hover shows the weight."""
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (len(tokens),):
        raise ValueError(f"weights have shape {weights.shape} but there are {len(tokens)} tokens")
    peak = float(weights.max(initial=0.0))
    strongest = set(np.argsort(-weights, kind="stable")[:top].tolist()) if peak > 0 else set()
    spans = []
    for i, (token, weight) in enumerate(zip(tokens, weights)):
        alpha = weight / peak if peak > 0 else 0.0
        style = (f"background-color: rgba({', '.join(map(str, HIGHLIGHT_RGB))}, {alpha:.3f}); "
                 f"color: {'#ffffff' if alpha > 0.55 else 'inherit'}; padding: 2px 4px; "
                 "border-radius: 4px; white-space: pre;")
        if i in strongest:
            style += " font-weight: 700; outline: 2px solid #1e3a8a;"
        spans.append(f'<span style="{style}" title="{html_token(token)}: weight {weight:.3f}">'
                     f"{html_token(token)}</span>")
    return '<div style="line-height: 2.4;">' + " ".join(spans) + "</div>"


def tokens_html(tokens, highlight=(), limit: int | None = MAX_CHIPS) -> str:
    """Tokens as inline chips; the positions in `highlight` in the chosen-token colour. More
    than `limit` tokens: the first limit // 2 and the last limit // 2 chips (a highlighted
    token always among them: the window moves to it), the others folded in a "show all N
    tokens" element that opens in place (HTML <details>, no rerun). limit None: every chip."""
    marked = {int(i) for i in highlight}

    def chip(i: int) -> str:
        colors = (CHOSEN_COLOR, "#ffffff") if i in marked else ("#e5e7eb", "inherit")
        return (f'<span style="background-color: {colors[0]}; color: {colors[1]}; '
                f'padding: 2px 6px; border-radius: 4px; white-space: pre;">'
                f"{html_token(tokens[i])}</span>")

    tokens, div = list(tokens), '<div style="line-height: 2.4;">'
    shown = visible_chips(len(tokens), marked, limit)
    if len(shown) == len(tokens):
        return div + " ".join(chip(i) for i in shown) + "</div>"
    parts, previous = [], -1
    for i in shown:
        if i > previous + 1:
            parts.append(f'<span style="color: #6b7280;">… {i - previous - 1} more …</span>')
        parts.append(chip(i))
        previous = i
    if previous < len(tokens) - 1:
        parts.append(f'<span style="color: #6b7280;">… {len(tokens) - 1 - previous} more</span>')
    every = " ".join(chip(i) for i in range(len(tokens)))
    return (div + " ".join(parts) + "</div>" + '<details><summary style="cursor: pointer;">'
            f"Show all {len(tokens)} tokens</summary>{div}{every}</div></details>")


def visible_chips(n: int, marked=(), limit: int | None = MAX_CHIPS) -> list[int]:
    """The positions tokens_html shows as chips before "show all": every one up to `limit`;
    beyond, the first and last limit // 2, and the limit // 2 around the last marked one when
    it is elsewhere."""
    if limit is None or n <= limit:
        return list(range(n))
    half = max(limit // 2, 1)
    shown = set(range(half)) | set(range(n - half, n))
    last = max((int(i) for i in marked if 0 <= int(i) < n), default=None)
    if last is not None and last not in shown:
        shown = set(range(half // 2)) | set(range(max(last - half + 1, 0), last + 1)) | set(
            range(n - half // 2, n))
    return sorted(shown)


def differing_positions(tokens, other) -> list[int]:
    """Positions where `tokens` differs from `other` (or that `other` does not have)."""
    return [i for i, token in enumerate(tokens) if i >= len(other) or other[i] != token]


# ------------------------------------------------------------------ beam tables
def beam_table(beam_step) -> dict:
    """beam_steps[t] (a list of (tokens, log-probability), best first) as table columns."""
    return {"rank": list(range(1, len(beam_step) + 1)),
            "hypothesis": [" ".join(tokens) for tokens, _ in beam_step],
            "log-prob": [round(float(lp), 4) for _, lp in beam_step]}


def nbest_table(hypotheses) -> dict:
    """The final n-best list: hypotheses as (tokens, log-probability, score), best first."""
    return {"rank": list(range(1, len(hypotheses) + 1)),
            "hypothesis": [" ".join(tokens) for tokens, _, _ in hypotheses],
            "length": [len(tokens) for tokens, _, _ in hypotheses],
            "log-prob": [round(float(lp), 4) for _, lp, _ in hypotheses],
            "score": [round(float(score), 4) for _, _, score in hypotheses]}
