"""Aggregations and rollout: heads reduced per layer, attention rollout, source-to-target flow."""

from functools import partial

import streamlit as st

from explorer import links, models, results, tokens
from explorer.choices import clamp_choice
from explorer.widgets import export_buttons, kind_picker, simplify_toggles
from figures.aggregate import layer_grid_fig, stacked_table
from transformer.analysis.flow import attention_rollout, head_max, head_mean, source_to_target_flow
from transformer.core.kinds import KINDS

SELF_ATTENTION = [name for name, k in KINDS.items() if k.query_side == k.key_side]  # square maps
REDUCE = {"mean": head_mean, "max": head_max}
REDUCE_LABELS = {"mean": "Mean over heads", "max": "Max over heads"}


def show(attention, tokenizers, simplify, maps, sides, titles, name, key, renormalise=True,
         reduce=None, **fig_options):
    """Hide special tokens / merge words as `simplify` = (hide special, merge words) says (per
    head, before `reduce` reduces the heads: a max over heads of merged words stays a weight
    <= 1), draw, offer the exports. sides: (query side, key side), "source" or "target"."""
    hide_special, merge_words = simplify
    side_tokens = [attention[f"{side}_tokens"] for side in sides]
    maps, rows, cols, note = tokens.simplify(
        maps, *side_tokens, sides, tokenizers, hide_special=hide_special, merge_words=merge_words,
        renormalise=renormalise)
    maps = REDUCE[reduce](maps) if reduce else maps
    if note:
        st.caption(note)
    if not rows or not cols:
        st.info("Nothing left to show: one side holds only special tokens. Turn off "
                "**Hide special tokens** to see them.")
        return
    st.plotly_chart(layer_grid_fig(maps, rows, cols, titles, **fig_options), key=f"{key}_fig")
    table, labels = stacked_table(maps, rows, titles)
    export_buttons(table, labels, cols, name, attention, key=key)


st.title("Aggregations and rollout")
st.markdown(
    "A model with several layers and heads has many attention maps. These views boil them down: "
    "over the heads of a layer, through the layers (rollout), and from the source sentence to "
    "each target position (flow). Every number is computed from the model's own attention "
    "weights for the sidebar's sentence.")


@st.fragment
def views(attention: dict, ckpt) -> None:
    """Every view of the page and its pickers: a change reruns them alone (a fragment), never
    the model (the maps come in from the page's run)."""
    tokenizers = {"source": ckpt.source_tokenizer, "target": ckpt.target_tokenizer}
    c1, c2, c3 = st.columns([2, 2, 3])
    reduce = c1.radio("Heads", list(REDUCE), format_func=REDUCE_LABELS.get, key="agg_reduce",
                      horizontal=True)
    residual = c2.toggle("Count the residual connection", value=True, key="agg_residual",
                         help="Rollout and flow: A' = ½·A + ½·I per layer, rows renormalised.")
    draw = partial(show, attention, tokenizers, simplify_toggles(c3, "agg"))

    st.header("Heads aggregated, one map per layer")
    kind = kind_picker("agg_kind")
    st.markdown(
        "**Mean** over heads is the layer's average head: rows still sum to 1. **Max** takes, per "
        "cell, the strongest head, so a key that any single head focuses on stands out; its rows no "
        "longer sum to 1 (hiding special tokens then only removes them, without rescaling).")
    layer_titles = [f"layer {layer}" for layer in range(len(attention[kind.name]))]
    draw(attention[kind.name], (kind.query_side, kind.key_side), layer_titles,  # (L, H, q, k)
         f"{kind.name}_{reduce}_over_heads", "agg_heads", renormalise=reduce == "mean",
         reduce=reduce, title=f"{kind.label}: {REDUCE_LABELS[reduce].lower()}")

    st.header("Attention rollout")
    st.markdown(
        "Attention rollout (Abnar & Zuidema, 2020, *Quantifying Attention Flow in Transformers*) "
        "follows attention through the layers: per layer the heads are reduced to one map A; with "
        "the residual connection counted, A' = ½·A + ½·I (rows renormalised); the layers are then "
        "multiplied, later ones on the left: R = A'ₗ ⋯ A'₀. Panel *l* shows the rollout up to layer "
        "*l*; the last one is the full rollout: how much each token's final representation draws "
        "on each input token. In the decoder the rollout stays causal (nothing above the diagonal).")
    stack = kind_picker("agg_rollout_kind", label="Self-attention stack", kinds=SELF_ATTENTION)
    rollout = attention_rollout(attention[stack.name], residual=residual, head_reduce=reduce)
    rollout_titles = [f"layers 0–{n}" if n else "layer 0" for n in range(len(rollout))]
    draw(rollout, (stack.query_side, stack.key_side), rollout_titles, f"{stack.name}_rollout",
         "agg_rollout",
         title=f"{stack.label}: rollout ({'with' if residual else 'without'} residual, "
               f"{reduce} over heads)")

    st.header("Source-to-target flow")
    st.markdown(
        "Flow = C · R_enc: the cross-attention C of one decoder layer (heads reduced, rows "
        "renormalised) times the full encoder rollout R_enc. Row *t* says how much decoder position "
        "*t* (which predicts the next target token) draws, through the encoder, on each source "
        "token; every row sums to 1. It is an approximation: it follows a single cross-attention "
        "layer and ignores how the decoder's own self-attention mixes target positions.")
    n_decoder = len(attention["cross"])
    clamp_choice("agg_flow_layer", n_decoder - 1, default=n_decoder - 1)  # the last layer at first
    flow_layer = st.selectbox("Decoder layer of the cross-attention", range(n_decoder),
                              key="agg_flow_layer")
    flow = source_to_target_flow(attention["encoder"], attention["cross"], layer=flow_layer,
                                 residual=residual, head_reduce=reduce)
    draw(flow[None], ("target", "source"), [f"cross layer {flow_layer} · encoder rollout"],
         f"flow_layer_{flow_layer}", "agg_flow",
         x_title="source token", y_title="target position")
    shown = tokens.shown_maps(attention, ckpt)
    st.caption(f"Rows are labelled by the decoder's input token (`{shown['target_tokens'][0]}` "
               "first); row *t* predicts output token *t*: "
               + " ".join(f"`{t}`" for t in shown["output_tokens"]))
    links.follow_in_fragment()


views(results.current_attention(), models.active_checkpoint())
