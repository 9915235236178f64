"""Token view: a line from each query token to each key token, one colour per head (as BertViz)."""

import streamlit as st

from explorer import links, models, results, screen, show, tokens
from explorer.choices import forget_if_not_offered, keep_offered, reset_if_out_of_range
from explorer.widgets import export_buttons, kind_picker, simplify_toggles
from figures.token_view import (
    DEFAULT_MIN_WEIGHT,
    MAX_LINES,
    drawn_lines,
    head_colour,
    lines_summary,
    token_view_fig,
)

CHART = "tv_chart"


def pick_clicked_query() -> None:
    """Clicking a query token in the chart chooses it."""
    points = st.session_state[CHART].selection.points
    picked = [p for p in points if p.get("x") == 0 and p.get("y") is not None]
    if picked:
        st.session_state["tv_query"] = int(picked[0]["y"])


st.title("Token view")
st.markdown(
    "Queries on the left, keys on the right: each line is one attention weight of one head, its "
    "opacity and width growing with the weight. Hover a query token for its strongest keys; "
    "choose (or click) one to see only its lines.")


@st.fragment
def views(maps: dict, ckpt) -> None:
    """The kind, layer, head, query and weight pickers and the lines they show: they rerun
    alone (a fragment)."""
    kind = kind_picker("tv_kind")
    value_norm = show.picker("tv_show")
    drawn = show.maps(maps, value_norm)  # the weights, or the value norms (same shapes)
    n_layers, n_heads = maps[kind.name].shape[:2]
    c1, c2, c3 = st.columns([1, 2, 2])
    hide_special, merge_words = simplify_toggles(c3, "tv")
    weights, query_tokens, key_tokens, note = tokens.simplify(
        drawn[kind.name], maps[kind.query_tokens], maps[kind.key_tokens],
        (kind.query_side, kind.key_side), {"source": ckpt.source_tokenizer,
                                           "target": ckpt.target_tokenizer},
        hide_special=hide_special, merge_words=merge_words,
        renormalise=not value_norm)  # (L, H, q, k); value norms' rows never sum to 1
    # Value norms: lines scaled to the largest value of the kind (every layer and head), the
    # threshold a share of it
    scale = show.largest(weights) if value_norm else 1.0
    if note:
        c3.caption(note)
    reset_if_out_of_range("tv_layer", n_layers)  # what the new sentence, kind or model has
    st.session_state.setdefault("tv_heads", list(range(n_heads)))  # all heads at first
    keep_offered("tv_heads", range(n_heads), default=range(n_heads))
    forget_if_not_offered("tv_query", ["all", *range(len(query_tokens))])
    layer = c1.selectbox("Layer", range(n_layers), key="tv_layer")
    heads = c2.multiselect("Heads", range(n_heads), key="tv_heads", format_func=lambda h: f"head {h}")
    query = c1.selectbox("Query token", ["all", *range(len(query_tokens))], key="tv_query",
                         format_func=lambda q: q if q == "all" else f"{q}: {query_tokens[q]}")
    share = c2.slider("Hide lines below this share of the largest value" if value_norm
                      else "Hide lines with weight below", 0.0, 1.0, DEFAULT_MIN_WEIGHT, 0.01,
                      key="tv_min_weight")
    min_weight = share * scale  # in the values' own units
    every_line = c3.toggle("Draw every line", key="tv_all_lines",
                           help=f"Off: at most the {MAX_LINES} strongest lines (a long sentence "
                                "has tens of thousands).")

    if not heads:
        st.info("Choose at least one head.")
    elif not query_tokens or not key_tokens:
        st.info("No tokens are left to show: the sentence holds only special tokens. Type a "
                "sentence in the sidebar, or show special tokens.")
    else:
        shown = weights[layer][heads]  # (heads chosen, q, k)
        name = show.NORM_NAME if value_norm else "weight"
        fig = token_view_fig(
            shown, query_tokens, key_tokens, head_labels=[f"head {h}" for h in heads],
            colours=[head_colour(h) for h in heads],
            query_index=None if query == "all" else query, min_weight=min_weight,
            title=f"{kind.label}, layer {layer}" + (", weight × value norm" * value_norm),
            max_lines=None if every_line else MAX_LINES, scale=scale, value_name=name)
        screen.chart(st, fig, key=CHART, on_select=pick_clicked_query, selection_mode="points")
        st.caption(lines_summary(len(drawn_lines(fig)), len(heads), min_weight,
                                 fig.layout.meta["lines_possible"], scale=scale, value_name=name))
        if value_norm:
            show.caption()
        export_buttons(shown[0], query_tokens, key_tokens,
                       f"{'value_norm_' * value_norm}{kind.name}_layer{layer}_head{heads[0]}",
                       drawn, key="tv_export", npz_name=show.npz_name(value_norm))
        st.caption(f"The CSV holds head {heads[0]} (the first chosen), as shown: "
                   f"{len(query_tokens)} queries × {len(key_tokens)} keys.")
    links.follow_in_fragment()


views(results.current_attention(), models.active_checkpoint())
