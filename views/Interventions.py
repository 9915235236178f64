"""Interventions: change what the model computes and see what its output does. Activation
patching (causal tracing): each site restored from a clean run into a corrupted one. DecoderLens
(Langedijk et al. 2024): the decoder reads encoder layer k's output instead of the last one.
Attention knockout: one step's cross-attention edges to chosen source tokens blocked."""

import numpy as np
import pandas as pd
import streamlit as st

from explorer import export, links, models, results, screen, show, state, tokens
from explorer.choices import clamp_choice, forget_if_not_offered
from figures.contribution_maps import contribution_map_fig

st.title("Interventions")
st.markdown(
    "Attributions say what the output *used*; an intervention changes what the model computes "
    "and watches the output move. **Activation patching**: run the sentence and a corrupted "
    "copy of it, then put back one piece of the clean run at a time (a layer's output at one "
    "position, one head's output) and see how much of the clean answer returns: which "
    "positions, layers and heads carry the information the corruption destroyed. "
    "**DecoderLens**: the decoder cross-attends to the output of "
    "an earlier encoder layer instead of the last one, so each layer's source representation "
    "is read out as a translation: where along the encoder the information that decides the "
    "output appears. **Attention knockout**: one step may not look at chosen source tokens in "
    "chosen layers and heads; what the token loses, and where the translation goes without "
    "them.")


@st.fragment
def decoder_lens(ckpt, source: str, typed) -> None:
    """DecoderLens (on by default; its toggle turns it off): each encoder layer's greedy
    translation and how probable each output token is with that layer as the decoder's
    memory."""
    st.header("DecoderLens")
    if not st.toggle("DecoderLens (one greedy decode and one scoring pass per encoder layer, "
                     "all layers in one batch)", value=True, key="inter_lens_on"):
        links.follow_in_fragment()
        return
    lens = results.sentence_lens(ckpt, source, typed)
    tgt = ckpt.target_tokenizer
    out_tokens = tokens.shown(tgt, lens["output_tokens"])
    last = len(lens["layers"]) - 1
    names = ["embeddings (k = 0)"] + [f"layer {k}" + (" (the model)" if k == last else "")
                                      for k in lens["layers"][1:]]
    probs = np.exp(lens["log_probs"].astype(np.float64))  # (K, T)
    scored = "your typed target" if typed is not None else "the model's translation"
    screen.chart(st, contribution_map_fig(
        probs, names, out_tokens, zmax=1.0, value_name="p(token)",
        title=f"p of each token of {scored}, the decoder reading encoder layer k",
        x_title="output token", y_title="decoder's memory"), key="inter_lens_probs")
    rows = [{"memory": name, "greedy translation": t["text"],
             "tokens": len(t["token_ids"]),
             "stopped by": "its end token" if t["stopped_by"] == "end" else "the length cap",
             f"mean log p of {scored}'s tokens": float(np.mean(lens["log_probs"][k]))}
            for k, (name, t) in enumerate(zip(names, lens["translations"]))]
    st.dataframe(pd.DataFrame(rows), key="inter_lens_table", hide_index=True)
    first = next((k for k, t in enumerate(lens["translations"])
                  if t["token_ids"] == lens["translations"][-1]["token_ids"]), last)
    st.caption(f"Each row's translation is greedy (the argmax at every step, at most "
               f"{results.LENS_STEPS} tokens past the model's own). The first layer whose output "
               f"the decoder already translates as the model does: {names[first]}. The map's "
               "last row is the model itself.")
    left, right = st.columns(2)
    left.download_button("CSV of this map",
                         export.matrix_csv(probs, names, list(out_tokens),
                                           "memory \\ output token"),
                         file_name="decoder_lens_probabilities.csv", mime="text/csv",
                         key="inter_lens_csv")
    right.download_button(
        "NPZ of the lens", lambda: export.arrays_npz(
            log_probs=lens["log_probs"], layers=lens["layers"],
            output_tokens=list(lens["output_tokens"]), source_tokens=list(lens["source_tokens"]),
            translations=[t["text"] for t in lens["translations"]]),
        file_name="decoder_lens.npz", mime="application/octet-stream", key="inter_lens_npz")
    links.follow_in_fragment()


