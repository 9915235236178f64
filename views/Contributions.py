"""Contributions: what each source token and each target-prefix token gave every output token
(ALTI+, ALTI-Logit, saliency, input x gradient, integrated gradients), beside raw attention and
rollout; ALTI-Logit and the gradient methods also contrastive ("this token rather than that
one": each step's runner-up, or a foil picked or typed for one step)."""

import numpy as np
import streamlit as st

from explorer import links, models, results, screen, show, state, tokens
from explorer.choices import clamp_choice, forget_if_not_offered
from explorer.widgets import export_buttons
from figures.aggregate import layer_grid_fig
from figures.contribution_maps import contribution_map_fig, source_share_fig, step_bars_fig
from transformer.analysis.flow import attention_rollout, source_to_target_flow
from transformer.core.kinds import KINDS
from transformer.inference.contributions import METHODS
from transformer.inference.gradients import AUTO_STEPS, MAX_STEPS

SIDE_BY_SIDE_TOKENS = 24  # a map's columns up to which the three maps sit side by side
ALTI = "alti"
LABELS = {m.label: m for m in show.PAGE_METHODS.values()}  # the radio's label: its record
CONTRASTS = [show.NO_CONTRAST, show.RUNNER_UP]  # what a gradient method explains

st.title("Contributions")
st.markdown(
    "Attention says where each head looks; it does not say what the prediction took from each "
    "token (a head can look hard at a token whose value vector is tiny). These measures answer "
    "that for every output token: how much came from each **source** token and how much from "
    "each **target-prefix** token (the decoder's inputs so far), and so what share of each "
    "prediction came from the source at all. Raw attention and attention rollout are drawn "
    "beside them.")


def source_share(result: dict) -> np.ndarray:
    """ALTI+'s own source share; for a gradient method the source's share of the rows'
    absolute attributions, sum |source| / (sum |source| + sum |target|)."""
    if "source_share" in result:
        return result["source_share"]
    src = np.abs(result["source"]).sum(1)
    total = src + np.abs(result["target"]).sum(1)
    return np.divide(src, total, out=np.zeros_like(src), where=total > 0)


VZ_KINDS = {kind.label: kind.name for kind in KINDS.values()}  # the kind picker's labels


def value_zeroing(ckpt, source: str, typed, attention, shown) -> None:
    """Value zeroing's layer-by-layer maps of one attention kind, beside the same layers'
    attention weights (the head mean): computed when asked for."""
    record = METHODS["value_zeroing"]
    st.header("Context mixing, by value zeroing")
    st.markdown(record.about)
    if not st.toggle("Compute value zeroing (one run of each layer per token)",
                     key="contrib_vz_on"):
        return
    forget_if_not_offered("contrib_vz_kind", list(VZ_KINDS))
    label = st.radio("Attention", list(VZ_KINDS), key="contrib_vz_kind", horizontal=True)
    kind = VZ_KINDS[label]
    mixing = results.contributions(ckpt, source, typed, "value_zeroing")
    rows = shown["source_tokens"] if kind == "encoder" else shown["target_tokens"]
    cols = shown["target_tokens"] if kind == "decoder" else shown["source_tokens"]
    titles = [f"layer {i}" for i in range(len(mixing[kind]))]
    screen.chart(st, layer_grid_fig(mixing[f"{kind}_normalized"], rows, cols, titles, zmax=1.0,
                                   title=f"{label}: value zeroing, each row normalised",
                                   value_name="share"), key="contrib_vz_maps")
    screen.chart(st, layer_grid_fig(attention[kind].mean(1), rows, cols, titles, zmax=1.0,
                                   title=f"{label}: attention weights, head mean",
                                   value_name="weight"), key="contrib_vz_attention")
    export_buttons(mixing[kind].reshape(-1, mixing[kind].shape[-1]),
                   [f"L{i} {r}" for i in range(len(mixing[kind])) for r in rows], list(cols),
                   f"value_zeroing_{kind}", mixing, key="contrib_vz_export",
                   npz_name="value_zeroing.npz",
                   corner="layer query \\ key")
    st.caption("Top: how far each query token's layer output moves (1 − cos) when a key "
               "token's value vectors are zeroed in that layer alone, each row divided by its "
               "sum (scores under 1e-5 counted as 0); the export holds the raw distances. "
               "Bottom: where the same layer's heads look. A head may look hard at a token "
               "whose values change little.")


