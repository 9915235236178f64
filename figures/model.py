"""The architecture of one model, drawn from its config (a dict of TransformerConfig fields)."""

from __future__ import annotations

import plotly.graph_objects as go

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
    d_k = d // h
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

    for x, row, text, colour in boxes:
        fig.add_shape(type="rect", x0=x - 0.42, x1=x + 0.42, y0=row - 0.4, y1=row + 0.4,
                      fillcolor=colour, line=dict(color="#555", width=1), layer="below")
    fig.add_trace(go.Scatter(
        x=[b[0] for b in boxes], y=[b[1] for b in boxes], mode="text",
        text=[b[2] for b in boxes], textfont=dict(size=11, color="#111"), hoverinfo="text",
        showlegend=False))
    for row in cross_rows:  # the encoder output feeds every cross-attention
        fig.add_annotation(x=0.58, y=row, ax=0.42, ay=encoder_top, xref="x", yref="y",
                           axref="x", ayref="y", showarrow=True, arrowhead=2, arrowcolor="#7030a0")
    height = max(encoder_top, y) + 1
    fig.update_xaxes(visible=False, range=[-0.5, 1.5])
    fig.update_yaxes(visible=False, range=[-0.6, height])
    fig.update_layout(height=max(360, 34 * height), margin=dict(l=10, r=10, t=40, b=10),
                      title=f"Encoder ({config['num_encoder_layers']} layers) and decoder "
                            f"({config['num_decoder_layers']} layers), "
                            f"{'pre' if pre else 'post'}-LayerNorm", plot_bgcolor="white")
    return fig


def history_fig(history: dict[str, list[float]]) -> go.Figure:
    """Training curves recorded in a checkpoint's metadata (one line per metric, by epoch)."""
    fig = go.Figure()
    for name, values in history.items():
        fig.add_trace(go.Scatter(x=list(range(1, len(values) + 1)), y=values, name=name,
                                 mode="lines+markers",
                                 hovertemplate="epoch %{x}<br>%{y:.4f}<extra>" + name + "</extra>"))
    fig.update_layout(xaxis_title="epoch", height=320, margin=dict(l=10, r=10, t=30, b=10))
    return fig
