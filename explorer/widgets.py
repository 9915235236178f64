"""Small Streamlit widgets several pages share."""

from __future__ import annotations

import re

import streamlit as st

from . import export


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>$])")


def plain(text: str) -> str:
    """Text shown as itself where Streamlit renders Markdown (st.metric values, labels)."""
    return _MARKDOWN.sub(r"\\\1", text)


def export_buttons(matrix, row_labels, col_labels, name: str, maps: dict, key: str,
                   corner: str = "query \\ key") -> None:
    """CSV of the matrix shown and NPZ of every map of the sentence (PNG: Plotly's camera)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "attention"
    left, right = st.columns(2)
    left.download_button("CSV of this matrix", export.matrix_csv(matrix, row_labels, col_labels, corner),
                         file_name=f"{slug}.csv", mime="text/csv", key=f"{key}_csv")
    right.download_button("NPZ of every attention map", export.attention_npz(maps),
                          file_name="attention_maps.npz", mime="application/octet-stream",
                          key=f"{key}_npz")
    st.caption("PNG: the camera button in the figure's toolbar.")


def keep_in_range(key: str, size: int) -> None:
    """Reset a keyed choice to 0 when a new sentence, kind or model no longer has that many
    (rows, layers, heads, tokens), before the widget is drawn."""
    if st.session_state.get(key, 0) >= size:
        st.session_state[key] = 0
