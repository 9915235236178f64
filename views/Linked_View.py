"""Linked view: encoder self-, decoder self- and cross-attention of one head, one target row
highlighted in the decoder and cross panels."""

import streamlit as st

from explorer import links, models, results, screen, show, tokens
from explorer.choices import reset_if_out_of_range
from explorer.widgets import export_buttons, kind_picker
from figures.attention_maps import clicked_row, linked_view_fig, top_keys
from figures.common import plotly_text
from transformer.core.kinds import KINDS


def pick_clicked_row() -> None:
    """on_select callback: a click on a row of the decoder or cross panel picks that row."""
    event = st.session_state.get("link_fig") or {}
    row = clicked_row((event.get("selection") or {}).get("points"))
    if row is not None:
        st.session_state["link_target"] = row


st.title("Linked view")
st.markdown(
    "The three attentions of one head side by side. Pick a target position (or click its row "
    "in the decoder or cross panel): its row is outlined in the decoder's self-attention (which "
    "earlier target tokens it looks at) and in cross-attention (which source tokens it looks "
    "at).")


@st.fragment
def views(maps: dict, ckpt) -> None:
    """The layer, head and target row pickers and what they show: rerun alone (a fragment)."""
    enc_layers, heads = maps["encoder"].shape[:2]
    dec_layers = maps["decoder"].shape[0]
    shown = tokens.shown_maps(maps, ckpt)  # the labels drawn
    source_tokens, target_tokens = shown["source_tokens"], shown["target_tokens"]
    output_tokens = shown["output_tokens"]
    for key, size in (("link_layer", dec_layers), ("link_head", heads),
                      ("link_target", len(output_tokens))):
        reset_if_out_of_range(key, size)

    value_norm = show.picker("link_show")
    drawn = show.maps(maps, value_norm)  # the weights, or the value norms (same shapes)
    c1, c2 = st.columns(2)
    layer = c1.selectbox("Layer", range(dec_layers), key="link_layer",
                         help="The decoder's layer; the encoder panel shows the same layer number, "
                              "or the encoder's last layer when it has fewer.")
    head = c2.selectbox("Head", range(heads), key="link_head")
    target = st.selectbox("Target token (the row that predicts it)", range(len(output_tokens)),
                          key="link_target", format_func=lambda t: f"{t}: {output_tokens[t]}")

    enc_layer = min(layer, enc_layers - 1)
    layers = {name: enc_layer if kind.stack == "encoder" else layer for name, kind in KINDS.items()}
    panels = {name: drawn[name][layers[name], head] for name in KINDS}  # (q, k) each
    blocked = {name: ~maps[kind.mask] for name, kind in KINDS.items()}
    # Value norms: one colour axis from 0 to the largest of the three panels (not 0 to 1)
    values = (dict(zmax=show.largest([p.max() for p in panels.values()]),
                   value_name=show.NORM_NAME) if value_norm else {})
    screen.chart(st, linked_view_fig(
        *panels.values(), source_tokens, target_tokens, selected_target=target, blocked=blocked,
        panel_titles=[f"Encoder self, layer {enc_layer}", f"Decoder self, layer {layer}",
                      f"Cross, layer {layer}"],
        title=f"Head {head}: target row {target} (input {plotly_text(target_tokens[target])} → "
              f"predicts {plotly_text(output_tokens[target])})"
              + ("<br>weight × value norm" * value_norm), **values), key="link_fig",
        on_select=pick_clicked_row, selection_mode="points")

    if value_norm:
        show.caption()
    what = ("gets the most, by weight × value norm, from" if value_norm
            else "attends most, in cross-attention, to")
    st.markdown(f"**Row {target}** (fed `{target_tokens[target]}`, predicts "
                f"`{output_tokens[target]}`) {what}:")
    top = top_keys(panels["cross"][target], source_tokens, k=3, blocked=blocked["cross"][target])
    name = show.NORM_NAME if value_norm else "weight"
    st.markdown("\n".join(f"{rank}. `{token}` (source position {pos}): {name} **{weight:.3f}**"
                          for rank, (pos, token, weight) in enumerate(top, start=1)))

    st.subheader("Export")
    kind = kind_picker("link_export", label="Matrix to export as CSV")
    export_buttons(panels[kind.name], shown[kind.query_tokens], shown[kind.key_tokens],
                   f"{'value_norm_' * value_norm}{kind.name}_layer{layers[kind.name]}_head{head}",
                   drawn, key="link_export_buttons", npz_name=show.npz_name(value_norm))
    links.follow_in_fragment()


views(results.current_attention(), models.active_checkpoint())
