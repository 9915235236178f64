"""The logit lens at one decoding step: what every decoder layer's output predicts.

Input is what transformer.inference.logit_lens.layer_predictions gives for one step: per layer
the top-k (token, probability), and the probability and rank of the token the step chose.
Pure: NumPy and Plotly only.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import WEIGHT_SCALE, colorbar, probability_text, tick_text, title_dict, unvalidated_figure


def layer_lens_fig(top_tokens, top_probs, chosen_probs, chosen_ranks, chosen_token: str,
                   title: str | None = None) -> go.Figure:
    """One row per decoder layer (the last on top), one column per rank of its top-k, each cell
    the token that layer's output ranks there, coloured by its probability; a last column
    "chosen" holds the probability the layer gives the token the step chose, its rank in the
    text. top_tokens (L, k) str, top_probs (L, k), chosen_probs (L,), chosen_ranks (L,) (0 =
    that layer's first choice)."""
    probs = np.asarray(top_probs, dtype=float)
    layers, k = probs.shape
    tokens = [list(row) for row in top_tokens]
    chosen_probs = np.asarray(chosen_probs, dtype=float).reshape(layers)
    chosen_ranks = np.asarray(chosen_ranks).reshape(layers)
    if len(tokens) != layers or any(len(row) != k for row in tokens):
        raise ValueError(f"top_tokens must be ({layers}, {k}) like top_probs")
    z = np.concatenate([probs, chosen_probs[:, None]], axis=1)  # (L, k + 1)
    text = [[f"{tick_text([tok])[0]}<br>{probability_text(p)}" for tok, p in zip(row, prow)]
            + [f"{tick_text([chosen_token])[0]}<br>{probability_text(c)}, rank {int(r) + 1}"]
            for row, prow, c, r in zip(tokens, probs, chosen_probs, chosen_ranks)]
    columns = [f"top {i + 1}" for i in range(k)] + ["chosen"]
    rows = [f"layer {layer + 1}" for layer in range(layers)]
    trace = dict(type="heatmap", z=z.tolist(), x=columns, y=rows, text=text,
                 texttemplate="%{text}", zmin=0.0, zmax=1.0, colorscale=WEIGHT_SCALE,
                 colorbar=colorbar("probability"), xgap=2, ygap=2,
                 hovertemplate="%{y}, %{x}: %{text}<extra></extra>")
    layout = dict(title=title_dict(title), height=140 + 56 * layers,
                  margin=dict(l=70, r=20, t=60 if title else 20, b=40),
                  xaxis=dict(type="category", side="top"), yaxis=dict(type="category"))
    return unvalidated_figure([trace], layout)
