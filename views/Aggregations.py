"""Aggregations and rollout: heads reduced per layer, attention rollout, source-to-target flow."""

from functools import partial

import numpy as np
import streamlit as st

from explorer import links, models, results, screen, show, tokens
from explorer.choices import clamp_choice, forget_if_not_offered
from explorer.widgets import export_buttons, kind_picker, simplify_toggles
from figures.aggregate import layer_grid_fig, stacked_table
from transformer.analysis.flow import (
    attention_rollout,
    head_max,
    head_mean,
    normalise_rows,
    source_to_target_flow,
)
from transformer.core.kinds import KINDS

SELF_ATTENTION = [name for name, k in KINDS.items() if k.query_side == k.key_side]  # square maps
REDUCE = {"mean": head_mean, "max": head_max}
REDUCE_LABELS = {"mean": "Mean over heads", "max": "Max over heads",
                 "summed": "Sum over heads, ‖Σₕ α f(x)‖"}
SUMMED = "summed"  # value norms only: the layer's "<kind>_summed", the norm of the heads' sum


def lowered(label: str) -> str:
    """A label in a sentence: its first letter lower case (only: "Σ" stays "Σ")."""
    return label[:1].lower() + label[1:]


def layer_maps(drawn: dict, name: str, reduce: str) -> np.ndarray:
    """One map per layer of kind `name`, (L, q, k): the heads of drawn[name] reduced (mean or
    max), or the value norms' head-summed map "<name>_summed"."""
    return drawn[f"{name}_summed"] if reduce == SUMMED else REDUCE[reduce](drawn[name])


