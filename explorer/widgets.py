"""Small Streamlit widgets several pages share."""

from __future__ import annotations

import re

import streamlit as st

from transformer.core.kinds import KIND_NAMES, KINDS, Kind, kind_by_label

from . import export

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>$])")


def plain(text: str) -> str:
    """Text shown as itself where Streamlit renders Markdown (st.metric values, labels)."""
    return _MARKDOWN.sub(r"\\\1", text)


def quoted(text: str) -> str:
    """`text` as inline code (its repr), safe from Markdown and LaTeX."""
    return "`" + repr(text).replace("`", "ˋ") + "`"


def export_buttons(matrix, row_labels, col_labels, name: str, maps: dict, key: str,
                   corner: str = "query \\ key", npz_name: str = "attention_maps.npz",
                   figure: bool = True) -> None:
    """CSV of the matrix shown and NPZ of every map of the sentence (PNG: Plotly's camera);
    npz_name: the NPZ's file name (value norms: "value_norm_maps.npz"). The NPZ is made when
    the button is clicked (Streamlit's deferred download), not on every run of the page: a
    12+12-layer model's maps of a 400-token source are 210 MB to compress."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "attention"
    left, right = st.columns(2)
    left.download_button("CSV of this matrix",
                         export.matrix_csv(matrix, row_labels, col_labels, corner),
                         file_name=f"{slug}.csv", mime="text/csv", key=f"{key}_csv")
    right.download_button("NPZ of every attention map", lambda: export.attention_npz(maps),
                          file_name=npz_name, mime="application/octet-stream",
                          key=f"{key}_npz")
    if figure:  # under a table (figure=False) there is no toolbar to point to
        st.caption("PNG: the camera button in the figure's toolbar.")


def kind_picker(key: str, container=st, label: str = "Attention", kinds=KIND_NAMES,
                **kwargs) -> Kind:
    """The attention-kind picker of every page: a horizontal radio of the kinds' labels
    ("Cross-attention"), in `kinds` order; returns the Kind picked."""
    labels = [KINDS[name].label for name in kinds]
    return kind_by_label(container.radio(label, labels, horizontal=True, key=key, **kwargs))


def simplify_toggles(container, key_prefix: str) -> tuple[bool, bool]:
    """The two token toggles of the aggregation and token views: (hide special, merge words),
    meaning transformer.analysis.flow.simplify_tokens' hide_special and merge_words."""
    hide_special = container.toggle(
        "Hide special tokens", key=f"{key_prefix}_hide_special",
        help="Drop <s>, </s>, <pad> and <unk> rows and columns; each remaining row is rescaled "
             "to sum to 1.")
    merge_words = container.toggle(
        "Merge subword pieces into words", key=f"{key_prefix}_merge_words",
        help="A word as key gets the SUM of its pieces' weights; a word as query the AVERAGE of "
             "its pieces' rows, so rows still sum to 1.")
    return hide_special, merge_words


def scroll_into_view(container_key: str) -> None:
    """Scroll the browser to the st.container(key=container_key) drawn earlier in this run
    (Streamlit gives it the class "st-key-<key>"). A counter makes every call a new element,
    so the script runs again each time."""
    count = st.session_state.get("_scroll_count", 0) + 1
    st.session_state["_scroll_count"] = count
    st.html(f"<script>/* scroll {count} */ window.parent.document.querySelector("
            f"'.st-key-{container_key}')?.scrollIntoView({{behavior: 'smooth', block: 'start'}});"
            "</script>", unsafe_allow_javascript=True)

