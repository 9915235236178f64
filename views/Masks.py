"""Masks: the padding, look-ahead, decoder and memory masks of a batch, as the model applied them
(its source_mask and target_mask, from one forward pass), and one masked row."""

import numpy as np
import streamlit as st

from explorer import about, links, mask_captions, models, results, screen, state, tokens
from explorer.choices import reset_if_out_of_range
from explorer.widgets import kind_picker, quoted
from figures.common import plotly_text, short_label
from figures.mask_maps import batch_mask_fig, mask_heatmap_fig, masked_softmax, masking_row_fig
from transformer.core.kinds import layer_counts
from transformer.core.masking import BLOCKED_SCORE

DEFAULT_OTHERS = "\n".join(results.MASK_OTHERS)
MAX_ROWS = 8  # batch rows run through the model at once
OTHER_ROW_STEPS = results.MASK_OTHER_STEPS  # the most tokens decoded for each other row


@st.fragment
def row_masks(batch: dict, names: list[str], caption: str) -> None:
    """The decoder and memory masks of one batch row: the row picker reruns them alone (a
    fragment)."""
    (B, N), T = batch["source_ids"].shape, batch["target_ids"].shape[1]
    pad, look, dec = (batch[k] for k in ("padding", "look_ahead", "decoder"))
    reset_if_out_of_range("mask_row", B)
    row = st.selectbox("Batch row for the decoder and memory masks", range(B),
                       format_func=names.__getitem__, key="mask_row")
    src_tokens, tgt_tokens = batch["source_tokens"][row], batch["target_tokens"][row]
    positions = [str(t) for t in range(T)]
    cols = st.columns(3)
    screen.chart(cols[0], mask_heatmap_fig(look, positions, positions,
                                          f"Look-ahead mask<br>(T, T) = {look.shape}",
                                          x_title="key position", y_title="query position"))
    screen.chart(cols[1], mask_heatmap_fig(dec[row, 0], tgt_tokens, tgt_tokens,
                                          f"Decoder mask, row {row}: target_mask<br>"
                                          f"(B, 1, T, T) = {dec.shape}"))
    screen.chart(cols[2], mask_heatmap_fig(np.broadcast_to(pad[row, 0], (T, N)), tgt_tokens, src_tokens,
                                          f"Memory mask, row {row}: source_mask<br>"
                                          f"(B, 1, 1, N) = {pad.shape}"))
    st.caption(caption)


@st.fragment
def masking_row(batch: dict) -> None:
    """One masked attention row: the kind, layer, head and query pickers rerun it alone (a
    fragment); the pass runs for the layer picked (results.masked_row)."""
    kind = kind_picker("mask_kind")
    ckpt = models.active_checkpoint()
    layers, heads = layer_counts(ckpt.config)[kind.name], ckpt.config.num_heads
    queries = batch["source_ids" if kind.query_side == "source" else "target_ids"].shape[1]
    for key, size in (("mask_layer", layers), ("mask_head", heads), ("mask_query", queries)):
        reset_if_out_of_range(key, size)
    c1, c2, c3 = st.columns(3)
    layer = c1.selectbox("Layer", range(layers), key="mask_layer")
    head = c2.selectbox("Head", range(heads), key="mask_head")
    query_tokens, key_tokens = batch[kind.query_tokens][0], batch[kind.key_tokens][0]
    query = c3.selectbox("Query position", range(queries), key="mask_query",
                         format_func=lambda q: f"{q}: {query_tokens[q]}")
    row = results.masked_row(ckpt, batch, kind.name, layer)  # (H, Tq, Tk) each
    source_keys = kind.key_side == "source"
    mask_row = batch["padding"][0, 0, 0] if source_keys else batch["decoder"][0, 0, query]
    scores, weights = row["scores"][head, query], row["attention"][head, query]
    screen.chart(st, masking_row_fig(scores, mask_row, weights, key_tokens,
                                    f"{kind.label}, layer {layer}, head {head}, query {query} "
                                    f"({plotly_text(query_tokens[query])})",
                                    blocked_score=BLOCKED_SCORE))
    redone = masked_softmax(scores, mask_row, blocked_score=BLOCKED_SCORE)
    if np.allclose(redone, weights, atol=1e-6):
        st.success(f"softmax(masked scores) computed here in NumPy equals the model's attention row "
                   f"(largest difference {np.abs(redone - weights).max():.1e}); blocked keys: "
                   f"{int((mask_row == 0).sum())} of {len(mask_row)}.")
    else:
        st.error(f"softmax(masked scores) differs from the model's attention row by up to "
                 f"{np.abs(redone - weights).max():.3g}.")
    links.follow_in_fragment()


