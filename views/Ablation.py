"""Head ablation: silence heads and see what the translation and its log-probability lose."""

import streamlit as st

from explorer import heads, models, results, screen, state, tokens
from explorer.choices import forget_if_not_offered
from figures.compare import importance_fig, token_log_prob_fig
from transformer.core.kinds import KIND_NAMES, parse_head_label
from transformer.inference.ablation import output_ids_for


def silence_kind(kind: str, labels: list[str]) -> None:
    st.session_state["abl_heads"] = [label for label in labels
                                     if parse_head_label(label)[0] == kind]


ckpt = models.active_checkpoint()
source, target = state.current_source(), state.current_target()
target_ids = None if target is None else tuple(output_ids_for(ckpt, target))
scored = "the model's own translation" if target is None else "your typed target"
labels = heads.labels_of_model(ckpt.config)
settings = state.search_settings(ckpt)
decoded_as = "greedily" if settings is None else f"as the sidebar's translation ({settings.method})"
forget_if_not_offered("abl_heads", labels)  # another model: fewer layers or heads

st.title("Head ablation")
st.markdown(
    "Silence heads (their output is multiplied by 0) and compare the translation, decoded "
    f"{decoded_as}, with the original one. The change in **log-probability** scores the ORIGINAL output "
    f"({scored}) under teacher forcing with the heads silenced: negative = they helped.")


@st.fragment
def silenced(ckpt, source: str, target_ids, scored: str, labels: list[str]) -> None:
    """The heads picked, what silencing them changes, per-head importance: a pick or a button
    reruns this part alone (a fragment)."""
    chosen = st.multiselect("Heads to silence (kind, layer L, head H)", labels, key="abl_heads")
    c1, c2, c3 = st.columns(3)
    for column, kind in zip((c1, c2, c3), KIND_NAMES):
        column.button(f"Silence every {kind} head", key=f"abl_all_{kind}", on_click=silence_kind,
                      args=(kind, labels))

    result = results.ablation(ckpt, source, target_ids, chosen)
    c1, c2, c3 = st.columns(3)
    c1.metric("Original translation", result["original_text"] or "(empty)")
    c2.metric(f"With {len(chosen)} head(s) silenced", result["text"] or "(empty)",
              delta="changed" if result["changed"] else "unchanged", delta_color="off",
              delta_arrow="off")
    c3.metric("Change in log-probability", f"{result['delta_log_prob']:+.4f}",
              help=f"Of {scored}, summed over its tokens: {result['log_prob']:.4f} with the heads "
                   f"silenced, {result['original_log_prob']:.4f} without.")
    screen.chart(st, token_log_prob_fig(tokens.shown(ckpt.target_tokenizer, result["scored_tokens"]),
                                       result["original_token_log_probs"],
                                       result["token_log_probs"],
                                       title=f"Log-probability of each token of {scored}"),
                    key="abl_tokens")

    st.header("Per-head importance")
    st.markdown(f"Each head silenced **alone**: the change in log-probability of {scored}. One "
                f"teacher-forced pass per head ({len(labels)} in all).")
    asked = (ckpt.content_hash, source, target_ids)  # what the button computes for
    if st.button("Compute per-head importance", key="abl_run_importance"):
        st.session_state["abl_importance_for"] = asked
    if st.session_state.get("abl_importance_for") == asked:
        entries = results.importance(ckpt, source, target_ids)  # with its progress bar
        screen.chart(st, importance_fig(entries, title="Change in log-probability, most harmful first"),
                        key="abl_importance")


silenced(ckpt, source, target_ids, scored, labels)