def draw_map(attention, tokenizers, simplify, maps, sides, titles, name, key, renormalise=True,
             reduce=None, value_norm=False, **fig_options):
    """Hide special tokens / merge words as `simplify` = (hide special, merge words) says (per
    head, before `reduce` reduces the heads: a max over heads of merged words stays a weight
    <= 1), draw, offer the exports. sides: (query side, key side), "source" or "target".
    value_norm: the maps are value norms, drawn on a scale from 0 to their largest value."""
    hide_special, merge_words = simplify
    side_tokens = [attention[f"{side}_tokens"] for side in sides]
    maps, rows, cols, note = tokens.simplify(
        maps, *side_tokens, sides, tokenizers, hide_special=hide_special, merge_words=merge_words,
        renormalise=renormalise)
    maps = REDUCE[reduce](maps) if reduce else maps
    if value_norm:
        fig_options.update(zmax=show.largest(maps), value_name=show.NORM_NAME)
    if note:
        st.caption(note)
    if not rows or not cols:
        st.info("Nothing left to show: one side holds only special tokens. Turn off "
                "**Hide special tokens** to see them.")
        return
    screen.chart(st, layer_grid_fig(maps, rows, cols, titles, **fig_options), key=f"{key}_fig")
    table, labels = stacked_table(maps, rows, titles)
    export_buttons(table, labels, cols, name, attention, key=key,
                   npz_name=show.npz_name(value_norm))


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
    value_norm = show.picker("agg_show")
    drawn = show.maps(attention, value_norm)  # the weights, or the value norms (same shapes)
    reductions = [*REDUCE, SUMMED] if value_norm else list(REDUCE)
    forget_if_not_offered("agg_reduce", reductions)  # the sum is offered for value norms only
    c1, c2, c3 = st.columns([2, 2, 3])
    reduce = c1.radio("Heads", reductions, format_func=REDUCE_LABELS.get, key="agg_reduce",
                      horizontal=True)
    residual = c2.toggle("Count the residual connection", value=True, key="agg_residual",
                         help="Rollout and flow: A' = ½·A + ½·I per layer, rows renormalised.")
    draw = partial(draw_map, drawn, tokenizers, simplify_toggles(c3, "agg"))
    if value_norm:
        show.caption()

    st.header("Heads aggregated, one map per layer")
    kind = kind_picker("agg_kind")
    if value_norm:
        st.markdown(
            "**Mean** over heads is the layer's average head's ‖α f(x)‖, **max** the strongest "
            "head's per cell, **sum** the norm of what all the heads of the layer add together, "
            "‖Σₕ αₕ fₕ(x)‖ (at most the sum of the heads' norms: heads can cancel). None of their "
            "rows sums to 1, so hiding special tokens only removes them, without rescaling; "
            "merging words adds a word's pieces as keys and averages them as queries.")
    else:
        st.markdown(
            "**Mean** over heads is the layer's average head: rows still sum to 1. **Max** takes, "
            "per cell, the strongest head, so a key that any single head focuses on stands out; "
            "its rows no longer sum to 1 (hiding special tokens then only removes them, without "
            "rescaling).")
    layer_titles = [f"layer {layer}" for layer in range(len(attention[kind.name]))]
    what = f"{lowered(REDUCE_LABELS[reduce])}{', weight × value norm' * value_norm}"
    if reduce == SUMMED:  # already one map per layer (L, q, k)
        draw(drawn[f"{kind.name}_summed"], (kind.query_side, kind.key_side), layer_titles,
             f"{kind.name}_value_norm_summed_over_heads", "agg_heads", renormalise=False,
             value_norm=True, title=f"{kind.label}: {what}")
    else:
        draw(drawn[kind.name], (kind.query_side, kind.key_side), layer_titles,  # (L, H, q, k)
             f"{kind.name}_{'value_norm_' * value_norm}{reduce}_over_heads", "agg_heads",
             renormalise=reduce == "mean" and not value_norm, reduce=reduce,
             value_norm=value_norm, title=f"{kind.label}: {what}")

    st.header("Attention rollout")
    st.markdown(
        "Attention rollout (Abnar & Zuidema, 2020, *Quantifying Attention Flow in Transformers*) "
        "follows attention through the layers: per layer the heads are reduced to one map A; with "
        "the residual connection counted, A' = ½·A + ½·I (rows renormalised); the layers are then "
        "multiplied, later ones on the left: R = A'ₗ ⋯ A'₀. Panel *l* shows the rollout up to layer "
        "*l*; the last one is the full rollout: how much each token's final representation draws "
        "on each input token. In the decoder the rollout stays causal (nothing above the diagonal).")
    if value_norm:
        st.markdown(
            "**With value norms** rollout needs rows that sum to 1, and ‖α f(x)‖ rows do not: "
            "each layer's map (heads reduced as picked above) has **its rows renormalised "
            "explicitly**, every cell divided by its row's sum, so A holds each key's share of "
            "what the query receives by norm; the residual and the product then follow as for "
            "weights.")
    stack = kind_picker("agg_rollout_kind", label="Self-attention stack", kinds=SELF_ATTENTION)
    rollout = attention_rollout(rows_of(drawn, stack.name, reduce, value_norm),
                                residual=residual, head_reduce=reduce if not value_norm else "mean")
    rollout_titles = [f"layers 0–{n}" if n else "layer 0" for n in range(len(rollout))]
    draw(rollout, (stack.query_side, stack.key_side), rollout_titles,
         f"{stack.name}_{'value_norm_' * value_norm}rollout", "agg_rollout",
         title=f"{stack.label}: rollout ({'with' if residual else 'without'} residual, "
               f"{lowered(REDUCE_LABELS[reduce])}{', value norms, rows renormalised' * value_norm})")

    st.header("Source-to-target flow")
    st.markdown(
        "Flow = C · R_enc: the cross-attention C of one decoder layer (heads reduced, rows "
        "renormalised) times the full encoder rollout R_enc. Row *t* says how much decoder position "
        "*t* (which predicts the next target token) draws, through the encoder, on each source "
        "token; every row sums to 1. It is an approximation: it follows a single cross-attention "
        "layer and ignores how the decoder's own self-attention mixes target positions.")
    if value_norm:
        st.markdown("**With value norms** the cross-attention and every encoder layer have their "
                    "rows renormalised explicitly first, as in the rollout above.")
    n_decoder = len(attention["cross"])
    clamp_choice("agg_flow_layer", n_decoder - 1, default=n_decoder - 1)  # the last layer at first
    flow_layer = st.selectbox("Decoder layer of the cross-attention", range(n_decoder),
                              key="agg_flow_layer")
    flow = source_to_target_flow(rows_of(drawn, "encoder", reduce, value_norm),
                                 rows_of(drawn, "cross", reduce, value_norm), layer=flow_layer,
                                 residual=residual,
                                 head_reduce=reduce if not value_norm else "mean")
    draw(flow[None], ("target", "source"), [f"cross layer {flow_layer} · encoder rollout"],
         f"{'value_norm_' * value_norm}flow_layer_{flow_layer}", "agg_flow",
         x_title="source token", y_title="target position")
    shown = tokens.shown_maps(attention, ckpt)
    st.caption(f"Rows are labelled by the decoder's input token (`{shown['target_tokens'][0]}` "
               "first); row *t* predicts output token *t*: "
               + " ".join(f"`{t}`" for t in shown["output_tokens"]))
    links.follow_in_fragment()


def rows_of(drawn: dict, name: str, reduce: str, value_norm: bool) -> np.ndarray:
    """What rollout and flow take for kind `name`: the weights as they are (L, H, q, k), heads
    reduced by them; value norms reduced here (layer_maps) and their rows renormalised to sum
    to 1, as one head per layer (L, 1, q, k)."""
    if not value_norm:
        return drawn[name]
    return normalise_rows(layer_maps(drawn, name, reduce))[:, None]


views(results.current_attention(), models.active_checkpoint())