ckpt = models.active_checkpoint()
st.title("Masks")
cfg = ckpt.config
start_piece = ckpt.target_tokenizer.id_to_piece(cfg.start_id)
st.markdown(
    "A mask says, for every query and key, whether the query **may attend** to the key (**1**) or "
    "not (**0**, blocked). Blocked keys get −10⁹ added to their score before the softmax, so "
    "their attention weight is exactly 0. Every mask here is the one the model applied in its "
    "forward pass (`model.source_mask`, `model.target_mask`).")
texts = about.mask_texts(cfg, quoted(start_piece))
st.markdown(texts["masks"])
others = st.text_area("Other sentences of the batch, one per line (row 0 is your sentence)",
                      DEFAULT_OTHERS, key="mask_batch")
sources = [state.current_source()] + [s.strip() for s in others.splitlines() if s.strip()]
if len(sources) > MAX_ROWS:
    st.caption(f"Only the first {MAX_ROWS - 1} other sentences are used.")
sources = sources[:MAX_ROWS]
# Row 0 is the sidebar's translation; the other rows only show padding, so they are decoded
# together and cut at OTHER_ROW_STEPS tokens (an untrained model never ends on its own).
others = results.batch_translations(ckpt, sources[1:], OTHER_ROW_STEPS)
typed = state.current_target()  # row 0's target: the typed one, as every page feeds it
first = typed if typed is not None else results.translation(ckpt, sources[0]).text
translations = [first] + [d.text for d in others]
batch = results.mask_batch(ckpt, sources, translations)
batch = {**batch, **{f"{side}_tokens": [tokens.shown(tok, row) for row in batch[f"{side}_tokens"]]
                     for side, tok in (("source", ckpt.source_tokenizer),
                                       ("target", ckpt.target_tokenizer))}}  # the labels drawn
B, N = batch["source_ids"].shape
T = batch["target_ids"].shape[1]
names = [f"row {b}{' (sidebar)' * (b == 0)}: {short_label(s, 30) or '(empty)'}"
         for b, s in enumerate(sources)]
st.caption(mask_captions.sides_caption(ckpt, N, T, typed=typed is not None))
cut = [b for b, d in enumerate(others, start=1) if d.stopped_by != "end"]
if cut:
    st.caption(mask_captions.cut_rows_caption(cut, OTHER_ROW_STEPS))

st.subheader("The batch's masks")
pad, tgt_pad, look, dec = (batch[k] for k in ("padding", "target_padding", "look_ahead", "decoder"))
what = texts["what"]
screen.chart(st, batch_mask_fig(pad[:, 0, 0], batch["source_ids"], batch["source_tokens"], names,
                               f"Source {what}: the model's source_mask<br>"
                               f"(B, 1, 1, N) = {pad.shape}"))
screen.chart(st, batch_mask_fig(tgt_pad[:, 0, 0], batch["target_ids"], batch["target_tokens"],
                               names, f"Target {what}: the last query row of the model's "
                                      f"target_mask<br>(B, 1, 1, T) = {tgt_pad.shape}"))
row_masks(batch, names, texts["row_caption"])

st.subheader("What masking does to one attention row")
st.markdown(texts["row_intro"])
masking_row(batch)
