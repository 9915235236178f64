import numpy as np
import streamlit as st

from explorer import choices, models, positions, results, screen, state, tokens
from figures.positional import (
    dot_similarity,
    encoder_input_fig,
    offset_fig,
    positional_heatmap_fig,
    relative_bias_fig,
    similarity_fig,
    sinusoids_fig,
)
from transformer import positional_encoding
from transformer.core import limits

BASE = 10000.0  # the paper's base, the one the model's layers use
MAX_SHOWN = 1024  # positions drawn at most: the similarity maps are positions x positions
DEFAULT_SHOWN = limits.MAX_INPUT_TOKENS  # a model's first positions, as many as text may fill


def use_model_settings():
    st.session_state.update(pe_d_model=config.d_model, pe_base=BASE,
                            pe_length=min(config.max_len, DEFAULT_SHOWN))


@st.fragment
def sinusoids(ckpt, own: bool, layout: str) -> None:
    """The sinusoid matrix (in the model's layout), its waves and similarities: its settings
    rerun them alone (a fragment). own: the model's codes are these sinusoids (compared)."""
    config = ckpt.config
    if st.session_state.get("pe_model") != ckpt.content_hash or "pe_d_model" not in st.session_state:
        st.session_state.pe_model = ckpt.content_hash
        use_model_settings()
    cols = st.columns([1, 1, 1, 1])
    d_model = cols[0].number_input("d_model", 1, max(1024, config.d_model), key="pe_d_model")
    length = cols[1].number_input("Positions", 1, MAX_SHOWN, key="pe_length")
    base = cols[2].number_input("Base", 1.0, 1e7, step=1000.0, key="pe_base")
    cols[3].button("Use the model's settings", on_click=use_model_settings, key="pe_reset")
    offset = config.position_offset if own else 0  # M2M100's positions start at pad_id + 1
    pe = positional_encoding(offset + length, d_model, base, layout=layout)[offset:]
    screen.chart(st, positional_heatmap_fig(pe), key="pe_heatmap")
    st.caption(positions.FORMULAS[layout] + (positions.offset_note(config) if own else ""))
    if own and d_model == config.d_model and length <= config.max_len and base == BASE:
        gap = np.abs(pe - results.position_codes(ckpt)[:length]).max(initial=0.0)
        if gap < 1e-4:
            st.caption(f"These are the model's own codes (max |difference| from its layer: "
                       f"{gap:.2g}).")
        else:
            st.warning(f"The model's own codes differ from these by up to {gap:.2g}.")

    st.subheader("Dimensions as waves")
    default_dims = sorted({d for d in (0, 1, 2 * (d_model // 8), d_model - 2) if 0 <= d < d_model})
    st.session_state.setdefault("pe_dims", default_dims)
    choices.keep_offered("pe_dims", range(d_model))
    dims = st.multiselect("Dimensions", list(range(d_model)), key="pe_dims")
    screen.chart(st, sinusoids_fig(pe, dims), key="pe_sinusoids")

    st.subheader("Similarity between positions")
    similarity = dot_similarity(pe)
    left, right = st.columns(2)
    screen.chart(left, similarity_fig(similarity, [str(p) for p in range(length)]),
                      key="pe_similarity")
    screen.chart(right, offset_fig(similarity), key="pe_offsets")
    st.caption("PE(p) · PE(q) = Σ cos((p − q) ω_i) depends only on the offset p − q: bands "
               "along the diagonal, greatest at p = q (d_model / 2 for even d_model); on the "
               "right, the map read along its diagonals.")


@st.fragment
def encoder_input(parts: dict) -> None:
    """The three parts of the encoder input: the colour-scale box reruns them alone (a
    fragment)."""
    shared = st.checkbox("One colour scale for all three", value=True, key="pe_shared_scale")
    third = "LayerNorm(sum) = encoder input" if parts["normed"] is not None else None
    position = None if positions.kind(config) == "none" else parts["position_part"]
    if position is None:
        third = "encoder input"
    screen.chart(st, encoder_input_fig(parts["token_part"], position, parts["total"],
                                      tokens.shown(ckpt.source_tokenizer, parts["tokens"]),
                                      shared_scale=shared,
                                      **({"total_name": third} if third else {})),
                    key="pe_encoder_input")


def learned_table(ckpt) -> None:
    """The model's learned position table (the rows it reads, and where they start in the
    original's), its position similarities beside the sinusoids'."""
    shown = min(config.max_len, DEFAULT_SHOWN)
    codes = results.position_codes(ckpt)[:shown]
    note = positions.learned_offset_note(ckpt.metadata.get("recipe"), config)
    if note:
        st.caption(note)
    if shown < config.max_len:
        st.caption(f"The first {shown} of its {config.max_len:,} positions (as many as a typed "
                   "text may fill).")
    screen.chart(st, positional_heatmap_fig(codes, "The model's learned position embeddings"),
                    key="pe_learned")
    left, right = st.columns(2)
    labels = [str(p) for p in range(shown)]
    screen.chart(left, similarity_fig(dot_similarity(codes), labels, "Learned: dot products"),
                      key="pe_learned_similarity")
    screen.chart(right, similarity_fig(dot_similarity(positional_encoding(shown, config.d_model)),
                                      labels, "Sinusoidal: dot products"),
                       key="pe_sinusoidal_similarity")


def relative_bias() -> None:
    """T5's relative position bias of each stack for the sentence, by offset."""
    maps = results.current_details("encoder", 0)  # the bias is every layer's
    for stack, causal in (("encoder", False), ("decoder", True)):
        bias = maps.get(f"{stack}_position_bias")  # (heads, q, k)
        if bias is None:
            continue
        where = "key − query from −(n − 1) to n − 1" if not causal else "earlier keys only"
        screen.chart(st, relative_bias_fig(bias, causal, f"The {stack}'s relative position bias "
                                                        f"({where})"),
                        key=f"pe_{stack}_bias")
    st.caption("Distances share buckets: each nearby offset has its own, farther ones share "
               "buckets that widen logarithmically, and every offset beyond the largest distance "
               "falls in the last bucket (flat ends). The decoder's bias looks back only.")


ckpt = models.active_checkpoint()
config = ckpt.config
st.title("Positional encodings")
used = positions.kind(config)
layout = positions.layout(config)
st.markdown(f"This model adds **{config.positional}** position codes to its token embeddings "
            f"(d_model = {config.d_model}, max_len = {config.max_len})." if used != "none" else
            positions.NO_POSITIONS)

if used == "sinusoidal":
    st.header("The sinusoidal encoding")
    sinusoids(ckpt, True, layout)
    st.info(f"This model uses fixed sinusoids (config.positional = {config.positional!r}): it "
            "has no learned position matrix. A model trained with `--positional learned` shows "
            "its matrix and its similarities on this page instead.")
elif used == "learned":
    st.header("Learned position embeddings")
    learned_table(ckpt)
else:
    st.header("Relative position bias")
    relative_bias()
    st.info("This model has no position matrix, learned or fixed.")
if used != "sinusoidal":  # drawn only while open: its maps were a 512-position page's half
    comparison = st.expander("The paper's sinusoids, for comparison: this model does not use them",
                             key="pe_comparison", on_change="rerun")
    if comparison.open:
        with comparison:
            sinusoids(ckpt, False, layout)

st.header("Encoder input for the sentence")
parts = results.encoder_input(ckpt, state.current_source())
scale = f"× √{config.d_model} " if config.scale_embeddings else ""
normed = parts["normed"] is not None  # BART's layernorm_embedding: the sum is normalised
if positions.kind(config) == "none":  # T5: nothing to add, so no empty panel for it
    st.markdown(f"Token embedding {scale}= what the first encoder layer reads (the model adds "
                "no position code: positions enter as the relative bias above), from the "
                "model's own `source_embedding` layer.")
else:
    st.markdown(f"Token embedding {scale}+ position code"
                f"{', then the embedding LayerNorm,' * normed} = what the first encoder layer "
                "reads, from the model's own `source_embedding` layer.")
expected = parts["normed"] if normed else parts["token_part"] + parts["position_part"]
gap = np.abs(expected - parts["total"]).max()
said = "LayerNorm(token part + position part)" if normed else "token part + position part"
(st.success if gap < 1e-4 else st.error)(f"The layer's output equals {said} (max |difference| {gap:.2g}).")
encoder_input(parts)
