"""The architecture of one model, drawn from its config (a dict of TransformerConfig fields)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import LEGEND_BELOW, readable

_COLOURS = {"attention": "#f4b183", "cross": "#c5a3d9", "ffn": "#9dc3e6", "norm": "#e2efda",
            "embed": "#ffe699", "output": "#d9d9d9"}


def architecture_fig(config: dict) -> go.Figure:
    """Encoder stack (left) and decoder stack (right), one box per sublayer, sizes in the labels.

    Post-LN models draw "Add & Norm" after each sublayer, pre-LN models a norm before it and a
    final norm on each stack; cross-attention reads the encoder output."""
    required = ("d_model", "num_heads", "dff", "num_encoder_layers", "num_decoder_layers",
                "src_vocab_size", "tgt_vocab_size", "max_len", "positional", "norm_first")
    missing = [k for k in required if k not in config]
    if missing:
        raise ValueError(f"config is missing {missing}")
    d, h, dff = config["d_model"], config["num_heads"], config["dff"]
    d_k = config.get("head_dim") or d // h  # imported models may use another per-head size
    pre = bool(config["norm_first"])
    fig = go.Figure()
    boxes: list[tuple[float, float, str, str]] = []  # (x, y, label, colour)

    def sublayer(x, y, label, colour):
        rows = ([("LayerNorm", "norm"), (label, colour)] if pre
                else [(label, colour), ("Add & Norm", "norm")])
        for i, (text, c) in enumerate(rows):
            boxes.append((x, y + i, text, _COLOURS[c]))
        return y + 2

    attention = f"{h} heads × d_k {d_k}"
    ffn = f"Feed-forward {d}→{dff}→{d}"
    pos = config["positional"]
    y = 0
    boxes.append((0, y, f"Source embedding {config['src_vocab_size']}×{d} + {pos} positions",
                  _COLOURS["embed"]))
    y += 1
    for i in range(config["num_encoder_layers"]):
        y = sublayer(0, y, f"Encoder {i}: self-attention, {attention}", "attention")
        y = sublayer(0, y, f"Encoder {i}: {ffn}", "ffn")
    if pre:
        boxes.append((0, y, "Final LayerNorm (encoder output)", _COLOURS["norm"]))
        y += 1
    encoder_top = y - 1
    y = 0
    shared = " (shared with source)" if config.get("share_embeddings") else ""
    boxes.append((1, y, f"Target embedding {config['tgt_vocab_size']}×{d}{shared} + {pos} "
                  "positions", _COLOURS["embed"]))
    y += 1
    cross_rows = []
    for i in range(config["num_decoder_layers"]):
        y = sublayer(1, y, f"Decoder {i}: masked self-attention, {attention}", "attention")
        cross_rows.append(y + (1 if pre else 0))
        y = sublayer(1, y, f"Decoder {i}: cross-attention, {attention}", "cross")
        y = sublayer(1, y, f"Decoder {i}: {ffn}", "ffn")
    if pre:
        boxes.append((1, y, "Final LayerNorm", _COLOURS["norm"]))
        y += 1
    tied = " (tied to target embedding)" if config.get("tie_output") else ""
    boxes.append((1, y, f"Linear {d}→{config['tgt_vocab_size']}{tied}, softmax",
                  _COLOURS["output"]))

    # every shape and arrow set at once: one add_shape per box re-validated the shapes so far
    # each time (nllb-200-distilled-600M's 125 boxes: 1.5 s for the figure, 0.02 s so)
    fig.update_layout(shapes=[
        dict(type="rect", x0=x - 0.42, x1=x + 0.42, y0=row - 0.4, y1=row + 0.4,
             fillcolor=colour, line=dict(color="#555", width=1), layer="below")
        for x, row, _text, colour in boxes])
    fig.add_trace(go.Scatter(
        x=[b[0] for b in boxes], y=[b[1] for b in boxes], mode="text",
        text=[b[2] for b in boxes], textfont=dict(size=11, color="#111"), hoverinfo="text",
        showlegend=False))
    fig.update_layout(annotations=[  # the encoder output feeds every cross-attention
        dict(x=0.58, y=row, ax=0.42, ay=encoder_top, xref="x", yref="y", axref="x", ayref="y",
             showarrow=True, arrowhead=2, arrowcolor="#7030a0") for row in cross_rows])
    height = max(encoder_top, y) + 1
    fig.update_xaxes(visible=False, range=[-0.5, 1.5])
    fig.update_yaxes(visible=False, range=[-0.6, height])
    fig.update_layout(height=max(360, 34 * height), margin=dict(l=10, r=10, t=40, b=10),
                      title=f"Encoder ({config['num_encoder_layers']} layers) and decoder "
                            f"({config['num_decoder_layers']} layers), "
                            f"{'pre' if pre else 'post'}-LayerNorm", plot_bgcolor="white")
    return readable(fig)


def smoothed_loss_floor(label_smoothing: float, vocab_size: int) -> float:
    """The lowest cross-entropy reachable against label-smoothed targets (transformer.training.fit:
    one-hot × (1 − ε) + ε / V): the entropy of that target distribution, in nats."""
    eps, v = float(label_smoothing), int(vocab_size)
    probs = np.array([1.0 - eps + eps / v] + [eps / v] * (v - 1))
    probs = probs[probs > 0]
    return float(-(probs * np.log(probs)).sum())


def nice_ticks(top: float) -> tuple[list[float], int]:
    """Round tick values from 0 to at least `top` (steps of 1, 1.5, 2, 2.5, 3, 4 or 5 times a
    power of ten), 4 or 5 intervals, whichever reaches least above `top`; and the number of
    intervals (so another axis can be ticked on the same grid)."""
    top = float(top) if np.isfinite(top) and top > 0 else 1.0
    best = None
    for intervals in (5, 4):
        raw = top / intervals
        power = 10.0 ** np.floor(np.log10(raw))
        step = next(m * power for m in (1, 1.5, 2, 2.5, 3, 4, 5, 10) if m * power >= raw * (1 - 1e-9))
        if best is None or step * intervals < best[0] * best[1] - 1e-12:
            best = (step, intervals)
    step, intervals = best
    return [float(round(i * step, 10)) for i in range(intervals + 1)], intervals


def history_fig(history: dict[str, list[float]], label_smoothing: float | None = None,
                vocab_size: int | None = None) -> go.Figure:
    """Training curves recorded in a checkpoint's metadata, by epoch: the losses on the left
    axis, the accuracies (any other metric) on the right one, 0 to 1, both ticked at round
    values on one grid (nice_ticks). The subtitle says what the loss is: with label_smoothing
    (and vocab_size) it explains why it never reaches 0 and names the dashed line drawn at the
    lowest loss reachable (smoothed_loss_floor); no label sits over the curves."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for name, values in history.items():
        is_loss = "loss" in name
        fig.add_trace(go.Scatter(
            x=list(range(1, len(values) + 1)), y=values, name=name, mode="lines+markers",
            line=dict(dash="solid" if is_loss else "dot"),
            hovertemplate="epoch %{x}<br>%{y:.4f}<extra>" + name + "</extra>"),
            secondary_y=not is_loss)
    losses = [v for name, values in history.items() if "loss" in name for v in values]
    top = max([v for v in losses if np.isfinite(v)], default=1.0)
    if label_smoothing:
        note = (f"Loss: cross-entropy against label-smoothed targets (ε = {label_smoothing:g}: "
                "the right token gets 1 − ε + ε/V, every other ε/V), so it cannot reach 0")
        if vocab_size:
            floor = smoothed_loss_floor(label_smoothing, vocab_size)
            top = max(top, floor)
            fig.add_hline(y=floor, line=dict(color="#6b7280", dash="dash", width=1),
                          secondary_y=False)
            note += f";<br>the dashed line is the lowest reachable loss, {floor:.3f}"
        note += "."
    else:
        note = "Loss: cross-entropy of the next token (nats); accuracy: share of tokens right."
    loss_ticks, intervals = nice_ticks(top)
    pad = 1.02  # room above the top tick for the markers of a perfect accuracy, on both axes
    fig.update_xaxes(title="epoch", dtick=1)
    fig.update_yaxes(title="loss (nats)", range=[0, loss_ticks[-1] * pad], tickmode="array",
                     tickvals=loss_ticks, secondary_y=False)
    fig.update_yaxes(title="accuracy", range=[0, pad], tickmode="array",
                     tickvals=[i / intervals for i in range(intervals + 1)],
                     secondary_y=True, showgrid=False)
    fig.update_layout(title=dict(text="Training curves", subtitle=dict(text=note)),
                      height=400 + 24 * note.count("<br>"),
                      margin=dict(l=10, r=10, t=80 + 24 * note.count("<br>"), b=40),
                      legend=LEGEND_BELOW)  # below the axis title, not over it (issue 38)
    return readable(fig)
