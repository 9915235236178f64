"""Head statistics: what every head does, in numbers, over one sentence or a batch of them."""

import numpy as np
import streamlit as st

from explorer import alignments, links, models, results, screen, state, tokens
from explorer.widgets import export_buttons, kind_picker
from figures.aer_bars import aer_ranking_fig
from figures.head_grids import similarity_matrix_fig, stat_heatmap_fig
from transformer.analysis.head_stats import CROSS_ONLY, SHARES, STATISTICS, cluster_order, statistics_table
from transformer.core.kinds import head_label, head_labels

SOURCES = {"current": "The sidebar's sentence", "held_out": "The task's held-out set",
           "pasted": "Sentences I paste"}
MAX_SENTENCES = 512
AUTO_SIMILARITY_VALUES = 3 * 10**8  # map values compared pairwise (~3 s here): more waits for a
# toggle (pegasus-xsum's 256 heads at 400 tokens: 215 s)
MAX_CHARS = 50_000
ALIGNMENT_COLUMNS = {"aer": "AER", "aer_precision": "Alignment precision",
                     "aer_recall": "Alignment recall"}  # from the gold (Alignment quality)
GOLDS = {"built_in": "The dates task's (built in)", "uploaded": "Mine (uploaded)"}


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


def every_statistic(ckpt, sentences: list[str], target, batched: bool,
                    alignment: alignments.Scores | None) -> dict:
    """The sentences and translations, every statistic of every head (a sortable table and its
    exports), with the cross-attention heads' AER, precision and recall against the gold of
    Alignment quality when there is one; returns the statistics."""
    maps_list = results.sentence_maps(ckpt, sentences, target, batched)
    with st.expander(f"The {len(sentences)} sentence(s) and the model's translations"):
        st.dataframe([{"source": s, "translation": ckpt.target_tokenizer.decode(m["output_ids"])}
                      for s, m in zip(sentences, maps_list)], hide_index=True)

    stats = results.statistics(ckpt, sentences, target, batched)
    table = statistics_table(stats)
    columns = dict(STATISTICS)
    if alignment is not None:
        columns.update(ALIGNMENT_COLUMNS)
        for row in table:
            for name, stat in (("aer", "aer"), ("aer_precision", "precision"),
                               ("aer_recall", "recall")):
                row[name] = (float(alignment.stats[stat][row["layer"], row["head"]])
                             if row["kind"] == "cross" else None)
    st.subheader("Every head, every statistic")
    st.caption("Click a column header to sort. Alignment agreement is empty outside cross-attention."
               + (f" AER, alignment precision and recall (cross-attention only) are measured "
                  f"against the gold of Alignment quality below ({alignment.scored} sentence "
                  f"pairs), not these sentences." if alignment is not None else ""))
    st.dataframe(table, hide_index=True, key="stats_table", placeholder="", column_config={
        name: st.column_config.NumberColumn(label, format="%.4f")
        for name, label in columns.items()})
    export_buttons([[row[name] if row[name] is not None else float("nan") for name in columns]
                    for row in table], [head_label(r["kind"], r["layer"], r["head"]) for r in table],
                   list(columns), "head_statistics", results.current_attention(),
                   key="stats_export", figure=False)
    return stats


def uploaded_gold(ckpt) -> alignments.Scores | None:
    """The upload form (sentence pairs and Pharaoh alignments, files or pasted), scored; a
    refusal is shown as its error and gives None."""
    characters = (" For this model the target words are the target's characters (spaces "
                  "dropped), as in the built-in gold: 2021-03-05 has target words 0 to 9."
                  if alignments.is_dates_model(ckpt) else "")
    st.markdown("Sentence pairs, one `source<TAB>target` per line, and their gold alignments in "
                "Pharaoh format, one line per pair: `0-0 1-2 2?1` (source word - target word, "
                "counted from 0 in the whitespace-separated words; `-` sure, `?` possible). An "
                "uploaded file replaces the text box beside it." + characters)
    c1, c2 = st.columns(2)
    pairs_file = c1.file_uploader("Sentence pairs (TSV)", type=["tsv", "txt"], key="align_pairs_file")
    pairs = c1.text_area("or paste them", key="align_pairs", height=140,
                         max_chars=alignments.MAX_ALIGNMENT_BYTES)
    gold_file = c2.file_uploader("Alignments (Pharaoh)", type=["txt", "align", "wa", "talp"],
                                 key="align_gold_file")
    gold = c2.text_area("or paste them", key="align_pharaoh", height=140,
                        max_chars=alignments.MAX_ALIGNMENT_BYTES)
    pairs = pairs_file.getvalue() if pairs_file is not None else (pairs or "")
    gold = gold_file.getvalue() if gold_file is not None else (gold or "")
    if not pairs.strip() or not gold.strip():
        st.info("Give both the sentence pairs and their alignments to score the heads on them.")
        return None
    scores, error = alignments.scores_or_error(alignments.uploaded, ckpt, gold, pairs)
    if error is not None:
        st.error(error, icon=":material/error:")
    return scores


