"""Masks: the padding, look-ahead, decoder and memory masks of a batch, and one masked row."""

import numpy as np
import streamlit as st

from explorer import models
from explorer.widgets import keep_in_range
from figures.masks import (axis_labels, batch_mask_fig, mask_heatmap_fig, masked_softmax,
                           masking_row_fig)
from transformer.masks import decoder_mask, look_ahead_mask, padding_mask

DEFAULT_OTHERS = "5 Mar 2021\nWednesday, September 22, 1999"
MAX_ROWS = 8  # batch rows run through the model at once
KINDS = {  # label: (model output prefix, query side, key side)
    "Encoder self-attention": ("encoder", "source", "source"),
    "Decoder self-attention": ("decoder", "target", "target"),
    "Cross-attention": ("cross", "target", "source"),
}


@st.cache_data(max_entries=64, show_spinner="Running the model on the batch…")
def run_batch(model_hash: str, sources: tuple, translations: tuple, _ckpt) -> dict:
    """Pad the batch, compute its masks with transformer.masks and run one forward pass."""
    cfg = _ckpt.config
    rows = {"source": [_ckpt.encode_source(s) for s in sources],
            "target": [[cfg.start_id] + _ckpt.target_tokenizer.encode(t, max_len=cfg.max_len - 1)
                       for t in translations]}
    out = {}
    for side, tokenizer in (("source", _ckpt.source_tokenizer), ("target", _ckpt.target_tokenizer)):
        width = max(map(len, rows[side]))
        ids = np.array([r + [cfg.pad_id] * (width - len(r)) for r in rows[side]], np.int32)
        out[f"{side}_ids"], out[f"{side}_tokens"] = ids, [tokenizer.ids_to_pieces(r) for r in ids]
    out["padding"] = np.asarray(padding_mask(out["source_ids"], cfg.pad_id))  # (B, 1, 1, N)
    out["target_padding"] = np.asarray(padding_mask(out["target_ids"], cfg.pad_id))  # (B, 1, 1, T)
    out["look_ahead"] = np.asarray(look_ahead_mask(out["target_ids"].shape[1]))  # (T, T)
    out["decoder"] = np.asarray(decoder_mask(out["target_ids"], cfg.pad_id))  # (B, 1, T, T)
    result = _ckpt.model((out["source_ids"], out["target_ids"]), return_qkv=True)
    for kind in ("encoder", "decoder", "cross"):  # (L, B, H, Tq, Tk) each
        out[f"{kind}_scores"] = np.asarray(result[f"{kind}_scores"])
        out[f"{kind}_attention"] = np.asarray(result[f"{kind}_attention"])
    return out


ckpt = models.active_checkpoint()
st.title("Masks")
st.markdown(
    "A mask says, for every query and key, whether the query **may attend** to the key (**1**) or "
    "not (**0**, blocked). Blocked keys get −10⁹ added to their score before the softmax, so "
    "their attention weight is exactly 0: padding is never attended to, and the decoder never "
    "looks at later target tokens.")
others = st.text_area("Other sentences of the batch, one per line (row 0 is the sidebar's "
                      "sentence)", DEFAULT_OTHERS, key="mask_batch")
sources = [models.current_source()] + [s.strip() for s in others.splitlines() if s.strip()]
if len(sources) > MAX_ROWS:
    st.caption(f"Only the first {MAX_ROWS - 1} other sentences are used.")
sources = sources[:MAX_ROWS]
translations = [models.translation(ckpt.content_hash, s, ckpt).text for s in sources]
batch = run_batch(ckpt.content_hash, tuple(sources), tuple(translations), ckpt)
B, N = batch["source_ids"].shape
T = batch["target_ids"].shape[1]
names = [f"row {b}{' (sidebar)' * (b == 0)}: {s[:30] or '(empty)'}" for b, s in enumerate(sources)]
st.caption(f"Source side: `ckpt.encode_source` padded to N = {N}. Target side: `<s>` + the model's "
           f"translation, padded to T = {T} with pad id {ckpt.config.pad_id}.")

