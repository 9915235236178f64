"""Arithmetic of one head: the model's own q, K and V for one query token, step by step."""

import numpy as np
import streamlit as st

from explorer import links, models, results, screen, tokens
from explorer.choices import reset_if_out_of_range
from explorer.widgets import export_buttons, kind_picker
from figures.arithmetic import (
    arithmetic_words,
    contributions_fig,
    dimension_labels,
    head_arithmetic,
    matrix_fig,
    max_abs_difference,
    score_steps_fig,
    steps_table,
    value_norm_steps_fig,
    vector_fig,
)
from figures.common import plotly_text
from transformer.analysis.value_norm import transformed_values
from transformer.core.masking import BLOCKED_SCORE

TOLERANCE = 1e-5  # the softmax redone here must match the model's attention row this closely


st.title("Arithmetic of one head")
st.markdown(
    "One head, one query token, with the model's real numbers: the query row **q** meets every "
    "key row of **K** (q·Kᵀ / √d_k), blocked keys are masked, the softmax turns the scores into "
    "weights, and the weights mix the value rows of **V** into the head's output for this token.")


@st.fragment
def views(maps: dict) -> None:
    """The kind, layer, head and query pickers and every step they show: rerun alone (a
    fragment). `maps`: the sentence's attention maps (every page's); the q, K, V and scores
    are the chosen layer's alone (results.current_details: a 12+12-layer model's of every
    layer are 340 MB at a 400-token source)."""
    kind = kind_picker("arith_kind")
    name = kind.name
    n_layers, n_heads, n_queries, _ = maps[name].shape
    for key, size in (("arith_layer", n_layers), ("arith_head", n_heads), ("arith_query", n_queries)):
        reset_if_out_of_range(key, size)
    ckpt = models.active_checkpoint()
    shown = tokens.shown_maps(maps, ckpt)  # the labels drawn
    query_tokens, key_tokens = shown[kind.query_tokens], shown[kind.key_tokens]
    c1, c2, c3 = st.columns(3)
    layer = c1.selectbox("Layer", range(n_layers), key="arith_layer")
    head = c2.selectbox("Head", range(n_heads), key="arith_head", format_func=lambda h: f"head {h}")
    query = c3.selectbox("Query token", range(n_queries), key="arith_query",
                         format_func=lambda q: f"{q}: {query_tokens[q]}")

    detail = results.current_details(name, layer)  # (1, H, ...) each
    K, V = detail[f"{name}_k"][0, head], detail[f"{name}_v"][0, head]  # (k_len, d_k) each
    bias = detail.get(f"{name}_position_bias")  # T5's, (H, q_len, k_len): self-attention only
    scale = ckpt.config.attention_scale
    r = head_arithmetic(detail[f"{name}_q"][0, head, query], K, V, maps[kind.mask][query],
                        blocked_score=BLOCKED_SCORE, scale=scale,
                        position_bias=None if bias is None else bias[head, query])
    dims, d_k = dimension_labels(r["d_k"]), r["d_k"]
    where = (f"{kind.label}, layer {layer}, head {head}, query {query} "
             f"({plotly_text(query_tokens[query])})")

    st.subheader("1. The query row q and the key matrix K")
    screen.chart(st, vector_fig(r["q"], dims, f"q: {where}<br>(d_k,) = ({d_k},)", name="q"),
                    key="arith_q_fig")
    screen.chart(st, matrix_fig(K, key_tokens, dims, f"K: one row per key<br>(k_len, d_k) = {K.shape}",
                               name="k"), key="arith_k_fig")

    st.subheader("2. Scores, mask and softmax")
    st.markdown(arithmetic_words(d_k, scale, bias is not None))
    screen.chart(st, score_steps_fig(r, key_tokens, where), key="arith_steps_fig")
    score_diff = max_abs_difference(r["scaled"], detail[f"{name}_scores"][0, head, query])
    weight_diff = max_abs_difference(r["weights"], maps[name][layer, head, query])
    m1, m2 = st.columns(2)
    m1.metric("max |scores here − model's scores|", f"{score_diff:.2e}")
    m2.metric("max |softmax here − model's attention row|", f"{weight_diff:.2e}")
    if weight_diff < TOLERANCE:
        st.success(f"The softmax computed here from the model's q and K equals the model's attention "
                   f"row (largest difference {weight_diff:.1e} < {TOLERANCE:g}).")
    else:
        st.error(f"The softmax computed here differs from the model's attention row by up to "
                 f"{weight_diff:.3g}.")

    st.subheader("3. The values V and their weighted sum")
    screen.chart(st, matrix_fig(V, key_tokens, dims, f"V: one row per key<br>(k_len, d_k) = {V.shape}",
                               name="v"), key="arith_v_fig")
    screen.chart(st, contributions_fig(r["weighted_values"], r["context"], key_tokens),
                    key="arith_context_fig")
    st.caption("The context vector is this head's output for the query; the heads' outputs are "
               "concatenated and projected by the output layer (W_O).")

    st.subheader("4. What each key adds: f(x) = (x W_V + b_V) W_O and its length")
    st.markdown(
        "V is not yet what the head adds to the query's output: the heads' outputs are "
        "concatenated and projected by W_O, so key *j*'s row of V goes through this head's slice "
        "of it, W_O^h (rows h·d_v … (h+1)·d_v − 1): f(xⱼ) = (xⱼ W_V^h + b_V^h) W_O^h, a vector of "
        "d_model numbers. The query receives αᵢⱼ f(xⱼ) from key *j*, whose length αᵢⱼ ‖f(xⱼ)‖ "
        "is the **weight × value norm** (Kobayashi et al. 2020, *Attention is not only a weight*): "
        "a large weight on a key whose f(xⱼ) is short adds little. W_O's bias is added to every "
        "query whatever it attends to, so, as in the paper, it is no key's and is left out.")
    w_o = results.output_projections(ckpt)[name][layer:layer + 1]  # (1, H * d_v, d_model)
    f = transformed_values(detail[f"{name}_v"], w_o)[0, head]  # (k_len, d_model)
    norms = np.linalg.norm(f.astype(np.float64), axis=-1)  # (k_len,): ‖f(x_j)‖
    screen.chart(st, matrix_fig(f, key_tokens, dimension_labels(f.shape[1]),
                               f"f(x): one row per key<br>(k_len, d_model) = {f.shape}",
                               name="f(x)"), key="arith_f_fig")
    screen.chart(st, value_norm_steps_fig(maps[name][layer, head, query], norms, key_tokens, where),
                    key="arith_value_norm_fig")
    st.caption("The attention views' **Show: Weight × value norm** draws the last row for every "
               "query, layer and head.")
    table, columns = steps_table(r)
    export_buttons(table, columns, key_tokens, f"{name}_layer{layer}_head{head}_query{query}_steps",
                   maps, key="arith_export")
    links.follow_in_fragment()


views(results.current_attention())
