"""Aggregations and rollout: heads reduced per layer, attention rollout, source-to-target flow."""

import streamlit as st

from explorer import models
from explorer.widgets import export_buttons, simplify_toggles
from figures.aggregate import layer_grid_fig, stacked_table
from transformer.analysis import (attention_rollout, head_max, head_mean, simplify_tokens,
                                  source_to_target_flow)

KINDS = {  # label: (attention kind, query tokens, key tokens)
    "Encoder self-attention": ("encoder", "source_tokens", "source_tokens"),
    "Decoder self-attention": ("decoder", "target_tokens", "target_tokens"),
    "Cross-attention": ("cross", "target_tokens", "source_tokens"),
}
REDUCE = {"mean": head_mean, "max": head_max}
REDUCE_LABELS = {"mean": "Mean over heads", "max": "Max over heads"}


def show(maps, query_tokens, key_tokens, titles, name, key, renormalise=True, **fig_options):
    """Hide special tokens / merge words as the toggles say, draw the maps, offer the exports."""
    maps, rows, cols = simplify_tokens(maps, query_tokens, key_tokens, hide_special=hide_special,
                                       merge_words=merge_words, renormalise=renormalise)
    if not rows or not cols:
        st.info("Nothing left to show: one side holds only special tokens. Turn off "
                "**Hide special tokens** to see them.")
        return
    st.plotly_chart(layer_grid_fig(maps, rows, cols, titles, **fig_options), key=f"{key}_fig")
    table, labels = stacked_table(maps, rows, titles)
    export_buttons(table, labels, cols, name, attention, key=key)


attention = models.current_attention()
st.title("Aggregations and rollout")
st.markdown(
    "A model with several layers and heads has many attention maps. These views boil them down: "
    "over the heads of a layer, through the layers (rollout), and from the source sentence to "
    "each target position (flow). Every number is computed from the model's own attention "
    "weights for the sidebar's sentence.")
c1, c2, c3 = st.columns([2, 2, 3])
reduce = c1.radio("Heads", list(REDUCE), format_func=REDUCE_LABELS.get, key="agg_reduce",
                  horizontal=True)
residual = c2.toggle("Count the residual connection", value=True, key="agg_residual",
                     help="Rollout and flow: A' = ½·A + ½·I per layer, rows renormalised.")
hide_special, merge_words = simplify_toggles(c3, "agg")

st.header("Heads aggregated, one map per layer")
kind_label = st.radio("Attention", list(KINDS), key="agg_kind", horizontal=True)
kind, query_side, key_side = KINDS[kind_label]
st.markdown(
    "**Mean** over heads is the layer's average head: rows still sum to 1. **Max** takes, per "
    "cell, the strongest head, so a key that any single head focuses on stands out; its rows no "
    "longer sum to 1 (hiding special tokens then only removes them, without rescaling).")
per_layer = REDUCE[reduce](attention[kind])  # (L, q, k)
layer_titles = [f"layer {layer}" for layer in range(len(per_layer))]
show(per_layer, attention[query_side], attention[key_side], layer_titles,
     f"{kind}_{reduce}_over_heads", "agg_heads", renormalise=reduce == "mean",
     title=f"{kind_label}: {REDUCE_LABELS[reduce].lower()}")

st.header("Attention rollout")
st.markdown(
    "Attention rollout (Abnar & Zuidema, 2020, *Quantifying Attention Flow in Transformers*) "
    "follows attention through the layers: per layer the heads are reduced to one map A; with "
    "the residual connection counted, A' = ½·A + ½·I (rows renormalised); the layers are then "
    "multiplied, later ones on the left: R = A'ₗ ⋯ A'₀. Panel *l* shows the rollout up to layer "
    "*l*; the last one is the full rollout: how much each token's final representation draws "
    "on each input token. In the decoder the rollout stays causal (nothing above the diagonal).")
rollout_label = st.radio("Self-attention stack", list(KINDS)[:2], key="agg_rollout_kind",
                         horizontal=True)
rollout_kind, rollout_side, _ = KINDS[rollout_label]
rollout = attention_rollout(attention[rollout_kind], residual=residual, head_reduce=reduce)
rollout_titles = [f"layers 0–{n}" if n else "layer 0" for n in range(len(rollout))]
show(rollout, attention[rollout_side], attention[rollout_side], rollout_titles,
     f"{rollout_kind}_rollout", "agg_rollout",
     title=f"{rollout_label}: rollout ({'with' if residual else 'without'} residual, "
           f"{reduce} over heads)")

st.header("Source-to-target flow")
st.markdown(
    "Flow = C · R_enc: the cross-attention C of one decoder layer (heads reduced, rows "
    "renormalised) times the full encoder rollout R_enc. Row *t* says how much decoder position "
    "*t* (which predicts the next target token) draws, through the encoder, on each source "
    "token; every row sums to 1. It is an approximation: it follows a single cross-attention "
    "layer and ignores how the decoder's own self-attention mixes target positions.")
n_decoder = len(attention["cross"])
if st.session_state.setdefault("agg_flow_layer", n_decoder - 1) >= n_decoder:  # fewer layers
    st.session_state["agg_flow_layer"] = n_decoder - 1
flow_layer = st.selectbox("Decoder layer of the cross-attention", range(n_decoder),
                          key="agg_flow_layer")
flow = source_to_target_flow(attention["encoder"], attention["cross"], layer=flow_layer,
                             residual=residual, head_reduce=reduce)
show(flow[None], attention["target_tokens"], attention["source_tokens"],
     [f"cross layer {flow_layer} · encoder rollout"], f"flow_layer_{flow_layer}", "agg_flow",
     x_title="source token", y_title="target position")
st.caption("Rows are labelled by the decoder's input token (`<s>` first); row *t* predicts "
           "output token *t*: " + " ".join(f"`{t}`" for t in attention["output_tokens"]))