def alignment_quality(ckpt) -> alignments.Scores | None:
    """The section that ranks cross-attention heads by AER against a gold alignment: the
    dates task's for a model trained on it, or one uploaded; returns the scores shown."""
    st.subheader("Alignment quality")
    st.markdown(
        "How well each cross-attention head aligns words. A head's alignment links each target "
        "word to the source word it attends to most (the argmax of its row, special tokens "
        "hidden and subword pieces merged into words as the app merges them: a word's row is "
        "the mean of its pieces' rows, a source word's column the sum of its pieces'), with "
        "the gold target teacher-forced. The **alignment error rate** (AER, Och & Ney 2000) "
        "compares those links A with the gold's sure links S and possible links P (P includes "
        "S): AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|), 0 = every sure link found and nothing "
        "claimed outside P; precision = |A∩P| / |A|, recall = |A∩S| / |S|, the counts summed "
        "over the sentences.")
    source = "uploaded"
    if alignments.is_dates_model(ckpt):
        source = st.radio("Gold alignments", list(GOLDS), format_func=GOLDS.get, key="align_source",
                          horizontal=True)
    if source == "built_in":
        st.caption(f"Gold: {alignments.built_in_description(ckpt)}.")
        scores, error = alignments.scores_or_error(alignments.built_in, ckpt)
        if error is not None:
            st.error(error, icon=":material/error:")
    else:
        with st.container(border=True):
            scores = uploaded_gold(ckpt)
    if scores is None:
        return None
    if scores.left_out:
        st.warning(f"{len(scores.left_out)} sentence pair(s) left out, their words not the "
                   f"alignment's: " + "; ".join(scores.left_out[:5])
                   + ("; ..." if len(scores.left_out) > 5 else ""), icon=":material/warning:")
    labels = [head_label("cross", h.layer, h.head) for h in scores.ranked]
    st.caption(f"Every cross-attention head, best aligner first, over {scores.scored} sentence "
               f"pairs (ties broken by recall).")
    st.dataframe([{"rank": rank, "head": label, "AER": h.aer, "precision": h.precision,
                   "recall": h.recall}
                  for rank, (label, h) in enumerate(zip(labels, scores.ranked), start=1)],
                 hide_index=True, key="align_ranking", column_config={
                     name: st.column_config.NumberColumn(name, format="%.4f")
                     for name in ("AER", "precision", "recall")})
    screen.chart(st, aer_ranking_fig(labels, [h.aer for h in scores.ranked],
                                    [h.precision for h in scores.ranked],
                                    [h.recall for h in scores.ranked]), key="align_chart")
    return scores


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
        screen.chart(st, stat_heatmap_fig(
            stats[kind.name][stat], f"{kind.label}: {STATISTICS[stat]}", colorbar_title=stat,
            zmin=0.0, zmax=1.0 if stat in SHARES else None), key="stats_heatmap")

    st.subheader(f"Which heads attend alike: {kind.label.lower()}")
    st.markdown(
        "Jensen–Shannon divergence (bits, 0 = the same pattern, 1 = disjoint keys) between every "
        "pair of heads, row by row, averaged over the query rows and then over the sentences. Heads "
        "are ordered by average-linkage hierarchical clustering, so similar heads sit together.")
    heads = int(np.prod(stats[kind.name]["entropy"].shape))
    longest = max(len(ckpt.encode_source(s)) for s in sentences)
    work = heads * heads * longest * longest * len(sentences)  # values compared, about
    if work > AUTO_SIMILARITY_VALUES and not st.toggle(
            f"Compare every pair of the {heads} heads (about {work / 1e8:,.0f} s here)",
            key="stats_similarity_on",
            help="Every pair of heads compared row by row: for a model this size and a sentence "
                 "this long it takes a while, so it runs when asked."):
        st.caption(f"{heads} heads make {heads * heads:,} pairs of {longest} x {longest} maps: "
                   "switch it on to compute them.")
    else:
        matrix = results.similarity(ckpt, sentences, kind.name, target, batched)
        labels = head_labels({kind.name: stats[kind.name]["entropy"].shape})  # layer-major
        screen.chart(st, similarity_matrix_fig(matrix, labels, cluster_order(matrix)),
                        key="stats_similarity")
    links.follow_in_fragment()


if sentences:
    table_slot, statistic_slot = st.container(), st.container()
else:
    st.info("No sentences to compute over: paste some, one per line, or pick another source "
            "above.")
alignment = alignment_quality(ckpt)  # drawn last, scored first: the table shows its AER
if sentences:
    with table_slot:
        stats = every_statistic(ckpt, sentences, target, batched, alignment)
    with statistic_slot:
        one_statistic(ckpt, sentences, target, batched, stats)
