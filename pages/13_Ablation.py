"""Head ablation: silence heads and see what the translation and its log-probability lose."""

import streamlit as st

from explorer import models
from figures.compare import head_label, importance_fig, parse_head_label, token_log_prob_fig
from transformer.ablation import ablate, all_heads, head_importance, output_ids_for


@st.cache_data(max_entries=64, show_spinner="Running the model with those heads silenced…")
def ablation(model_hash: str, source: str, target_ids, silenced: tuple, _ckpt) -> dict:
    """transformer.ablation.ablate, cached by (model hash, source, scored ids, heads)."""
    return ablate(_ckpt, source, list(silenced), target_ids=target_ids)


@st.cache_data(max_entries=16, show_spinner=False)
def importance(model_hash: str, source: str, target_ids, _ckpt, _on_progress=None) -> list:
    """transformer.ablation.head_importance, cached by (model hash, source, scored ids)."""
    return head_importance(_ckpt, source, on_progress=_on_progress, target_ids=target_ids)


def silence_kind(kind: str, labels: list[str]) -> None:
    st.session_state["abl_heads"] = [label for label in labels if label.startswith(kind + " ")]


ckpt = models.active_checkpoint()
source, target = models.current_source(), models.current_target()
target_ids = None if target is None else tuple(output_ids_for(ckpt, target))
scored = "the model's own translation" if target is None else "your typed target"
labels = [head_label(*h) for h in all_heads(ckpt.config)]
if any(label not in labels for label in st.session_state.get("abl_heads", [])):
    del st.session_state["abl_heads"]  # another model: fewer layers or heads

st.title("Head ablation")
st.markdown(
    "Silence heads (their output is multiplied by 0) and compare the greedy translation with "
    "the original one. The change in **log-probability** scores the ORIGINAL output "
    f"({scored}) under teacher forcing with the heads silenced: negative = they helped.")
chosen = st.multiselect("Heads to silence (kind, layer L, head H)", labels, key="abl_heads")
c1, c2, c3 = st.columns(3)
for column, kind in zip((c1, c2, c3), ("encoder", "decoder", "cross")):
    column.button(f"Silence every {kind} head", key=f"abl_all_{kind}", on_click=silence_kind,
                  args=(kind, labels))

silenced = tuple(parse_head_label(label) for label in chosen)
result = ablation(ckpt.content_hash, source, target_ids, silenced, ckpt)
c1, c2, c3 = st.columns(3)
c1.metric("Original translation", result["original_text"] or "(empty)")
c2.metric(f"With {len(silenced)} head(s) silenced", result["text"] or "(empty)",
          delta="changed" if result["changed"] else "unchanged", delta_color="off",
          delta_arrow="off")
c3.metric("Change in log-probability", f"{result['delta_log_prob']:+.4f}",
          help=f"Of {scored}, summed over its tokens: {result['log_prob']:.4f} with the heads "
               f"silenced, {result['original_log_prob']:.4f} without.")
st.plotly_chart(token_log_prob_fig(result["scored_tokens"], result["original_token_log_probs"],
                                   result["token_log_probs"],
                                   title=f"Log-probability of each token of {scored}"),
                key="abl_tokens")

st.header("Per-head importance")
st.markdown(f"Each head silenced **alone**: the change in log-probability of {scored}. One "
            f"teacher-forced pass per head ({len(labels)} in all).")
key = (ckpt.content_hash, source, target_ids)
if st.button("Compute per-head importance", key="abl_run_importance"):
    st.session_state["abl_importance_for"] = key
if st.session_state.get("abl_importance_for") == key:
    bar = st.progress(0.0, text="Silencing one head at a time…")
    entries = importance(ckpt.content_hash, source, target_ids, ckpt, _on_progress=lambda done,
                         total: bar.progress(done / total, text=f"Silenced {done} of {total}"))
    bar.empty()
    st.plotly_chart(importance_fig(entries, title="Change in log-probability, most harmful first"),
                    key="abl_importance")