st.subheader("The batch's masks")
pad, tgt_pad, look, dec = (batch[k] for k in ("padding", "target_padding", "look_ahead", "decoder"))
st.plotly_chart(batch_mask_fig(pad[:, 0, 0], batch["source_ids"], batch["source_tokens"], names,
                               f"Padding mask (source)<br>(B, 1, 1, N) = {pad.shape}"))
st.plotly_chart(batch_mask_fig(tgt_pad[:, 0, 0], batch["target_ids"], batch["target_tokens"],
                               names, f"Target padding mask<br>(B, 1, 1, T) = {tgt_pad.shape}"))
keep_in_range("mask_row", B)
row = st.selectbox("Batch row for the decoder and memory masks", range(B),
                   format_func=names.__getitem__, key="mask_row")
src_tokens, tgt_tokens = batch["source_tokens"][row], batch["target_tokens"][row]
positions = [str(t) for t in range(T)]
cols = st.columns(3)
cols[0].plotly_chart(mask_heatmap_fig(look, positions, positions,
                                      f"Look-ahead mask<br>(T, T) = {look.shape}",
                                      x_title="key position", y_title="query position"))
cols[1].plotly_chart(mask_heatmap_fig(dec[row, 0], tgt_tokens, tgt_tokens,
                                      f"Decoder mask, row {row}<br>(B, 1, T, T) = {dec.shape}"))
cols[2].plotly_chart(mask_heatmap_fig(np.broadcast_to(pad[row, 0], (T, N)), tgt_tokens, src_tokens,
                                      f"Memory mask, row {row}<br>(B, 1, 1, N) = {pad.shape}"))
st.caption("Decoder mask = target padding mask × look-ahead mask. The memory mask is the source "
           "padding mask, broadcast by cross-attention over the T target queries: no query may "
           "attend to source padding.")

st.subheader("What masking does to one attention row")
st.markdown("Row 0 (the sidebar's sentence) inside the padded batch, so padding blocks some keys "
            "when another sentence is longer.")
kind_label = st.segmented_control("Attention", list(KINDS), default=list(KINDS)[0], key="mask_kind")
kind, query_side, key_side = KINDS[kind_label or list(KINDS)[0]]
scores_all = batch[f"{kind}_scores"]  # (L, B, H, Tq, Tk)
layers, _, heads, queries, _ = scores_all.shape
for key, size in (("mask_layer", layers), ("mask_head", heads), ("mask_query", queries)):
    keep_in_range(key, size)
c1, c2, c3 = st.columns(3)
layer = c1.selectbox("Layer", range(layers), key="mask_layer")
head = c2.selectbox("Head", range(heads), key="mask_head")
query_tokens, key_tokens = batch[f"{query_side}_tokens"][0], batch[f"{key_side}_tokens"][0]
query = c3.selectbox("Query position", range(queries), key="mask_query",
                     format_func=lambda q: f"{q}: {query_tokens[q]}")
mask_row = batch["padding"][0, 0, 0] if key_side == "source" else batch["decoder"][0, 0, query]
scores = scores_all[layer, 0, head, query]
weights = batch[f"{kind}_attention"][layer, 0, head, query]
st.plotly_chart(masking_row_fig(scores, mask_row, weights, key_tokens,
                                f"{kind_label}, layer {layer}, head {head}, query {query} "
                                f"({axis_labels(query_tokens)[query]})"))
redone = masked_softmax(scores, mask_row)
if np.allclose(redone, weights, atol=1e-6):
    st.success(f"softmax(masked scores) computed here in NumPy equals the model's attention row "
               f"(largest difference {np.abs(redone - weights).max():.1e}); blocked keys: "
               f"{int((mask_row == 0).sum())} of {len(mask_row)}.")
else:
    st.error(f"softmax(masked scores) differs from the model's attention row by up to "
             f"{np.abs(redone - weights).max():.3g}.")