@st.fragment
def views(ckpt, source: str, typed) -> None:
    """The method, its maps beside attention, one step's bars: pickers rerun this alone."""
    forget_if_not_offered("contrib_method", list(LABELS))
    clamp_choice("contrib_steps", MAX_STEPS, default=AUTO_STEPS[0], low=1)
    c1, c2 = st.columns([3, 2])
    record = LABELS[c1.radio("Method", list(LABELS), key="contrib_method", horizontal=True)]
    method, label, value_name, signed = record.name, record.label, record.unit, record.signed
    steps = show.steps_picker(c2, "contrib") if record.steps else None
    contrast = show.NO_CONTRAST
    if record.contrastive:
        forget_if_not_offered("contrib_contrast", CONTRASTS)
        contrast = c1.radio("Explain", CONTRASTS, key="contrib_contrast", horizontal=True,
                            help="What is explained: the output token's log-probability "
                                 "(ALTI-Logit: its logit), or its difference from the step's "
                                 "most probable other token (why this token rather than that "
                                 "one; pick another foil for one step below).")
    st.markdown(record.about)
    attention = results.attention(ckpt, source, typed)  # the output ids every method scores
    out_ids = [int(i) for i in attention["output_ids"]]
    top_ids = (results.layer_predictions(ckpt, source, out_ids)["top_ids"][-1]
               if record.contrastive else None)  # (T, k): the model's own top-k of each step
    foils = show.runner_ups(top_ids, out_ids) if contrast == show.RUNNER_UP else None
    alti = results.contributions(ckpt, source, typed, ALTI)
    picked = alti if method == ALTI else results.contributions(ckpt, source, typed, method,
                                                               steps=steps, foil=foils)
    shown = tokens.shown_maps(attention, ckpt)
    src_tokens, prefix, out_tokens = (shown["source_tokens"], shown["target_tokens"],
                                      shown["output_tokens"])
    if foils is not None:
        label = f"{label} (rather than the runner-up)"
        runner = tokens.shown(ckpt.target_tokenizer, picked["foil_tokens"])
        st.caption("Each row explains log p(token) − log p(runner-up), the runner-up being the "
                   "step's most probable other token: "
                   + ", ".join(f"{o!r} over {r!r}" for o, r in zip(out_tokens[:8], runner[:8]))
                   + (" …" if len(out_tokens) > 8 else "") + ".")
    if record.steps:
        show.completeness_caption(picked, out_tokens)

    st.header("Source share, step by step")
    shares = {"ALTI+": alti["source_share"]}
    if method != ALTI:
        shares[f"{label} (share of |attribution|)"] = source_share(picked)
    screen.chart(st, source_share_fig(out_tokens, shares,
                                     title="What share of each output token came from the "
                                           "source"), key="contrib_share")
    mean = float(np.mean(alti["source_share"]))
    st.caption(f"ALTI+: on average {mean:.0%} of a prediction came from the source, the rest "
               "from the target prefix. Low values mark tokens the decoder wrote from its own "
               "prefix (a language-model-like guess; in hallucinations, most of them).")

    st.header("Token by token, beside attention")
    n_layers = len(attention["cross"])
    clamp_choice("contrib_layer", n_layers - 1, default=n_layers - 1)
    layer = st.selectbox("Decoder layer of the raw attention and rollout", range(n_layers),
                         key="contrib_layer",
                         help="Raw attention: this layer's heads averaged. Rollout: the "
                              "encoder rollout through this layer's cross-attention (flow), "
                              "and the decoder's self-attention rolled out up to this layer "
                              "(Abnar & Zuidema 2020, the residual counted as half).")
    flow = source_to_target_flow(attention["encoder"], attention["cross"], layer=layer)
    rollout = attention_rollout(attention["decoder"])[layer]
    zmax = 1.0 if record.share else None
    for side, matrix, raw, rolled, cols, x_title in (
            ("source", picked["source"], attention["cross"][layer].mean(0), flow, src_tokens,
             "source token"),
            ("target prefix", picked["target"], attention["decoder"][layer].mean(0), rollout,
             prefix, "decoder input")):
        st.subheader(f"From the {side}")
        # Three maps side by side leave a long sentence's tokens ~110 px (issue 38): beyond
        # SIDE_BY_SIDE_TOKENS columns, each map takes the page's width, one under the other.
        left, middle, right = (st.columns(3) if len(cols) <= SIDE_BY_SIDE_TOKENS else
                               [st.container() for _ in range(3)])
        screen.chart(left, contribution_map_fig(matrix, out_tokens, cols, title=label,
                                               value_name=value_name, signed=signed, zmax=zmax,
                                               x_title=x_title),
                          key=f"contrib_{side[:6]}_method")
        screen.chart(middle, contribution_map_fig(raw, out_tokens, cols, zmax=1.0,
                                                 title=f"Attention, layer {layer} (head mean)",
                                                 value_name="weight", x_title=x_title),
                            key=f"contrib_{side[:6]}_raw")
        what = "Flow (rollout × cross)" if side == "source" else "Rollout"  # fits a third
        screen.chart(right, contribution_map_fig(rolled, out_tokens, cols, zmax=1.0,
                                                title=f"{what}, to layer {layer}",
                                                value_name="weight", x_title=x_title),
                           key=f"contrib_{side[:6]}_rollout")
    both = np.concatenate([picked["source"], picked["target"]], axis=1)
    export_buttons(both, out_tokens, [f"src {t}" for t in src_tokens] +
                   [f"tgt {t}" for t in prefix], f"{method}_contributions", attention,
                   key="contrib_export", corner="output \\ token")
    st.caption("Rows: the token each step output (row t predicts it from the source and the "
               f"decoder inputs 0..t). Columns after t are 0: step t cannot see them. {label}'s "
               "maps use their own colour scale" + (", signed" if signed else "") + ".")

    value_zeroing(ckpt, source, typed, attention, shown)

    st.header("One output token")
    last = len(out_tokens) - 1
    clamp_choice("contrib_step", last)
    t = st.select_slider("Output token", list(range(len(out_tokens))), key="contrib_step",
                         format_func=lambda i: f"{i}: {out_tokens[i]}")
    step = picked
    title = f"{label}: what {out_tokens[t]!r} (step {t}) took from each token"
    if record.contrastive:
        foil = show.foil_picker(st, "contrib", ckpt.target_tokenizer, top_ids[t], out_ids[t],
                                shown=lambda pieces: tokens.shown(ckpt.target_tokenizer, pieces))
        if foil is not None:  # this step against its own foil: the steps up to it suffice
            step = results.contributions(ckpt, source, None, method,
                                         output_ids=out_ids[:t + 1], steps=steps,
                                         foil=[None] * t + [foil])
        if step is not alti and "foil_tokens" in step and step["foil_tokens"][t] is not None:
            foil_token = tokens.shown(ckpt.target_tokenizer, step["foil_tokens"][t:t + 1])[0]
            title = (f"{record.label}: why {out_tokens[t]!r} rather than {foil_token!r} "
                     f"(step {t})")
            show.contrast_caption(step, t, out_tokens[t])
    screen.chart(st, step_bars_fig(src_tokens, step["source"][t], prefix[:t + 1],
                                  step["target"][t, :t + 1], value_name=value_name,
                                  title=title), key="contrib_bars")
    top = int(np.argmax(np.abs(step["source"][t]))) if len(src_tokens) else None
    looked = int(np.argmax(attention["cross"][layer, :, t].mean(0)))
    st.caption(f"ALTI+ source share of this token: {alti['source_share'][t]:.0%}. "
               + (f"The source token it took most from by {label}: {src_tokens[top]!r}; "
                  if top is not None else "")
               + f"the one layer {layer}'s cross-attention looks at most: {src_tokens[looked]!r}.")

    # drawn only while open (Streamlit's expander state): its three grids of every layer were
    # the page's largest figures, sent and laid out on every first visit
    layers = st.expander("ALTI+ layer by layer", key="contrib_layers_open", on_change="rerun")
    if layers.open:
        with layers:
            st.markdown("Each attention sublayer's own contributions, before the rollout: rows "
                        "sum to 1. In cross-attention the last column is the residual: what the "
                        "token kept from the decoder's own stream rather than took from the "
                        "source.")
            for name, maps, rows, cols in (
                    ("Encoder self-attention", alti["encoder_layers"], src_tokens, src_tokens),
                    ("Decoder self-attention", alti["decoder_layers"], prefix, prefix),
                    ("Cross-attention", alti["cross_layers"], prefix,
                     [*src_tokens, "(residual)"])):
                screen.chart(st, layer_grid_fig(maps, rows, cols,
                                               [f"layer {i}" for i in range(len(maps))],
                                               zmax=1.0, title=f"{name}: ALTI contributions",
                                               value_name="contribution"),
                             key=f"contrib_layers_{name[:5]}")
    links.follow_in_fragment()


ckpt = models.active_checkpoint()
views(ckpt, state.current_source(), state.current_target())
