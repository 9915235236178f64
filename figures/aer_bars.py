"""How well each cross-attention head aligns words, drawn: heads ranked by AER as bars.

The numbers come from transformer.analysis.alignment (rank_heads); this module only draws them
(NumPy + Plotly).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import plotly_text, readable

AER_COLOUR = "#2563eb"  # the weights' blue: lower is better, drawn as a bar to 0

__all__ = ["aer_ranking_fig"]


def aer_ranking_fig(labels, aer, precision, recall, *, title: str = "") -> go.Figure:
    """One horizontal bar per head (labels like "cross L0 H1"), in the order given (the
    ranking: best first, at the top), its length the head's AER in [0, 1], written at its end
    to 3 decimals; hover adds precision and recall."""
    labels = [plotly_text(str(label)) for label in labels]
    values = [np.asarray(v, dtype=float).reshape(-1) for v in (aer, precision, recall)]
    if any(len(v) != len(labels) for v in values):
        raise ValueError(f"aer, precision and recall must have one value per label "
                         f"({len(labels)}), got {[len(v) for v in values]}")
    aer, precision, recall = values
    fig = go.Figure(go.Bar(
        y=labels, x=aer, orientation="h", marker_color=AER_COLOUR,
        text=[f"{a:.3f}" for a in aer], textposition="outside", cliponaxis=False,
        customdata=np.stack([precision, recall], axis=-1) if len(labels) else None,
        hovertemplate="%{y}<br>AER %{x:.4f}<br>precision %{customdata[0]:.4f}<br>"
                      "recall %{customdata[1]:.4f}<extra></extra>"))
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=labels,
                     autorange="reversed", title="cross-attention head (best first)")
    fig.update_xaxes(title="alignment error rate (0 = perfect)", range=[0, 1.1])
    fig.update_layout(title=plotly_text(title) if title else None,
                      height=max(220, 90 + 26 * len(labels)),
                      margin=dict(l=10, r=10, t=50 if title else 20, b=10))
    return readable(fig)