@st.fragment
def knockout(ckpt, source: str, typed) -> None:
    """Attention knockout of one step: the picks rerun this part alone."""
    st.header("Attention knockout")
    cfg = ckpt.config
    out_ids = results.scored_output_ids(ckpt, source, typed)
    tgt, src = ckpt.target_tokenizer, ckpt.source_tokenizer
    out_tokens = tokens.shown(tgt, tgt.ids_to_pieces(out_ids))
    src_tokens = tokens.shown(src, src.ids_to_pieces(ckpt.encode_source(source)))
    clamp_choice("inter_ko_step", len(out_ids) - 1)
    step = st.select_slider("Output step", list(range(len(out_ids))), key="inter_ko_step",
                            format_func=lambda i: f"{i}: {out_tokens[i]}")
    forget_if_not_offered("inter_ko_sources", list(range(len(src_tokens))))
    forget_if_not_offered("inter_ko_layers", list(range(cfg.num_decoder_layers)))
    forget_if_not_offered("inter_ko_heads", list(range(cfg.num_heads)))
    c1, c2, c3 = st.columns([2, 1, 1])
    positions = c1.multiselect("Source tokens it may not look at", list(range(len(src_tokens))),
                               key="inter_ko_sources",
                               format_func=lambda i: f"{i}: {src_tokens[i]}")
    layers = c2.multiselect("In decoder layers", list(range(cfg.num_decoder_layers)),
                            default=list(range(cfg.num_decoder_layers)), key="inter_ko_layers")
    heads = c3.multiselect("And heads", list(range(cfg.num_heads)),
                           default=list(range(cfg.num_heads)), key="inter_ko_heads")
    if not positions or not layers or not heads:
        st.info("Pick the source tokens, layers and heads whose edges to block.",
                icon=":material/info:")
        links.follow_in_fragment()
        return
    result = results.knockout(ckpt, source, typed, out_ids, step, layers, heads, positions)
    before, after = np.exp(result["log_prob"]), np.exp(result["log_prob_knocked"])
    m1, m2 = st.columns(2)
    m1.metric(f"p({out_tokens[step]!r}) at step {step}", f"{before:.3f}")
    m2.metric("with the edges blocked", f"{after:.3f}", delta=f"{after - before:+.3f}")
    left, right = st.columns(2)
    for column, title, top, name in (
            (left, "Most probable, as it is", result["top"], "before"),
            (right, "With the edges blocked", result["top_knocked"], "after")):
        column.markdown(f"**{title}**")
        column.dataframe(pd.DataFrame(
            [{"token": tokens.shown(tgt, [piece])[0], "id": i, "p": p} for piece, i, p in top]),
            hide_index=True, key=f"inter_ko_top_{name}")
    st.markdown(f"**The translation as it is:** {result['translation']['text']}  \n"
                f"**Blocked at step {step}, then greedy:** "
                f"{result['translation_knocked']['text']}")
    st.caption("The blocked edges are masked as padding is: the step's softmax spreads their "
               "weight over the other source tokens. Only this step is blocked; the steps after "
               "it decode as the model does, from the token the blocked step picked.")
    links.follow_in_fragment()


SITE_TITLES = {"encoder_layers": "Encoder: a layer's output at one source position",
               "decoder_layers": "Decoder: a layer's output at one of the step's positions",
               "encoder_heads": "Encoder self-attention: one head's output",
               "decoder_heads": "Decoder self-attention: one head's output",
               "cross_heads": "Cross-attention: one head's output"}


def _corruption(src_tokens):
    """The corrupted source (typed) or the noised positions, from the section's widgets; None
    for both (with a prompt drawn) while nothing is picked."""
    mode = st.radio("How to corrupt it", [show.CORRUPT_TYPED, show.CORRUPT_NOISE],
                    key="inter_patch_mode", horizontal=True)
    if mode == show.CORRUPT_TYPED:
        corrupted = st.text_input(
            "Corrupted source sentence", key="inter_patch_corrupted",
            help="The sentence with a word changed; it must split into as many tokens (the "
                 "sites are restored position by position).")
        if not corrupted.strip():
            st.info(f"Type a corrupted copy of the sentence: a word changed, "
                    f"{len(src_tokens)} tokens in all (the dates model: \"March 6, 2021\" "
                    "against \"March 5, 2021\").", icon=":material/info:")
            return None, None
        return corrupted, None
    forget_if_not_offered("inter_patch_noise", list(range(len(src_tokens))))
    noised = st.multiselect("Source tokens whose embedding gets Gaussian noise (3 standard "
                            "deviations of the embedding matrix, as in ROME)",
                            list(range(len(src_tokens))), key="inter_patch_noise",
                            format_func=lambda i: f"{i}: {src_tokens[i]}")
    if not noised:
        st.info("Pick the source tokens to corrupt.", icon=":material/info:")
        return None, None
    return None, noised


