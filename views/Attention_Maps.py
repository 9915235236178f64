"""Attention maps: one head large, and every layer and head of that kind as small multiples."""

import streamlit as st

from explorer import links, models, results, screen, show, tokens
from explorer.choices import reset_if_out_of_range
from explorer.widgets import export_buttons, kind_picker, scroll_into_view
from figures.attention_maps import attention_heatmap_fig, model_view_cell, model_view_fig

ROWS = {"Decoder inputs": "target_tokens", "Predicted outputs": "output_tokens"}
# The colour scale's options: the same labels whatever Show says (a radio whose labels change
# is a new widget to the browser, which then showed no option selected: issue 38); the help
# says what "Fixed" is for each.
SCALES = {"Fixed": "fixed", "Fitted to this map": "fit"}
SCALE_HELP = ("Fixed: weights from 0 to 1, value norms from 0 to the largest of this kind's "
              "every head (heads compare as weights do). Fitted: this map's own range.")


def open_clicked_head() -> None:
    """on_select callback: a click on a model-view thumbnail opens that head large (and the
    page scrolls up to it)."""
    event = st.session_state.get("attn_model_view") or {}
    cell = model_view_cell((event.get("selection") or {}).get("points"))
    if cell is not None:
        st.session_state["attn_layer"], st.session_state["attn_head"] = cell
        st.session_state["attn_scroll"] = True


st.title("Attention maps")
st.markdown(
    "Each row is a **query** token, each column a **key** token; a cell is the weight the query "
    "gives the key in one head (every row sums to 1). Grey cells marked × are **blocked** by the "
    "mask (weight exactly 0), which is not the same as a small weight. **Show** switches every "
    "map of the page to weight × value norm: what each key adds to the query's output.")


@st.fragment
def views(maps: dict, ckpt) -> None:
    """Everything a kind, layer, head or scale change redraws: it reruns alone (a fragment)."""
    shown = tokens.shown_maps(maps, ckpt)  # the labels drawn
    # A thumbnail click scrolls to the pickers, not to the map under them (issue 24): the
    # container holds both, and stops below Streamlit's fixed header.
    opened = st.container(key="attn_opened")
    st.html("<style>.st-key-attn_opened {scroll-margin-top: 4.5rem;}</style>")
    c1, c2 = opened.columns([3, 2])
    kind = kind_picker("attn_kind", c1)
    value_norm = show.picker("attn_show", c1)
    drawn = show.maps(maps, value_norm)  # the weights, or the value norms (same shapes)
    decoder_side = kind.query_side == "target"
    rows_label = c2.radio("Row labels (decoder kinds)", list(ROWS), horizontal=True, key="attn_rows",
                          disabled=not decoder_side,
                          help="Row t is fed the decoder input t and predicts output t.")
    weights = drawn[kind.name]  # (layers, heads, q, k)
    layers, heads = weights.shape[:2]
    reset_if_out_of_range("attn_layer", layers)
    reset_if_out_of_range("attn_head", heads)

    c1, c2, c3 = opened.columns(3)
    layer = c1.selectbox("Layer", range(layers), key="attn_layer")
    head = c2.selectbox("Head", range(heads), key="attn_head")
    scale_label = c3.radio("Colour scale", list(SCALES), horizontal=True, key="attn_scale",
                           help=SCALE_HELP)

    query_tokens = shown[ROWS[rows_label]] if decoder_side else shown["source_tokens"]
    key_tokens = shown[kind.key_tokens]
    matrix = weights[layer, head]
    title = f"{kind.label}, layer {layer}, head {head}"
    # Value norms: one colour scale for every head of the kind (the fixed scale's top), so heads
    # compare as weights do on 0..1
    values = dict(zmax=show.largest(weights), value_name=show.NORM_NAME) if value_norm else {}
    screen.chart(opened, attention_heatmap_fig(
        matrix, query_tokens, key_tokens, title=title + (" (weight × value norm)" * value_norm),
        colour_scale=SCALES[scale_label], blocked=~maps[kind.mask],
        query_title=f"{kind.query_side} query", key_title=f"{kind.key_side} key", **values),
        key="attn_heatmap")
    if value_norm:
        show.caption(opened)
    export_buttons(matrix, query_tokens, key_tokens,
                   f"{'value_norm_' * value_norm}{kind.name}_layer{layer}_head{head}", drawn,
                   key="attn_export", npz_name=show.npz_name(value_norm))

    st.subheader("Model view: every layer and head")
    st.caption("Click a thumbnail to open that head above: the page scrolls up to it (or use the "
               "Layer and Head pickers). The red outline marks the head shown.")
    screen.chart(st,
        model_view_fig(weights, query_tokens, key_tokens, selected=(layer, head),
                       title=f"{kind.label}: {layers} layers × {heads} heads"
                             + (", weight × value norm" * value_norm), **values),
        key="attn_model_view", on_select=open_clicked_head, selection_mode="points")
    if st.session_state.pop("attn_scroll", False):
        scroll_into_view("attn_opened")  # the pickers and the opened head, above the model view
    links.follow_in_fragment()


views(results.current_attention(), models.active_checkpoint())
