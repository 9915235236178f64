import pandas as pd
import streamlit as st

from explorer import models, results, screen, state, tokens
from explorer.widgets import quoted
from figures.common import short_label
from figures.tokenization import (
    PIECE,
    SPECIAL,
    UNKNOWN,
    padded_batch_fig,
    piece_kinds,
    piece_spans_fig,
    pieces_fig,
    round_trip_fig,
    text_differences,
)
from transformer.core.masking import pad_ids

KIND_NOTES = {PIECE: "", SPECIAL: "special", UNKNOWN: "unknown"}


def show_ids(name, tok, ids, text, key):
    """Figure and table of one side's ids; `text` is what they encode (None: model output). The
    pieces as the pages show them (a byte-level BPE's decoded), beside the vocabulary's own."""
    pieces = tokens.shown(tok, tokens.text_pieces(tok, ids, text))
    specials = tokens.special_ids(tok)
    screen.chart(st, pieces_fig(pieces, ids, specials, tok.unk_id, title=f"{name}: pieces and ids"),
                    key=f"tok_{key}_pieces")
    kinds = piece_kinds(ids, specials, tok.unk_id)
    st.dataframe(pd.DataFrame({"piece": pieces, "id": ids,
                               "vocabulary piece": tok.ids_to_pieces(ids),
                               "kind": [KIND_NOTES[k] for k in kinds]}),
                 key=f"tok_{key}_table", height=min(400, 38 + 35 * len(ids)))
    if (kinds == UNKNOWN).any():
        st.warning(f"{(kinds == UNKNOWN).sum()} piece(s) are not in the vocabulary: they become "
                   f"`{tok.id_to_piece(tok.unk_id)}` (id {tok.unk_id}) and the model cannot tell "
                   "them apart.")


def show_round_trip(tok, text, key, side, add_start, add_end, read=True):
    """decode(encode(text)) against text as the model reads it: cut to the side's length (the
    model's, or the budget of typed text), with the start and end tokens it reads on that side.
    A cut text is compared with the part the model reads (the pieces kept, preprocessed).
    read=False: a text the model wrote (its translation), which nothing cuts."""
    limit = (ckpt.source_len if side == "source" else ckpt.target_len) if read else None
    decoded = tok.decode(tok.encode(text, add_start=add_start, add_end=add_end, max_len=limit))
    cut = ckpt.pieces_cut(text, side) if read else 0
    if cut:
        spans = tok.piece_spans(text)[:len(tok.pieces(text)) - cut]
        text = tok.preprocess(text)[:spans[-1][1]] if spans else ""
        st.caption(f"The round trip of the {len(spans)} pieces the model reads (the last {cut} "
                   "were cut):")
    if decoded == text:
        st.success(f"Round trip: decode(encode({quoted(text)})) gives the input back exactly.")
        return
    if decoded == tok.preprocess(text):
        st.info(f"Round trip gives {quoted(decoded)}: it differs from the input only by the "
                "tokenizer's preprocessing.")
    else:
        st.warning(f"Round trip gives {quoted(decoded)}, not the input {quoted(text)}.")
    screen.chart(st, round_trip_fig(text, decoded), key=f"tok_{key}_round_trip")
    st.dataframe(pd.DataFrame(text_differences(text, decoded)), key=f"tok_{key}_differences")


ckpt = models.active_checkpoint()
config, src, tgt = ckpt.config, ckpt.source_tokenizer, ckpt.target_tokenizer
source = state.current_source()
st.title("Tokenization")

cols = st.columns([3, 2, 2, 2])
name, about = src.described()
cols[0].metric("Tokenizer", name, help=about)
cols[1].metric("Source vocabulary", f"{src.vocab_size:,}")
cols[2].metric("Target vocabulary", f"{tgt.vocab_size:,}")
cols[3].metric("Longest sequence (max_len)", config.max_len,
               help=f"A typed source is cut at {ckpt.length_limit('source')}.")
for side, tok in (("source", src), ("target", tgt)):
    note, changes = tokens.preprocessing_note(tok, side)
    (st.info if changes else st.caption)(note)

st.header("Source")
pre = src.preprocess(source)
st.code(f"input:        {source!r}\npreprocessed: {pre!r}", language=None)
source_ids = ckpt.encode_source(source)
cut = ckpt.pieces_cut(source)
kept = len(src.encode(source)) - cut  # the pieces the model reads (besides its specials)
read = tokens.framing(src, config.source_start, config.source_end)
st.caption(tokens.source_framing(src, config))
if pre:
    spans = src.piece_spans(source)[:kept]
    shown = pre[:spans[-1][1]] if spans else pre
    screen.chart(st, piece_spans_fig(shown, spans, tokens.shown(src, src.pieces(source)[:kept]),
                                    src.encode(source)[:kept], src.unk_id), key="tok_spans")
if cut:
    st.warning(f"The model reads at most {ckpt.source_len} source tokens ({read}): the pieces "
               f"after {kept} are cut.")
show_ids("Source", src, source_ids, source, "source")
show_round_trip(src, source, "source", "source", add_start=config.source_start,
                add_end=config.source_end)

st.header("Target")
typed = state.current_target()
if typed is None:
    result = results.translation(ckpt, source)
    target, output_ids = result.text, list(result.token_ids)
    st.caption(f"The model's own translation, {quoted(target)}: its ids as generated, after "
               f"the decoder's start token {tokens.decoder_start(tgt, config)}.")
else:
    target = typed
    output_ids = ckpt.encode_target(target)  # cut as every page cuts it
    st.caption(f"The target you typed, {quoted(target)}, as the decoder reads it "
               "(teacher forcing).")
show_ids("Target", tgt, [config.start_id] + output_ids, typed, "target")
show_round_trip(tgt, target, "target", "target", False, True, read=typed is not None)

st.header("Padding a batch")
pad_piece = src.id_to_piece(src.pad_id)
if config.pad_source_to:
    padded = f"to the {config.pad_source_to} ids this model is always fed"
else:
    padded = "to the longest one"
hidden = ("the encoder's padding mask hides those cells" if config.mask_padding else
          "this model applies no padding mask: it attends to those cells like any other")
st.markdown(f"Sentences of a batch are padded on the right with `{pad_piece}` (id {src.pad_id}) "
            f"{padded}; {hidden}.")
others = st.text_area("Other sentences in the batch, one per line", key="tok_batch",
                      value="3/5/21\nthe 31st of December, 1999")
batch = [source] + [line for line in others.splitlines() if line.strip()][:8]
batch_ids = pad_ids([ckpt.encode_source(s) for s in batch], src.pad_id)
batch_pieces = [tokens.shown(src, src.ids_to_pieces(r)) for r in batch_ids]
screen.chart(st, padded_batch_fig(batch_ids, batch_pieces, src.pad_id,
                                 [f"{b}: {short_label(s, 24)}" for b, s in enumerate(batch)]),
                key="tok_batch_grid")