@st.fragment
def patching(ckpt, source: str, typed) -> None:
    """Activation patching: the corruption, the step and the score picked here rerun this part
    alone."""
    st.header("Activation patching")
    tgt, src = ckpt.target_tokenizer, ckpt.source_tokenizer
    src_tokens = tokens.shown(src, src.ids_to_pieces(ckpt.encode_source(source)))
    corrupted, noised = _corruption(src_tokens)
    out_ids = results.scored_output_ids(ckpt, source, typed)
    out_tokens = tokens.shown(tgt, tgt.ids_to_pieces(out_ids))
    forget_if_not_offered("inter_patch_step", list(range(len(out_ids))))
    c1, c2 = st.columns([1, 2])
    step = c1.selectbox("Output step scored", [None] + list(range(len(out_ids))),
                        key="inter_patch_step",
                        format_func=lambda i: ("the first the corruption changes" if i is None
                                               else f"{i}: {out_tokens[i]}"))
    score = c2.radio("Score", [show.PATCH_LOG_P, show.PATCH_DIFFERENCE],
                     key="inter_patch_score", horizontal=True)
    foil = "corrupted" if score == show.PATCH_DIFFERENCE else None
    if corrupted is None and noised is None:
        links.follow_in_fragment()
        return
    try:
        result = results.patch(ckpt, source, out_ids, corrupted, noised, step, foil)
    except ValueError as err:
        st.warning(str(err), icon=":material/warning:")
        links.follow_in_fragment()
        return
    at = result["step"]
    m1, m2, m3 = st.columns(3)
    scored = f"log p({out_tokens[at]!r})"
    if foil is not None:
        scored += f" − log p({tokens.shown(tgt, [result['foil_token']])[0]!r})"
    m1.metric(f"Step {at}", out_tokens[at])
    m2.metric(f"{scored}, clean", f"{result['clean_score']:.3f}")
    m3.metric("corrupted", f"{result['corrupted_score']:.3f}",
              delta=f"{result['corrupted_score'] - result['clean_score']:+.3f}")
    st.caption("The corrupted source: " + " ".join(
        tokens.shown(src, result["corrupted_tokens"]) if noised is None
        else result["corrupted_tokens"]))
    if abs(result["clean_score"] - result["corrupted_score"]) < 1e-6:
        st.info("The corruption does not change this step's score: there is nothing to restore. "
                "Pick another step, or corrupt another word.", icon=":material/info:")
        links.follow_in_fragment()
        return
    start = tokens.shown(tgt, tgt.ids_to_pieces([ckpt.config.start_id]))
    prefix = (start + out_tokens[:at])  # the decoder's inputs up to the step
    outputs = {stack: ["embeddings"] + [f"layer {k} output" for k in range(count)]
               for stack, count in (("encoder", ckpt.config.num_encoder_layers),
                                    ("decoder", ckpt.config.num_decoder_layers))}
    axes = {"encoder_layers": (outputs["encoder"], src_tokens, "source token"),
            "decoder_layers": (outputs["decoder"], prefix, "decoder input"),
            **{kind: ([f"layer {k}" for k in range(result[kind].shape[0])],
                      [f"H{h}" for h in range(ckpt.config.num_heads)], "head")
               for kind in ("encoder_heads", "decoder_heads", "cross_heads")}}
    for kind, (rows, cols, x_title) in axes.items():
        screen.chart(st, contribution_map_fig(
            result[f"{kind}_recovered"], rows, cols, signed=True, zmax=1.0,
            value_name="recovered",
            title=SITE_TITLES[kind], x_title=x_title, y_title="layer"),
            key=f"inter_patch_{kind}")
    st.caption("Each cell: the site restored from the clean run into the corrupted one, alone; "
               "the share of the corruption's effect on the score it undoes: (patched − "
               "corrupted) / (clean − corrupted), 1 = the clean score back, 0 = no change. "
               "Every site of a kind is one batch of one compiled pass.")
    left, right = st.columns(2)
    left.download_button(
        "CSV of the source positions' map",
        export.matrix_csv(result["encoder_layers_recovered"], axes["encoder_layers"][0],
                          list(src_tokens), "layer \\ source token"),
        file_name="patching_encoder_layers.csv", mime="text/csv", key="inter_patch_csv")
    right.download_button(
        "NPZ of every site", lambda: export.arrays_npz(
            **{k: v for k, v in result.items() if isinstance(v, np.ndarray)},
            source_tokens=list(result["source_tokens"]),
            corrupted_tokens=list(result["corrupted_tokens"]),
            output_tokens=list(result["output_tokens"]), step=at,
            clean_score=result["clean_score"], corrupted_score=result["corrupted_score"]),
        file_name="patching.npz", mime="application/octet-stream", key="inter_patch_npz")
    links.follow_in_fragment()


ckpt = models.active_checkpoint()
patching(ckpt, state.current_source(), state.current_target())
decoder_lens(ckpt, state.current_source(), state.current_target())
knockout(ckpt, state.current_source(), state.current_target())
