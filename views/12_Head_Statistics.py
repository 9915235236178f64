"""Head statistics: what every head does, in numbers, over one sentence or a batch of them."""

import streamlit as st

from explorer import links, models, results, state, tokens
from explorer.widgets import export_buttons, kind_picker
from figures.head_stats import similarity_matrix_fig, stat_heatmap_fig
from transformer.analysis.head_stats import CROSS_ONLY, SHARES, STATISTICS, cluster_order, statistics_table
from transformer.core.kinds import head_label, head_labels

SOURCES = {"current": "The sidebar's sentence", "held_out": "The task's held-out set",
           "pasted": "Sentences I paste"}
MAX_SENTENCES = 512
MAX_CHARS = 50_000


ckpt = models.active_checkpoint()
st.title("Head statistics")
st.markdown("What each head does, summed up in numbers over one sentence or many: how spread "
            "out, how far and where it looks.")
with st.expander("What the statistics mean"):
    st.markdown(
        "- **Entropy** (nats): how spread out the attention is; 0 = one key, ln k = uniform "
        "over k keys.\n"
        "- **Distance**: mean |i − j| in positions, how far a query looks; in cross-attention i "
        "is the target position and j the source position, compared as plain indices.\n"
        "- **Diagonal / previous / next share**: the weight on the same, the previous or the "
        "next position.\n"
        f"- {tokens.sinks_sentence((ckpt.source_tokenizer, ckpt.target_tokenizer))}\n"
        "- **Agreement with the argmax alignment** (cross-attention only): the share of target "
        "positions where the head's strongest source token is that of the consensus alignment "
        "(the cross-attention averaged over every layer and head).\n\n"
        "Each number is a mean over the real query rows of every sentence, so a batch weighs "
        "longer sentences more.")
source = st.radio("Sentences", list(SOURCES), format_func=SOURCES.get, key="stats_source",
                  horizontal=True)
target = state.current_target() if source == "current" else None
if source == "current":
    sentences = [state.current_source()]
else:
    if source == "pasted":
        text = st.text_area("One sentence per line (blank lines are skipped)", key="stats_lines",
                            max_chars=MAX_CHARS, height=160)
        lines = (text or "")[:MAX_CHARS].splitlines()  # the browser caps it too
        sentences = [line.strip() for line in lines if line.strip()]
    elif ckpt.metadata.get("task") == "dates":
        n = st.number_input("How many held-out dates", 1, MAX_SENTENCES, 64, key="stats_n")
        sentences = models.held_out_dates(ckpt, n)
    else:
        sentences = models.examples(ckpt)
    if len(sentences) > MAX_SENTENCES:
        st.warning(f"Only the first {MAX_SENTENCES} of {len(sentences)} sentences are used.")
        sentences = sentences[:MAX_SENTENCES]
batched = source != "current"  # the sidebar's sentence with its target; others as one batch


def every_statistic(ckpt, sentences: list[str], target, batched: bool) -> dict:
    """The sentences and translations, every statistic of every head (a sortable table and its
    exports); returns the statistics."""
    maps_list = results.sentence_maps(ckpt, sentences, target, batched)
    with st.expander(f"The {len(sentences)} sentence(s) and the model's translations"):
        st.dataframe([{"source": s, "translation": ckpt.target_tokenizer.decode(m["output_ids"])}
                      for s, m in zip(sentences, maps_list)], hide_index=True)

    stats = results.statistics(ckpt, sentences, target, batched)
    table = statistics_table(stats)
    st.subheader("Every head, every statistic")
    st.caption("Click a column header to sort. Alignment agreement is empty outside cross-attention.")
    st.dataframe(table, hide_index=True, key="stats_table", placeholder="", column_config={
        name: st.column_config.NumberColumn(label, format="%.4f")
        for name, label in STATISTICS.items()})
    export_buttons([[row[name] if row[name] is not None else float("nan") for name in STATISTICS]
                    for row in table], [head_label(r["kind"], r["layer"], r["head"]) for r in table],
                   list(STATISTICS), "head_statistics", results.current_attention(),
                   key="stats_export")
    return stats


@st.fragment
def one_statistic(ckpt, sentences: list[str], target, batched: bool, stats: dict) -> None:
    """One statistic as layers x heads and the heads that attend alike: the kind and statistic
    pickers rerun them alone (a fragment)."""
    st.subheader("One statistic, layers × heads")
    c1, c2 = st.columns(2)
    kind = kind_picker("stats_kind", c1)
    stat = c2.selectbox("Statistic", list(STATISTICS), format_func=STATISTICS.get, key="stats_stat")
    if stat in CROSS_ONLY and kind.name != "cross":
        st.info(f"**{STATISTICS[stat]}** is defined for cross-attention only: pick Cross-attention.")
    else:
        st.plotly_chart(stat_heatmap_fig(
            stats[kind.name][stat], f"{kind.label}: {STATISTICS[stat]}", colorbar_title=stat,
            zmin=0.0, zmax=1.0 if stat in SHARES else None), key="stats_heatmap")

    st.subheader(f"Which heads attend alike: {kind.label.lower()}")
    st.markdown(
        "Jensen–Shannon divergence (bits, 0 = the same pattern, 1 = disjoint keys) between every "
        "pair of heads, row by row, averaged over the query rows and then over the sentences. Heads "
        "are ordered by average-linkage hierarchical clustering, so similar heads sit together.")
    matrix = results.similarity(ckpt, sentences, kind.name, target, batched)
    labels = head_labels({kind.name: stats[kind.name]["entropy"].shape})  # layer-major
    st.plotly_chart(similarity_matrix_fig(matrix, labels, cluster_order(matrix)),
                    key="stats_similarity")
    links.follow_in_fragment()


if sentences:
    one_statistic(ckpt, sentences, target, batched,
                  every_statistic(ckpt, sentences, target, batched))
else:
    st.info("No sentences to compute over: paste some, one per line, or pick another source "
            "above.")
