"""Head statistics: what every head does, in numbers, over one sentence or a batch of them."""

import streamlit as st

from explorer import models
from explorer.widgets import export_buttons
from figures.head_stats import similarity_matrix_fig, stat_heatmap_fig
from transformer import batch
from transformer.data import date_pairs
from transformer.head_stats import (CROSS_ONLY, KINDS, SHARES, STATISTICS, batch_statistics,
                                    cluster_order, head_labels, head_similarity_matrix,
                                    statistics_table)

SOURCES = {"current": "The sidebar's sentence", "held_out": "The task's held-out set",
           "pasted": "Sentences I paste"}
KIND_LABELS = {"encoder": "Encoder self-attention", "decoder": "Decoder self-attention",
               "cross": "Cross-attention"}
MAX_SENTENCES = 512
MAX_CHARS = 50_000


@st.cache_data(max_entries=16, show_spinner=False)
def batch_attention(model_hash: str, sources: tuple, _ckpt) -> list[dict]:
    """attention_batch, cached by (model hash, sources): the bar shows only while it computes."""
    bar = st.progress(0.0, text=f"Running the model on {len(sources)} sentences…")
    maps = batch.attention_batch(_ckpt, list(sources), batch_size=16, on_progress=lambda done,
                                 total: bar.progress(done / total, text=f"{done} of {total}"))
    bar.empty()
    return maps


@st.cache_data(max_entries=64, show_spinner=False)
def statistics(model_hash: str, sentences: tuple, target, _maps_list) -> dict:
    """batch_statistics of every kind, cached like the maps they come from."""
    return {kind: batch_statistics(_maps_list, kind) for kind in KINDS}


@st.cache_data(max_entries=64, show_spinner=False)
def similarity(model_hash: str, sentences: tuple, target, kind: str, _maps_list):
    return head_similarity_matrix(_maps_list, kind)


def held_out_sentences(ckpt) -> list[str]:
    if ckpt.metadata.get("task") != "dates":
        return models.examples(ckpt)
    n = st.number_input("How many held-out dates", 1, MAX_SENTENCES, 64, key="stats_n")
    seed = ckpt.metadata.get("seed", 0)
    pairs = date_pairs(int(n), seed=seed if isinstance(seed, int) else 0, split="test")
    return [source for source, _ in pairs]


ckpt = models.active_checkpoint()
st.title("Head statistics")
st.markdown(
    "What each head does, summed up in numbers: how spread out its attention is (entropy, in "
    "nats: 0 = one key, ln k = uniform over k keys), how far it looks (mean |i − j|, in "
    "positions), how much weight it puts on the same, previous or next position and on the "
    "special tokens `<s>`, `</s>`, `<pad>` (attention sinks). Each number is a mean over the "
    "real query rows of every sentence, so a batch weighs longer sentences more. In "
    "cross-attention, i is the "
    "target position and j the source position, compared as plain indices. **Agreement with "
    "the argmax alignment** (cross-attention only) is the fraction of target positions where "
    "the head's strongest source token is the strongest one of the consensus alignment: the "
    "cross-attention averaged over every layer and head.")
source = st.radio("Sentences", list(SOURCES), format_func=SOURCES.get, key="stats_source",
                  horizontal=True)
target = models.current_target() if source == "current" else None
if source == "current":
    sentences = [models.current_source()]
    maps_list = [models.current_attention()]
else:
    if source == "held_out":
        sentences = held_out_sentences(ckpt)
    else:
        text = st.text_area("One sentence per line (blank lines are skipped)", key="stats_lines",
                            max_chars=MAX_CHARS, height=160)
        lines = (text or "")[:MAX_CHARS].splitlines()  # the browser caps it too
        sentences = [line.strip() for line in lines if line.strip()]
    if len(sentences) > MAX_SENTENCES:
        st.warning(f"Only the first {MAX_SENTENCES} of {len(sentences)} sentences are used.")
        sentences = sentences[:MAX_SENTENCES]
    if not sentences:
        st.info("No sentences to compute over: paste some, one per line, or pick another "
                "source above.")
        st.stop()
    maps_list = batch_attention(ckpt.content_hash, tuple(sentences), ckpt)
with st.expander(f"The {len(sentences)} sentence(s) and the model's translations"):
    st.dataframe([{"source": s, "translation": ckpt.target_tokenizer.decode(m["output_ids"])}
                  for s, m in zip(sentences, maps_list)], hide_index=True)

stats = statistics(ckpt.content_hash, tuple(sentences), target, maps_list)
table = statistics_table(stats)
st.subheader("Every head, every statistic")
st.caption("Click a column header to sort. Alignment agreement is empty outside cross-attention.")
st.dataframe(table, hide_index=True, key="stats_table", column_config={
    name: st.column_config.NumberColumn(label, format="%.4f")
    for name, label in STATISTICS.items()})
export_buttons([[row[name] if row[name] is not None else float("nan") for name in STATISTICS]
                for row in table], [f"{r['kind']} L{r['layer']} H{r['head']}" for r in table],
               list(STATISTICS), "head_statistics", models.current_attention(), key="stats_export")

st.subheader("One statistic, layers × heads")
c1, c2 = st.columns(2)
kind = c1.radio("Attention", KINDS, format_func=KIND_LABELS.get, key="stats_kind",
                horizontal=True)
stat = c2.selectbox("Statistic", list(STATISTICS), format_func=STATISTICS.get, key="stats_stat")
if stat in CROSS_ONLY and kind != "cross":
    st.info(f"**{STATISTICS[stat]}** is defined for cross-attention only: pick Cross-attention.")
else:
    st.plotly_chart(stat_heatmap_fig(
        stats[kind][stat], f"{KIND_LABELS[kind]}: {STATISTICS[stat]}", colorbar_title=stat,
        zmin=0.0, zmax=1.0 if stat in SHARES else None), key="stats_heatmap")

st.subheader(f"Which heads attend alike: {KIND_LABELS[kind].lower()}")
st.markdown(
    "Jensen–Shannon divergence (bits, 0 = the same pattern, 1 = disjoint keys) between every "
    "pair of heads, row by row, averaged over the query rows and then over the sentences. Heads "
    "are ordered by average-linkage hierarchical clustering, so similar heads sit together.")
matrix = similarity(ckpt.content_hash, tuple(sentences), target, kind, maps_list)
labels = head_labels(*stats[kind]["entropy"].shape)
st.plotly_chart(similarity_matrix_fig(matrix, labels, cluster_order(matrix)),
                key="stats_similarity")
