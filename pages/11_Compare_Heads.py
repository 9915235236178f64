"""Compare heads: several side by side, one head in two checkpoints, one head over training."""

from itertools import combinations

import streamlit as st

from explorer import models, state
from figures.attention import attention_heatmap_fig
from explorer.models import training_run
from figures.compare import difference_fig, head_labels, parse_head_label, side_by_side_fig
from transformer.head_stats import cosine_similarity, head_divergence

SIDES = {"encoder": ("source_tokens", "source_tokens"),  # kind: (query tokens, key tokens)
         "decoder": ("target_tokens", "target_tokens"),
         "cross": ("target_tokens", "source_tokens")}


def head_map(maps, label):
    """(weights (q, k), query tokens, key tokens) of the head a label names."""
    kind, layer, head = parse_head_label(label)
    return maps[kind][layer, head], list(maps[SIDES[kind][0]]), list(maps[SIDES[kind][1]])


def labels_of(maps) -> list[str]:
    return head_labels({kind: maps[kind].shape[:2] for kind in SIDES})


def keep_valid(key: str, options: list) -> None:
    """Back to the default when the current model no longer offers a choice (fewer heads)."""
    value = st.session_state.get(key)
    values = value if isinstance(value, list) else [value]
    if value is not None and any(v not in options for v in values):
        del st.session_state[key]


def first_index(options: list, wanted: str) -> int:
    return options.index(wanted) if wanted in options else 0


source, target = models.current_source(), models.current_target()
maps = models.current_attention()
labels = labels_of(maps)
st.title("Compare heads")

st.header("Side by side")
keep_valid("cmp_heads", labels)
chosen = st.multiselect("Heads (kind, layer L, head H)", labels, key="cmp_heads",
                        default=[x for x in ("cross L0 H0", "cross L0 H1") if x in labels])
parts = [head_map(maps, label) for label in chosen]
if parts:
    st.plotly_chart(side_by_side_fig([p[0] for p in parts], chosen, [p[1] for p in parts],
                                     [p[2] for p in parts], title="One colour scale for all"),
                    key="cmp_side")
if len(chosen) < 2:
    st.info("Pick two or more heads to compare them.")
else:
    (a, qa, ka), (b, _, _) = parts[:2]
    if a.shape == b.shape:
        st.plotly_chart(difference_fig(a, b, qa, ka, title=f"{chosen[0]} − {chosen[1]}"),
                        key="cmp_diff")
    else:
        st.info(f"No difference map: {chosen[0]} is {a.shape[0]} × {a.shape[1]} and "
                f"{chosen[1]} is {b.shape[0]} × {b.shape[1]}.")
    rows = [{"head A": x, "head B": y,
             "JS divergence (bits, mean over query rows)": head_divergence(m, n) if same else None,
             "cosine similarity": cosine_similarity(m, n) if same else None}
            for (x, (m, _, _)), (y, (n, _, _)) in combinations(zip(chosen, parts), 2)
            for same in [m.shape == n.shape]]
    st.dataframe(rows, hide_index=True)
    st.caption("JS divergence: 0 = the same attention, 1 = disjoint keys. Empty cells: the two "
               "maps have different shapes.")

st.header("The same head in two checkpoints")
choices = models.model_choices()
bundled = [p.name for p in models.bundled_checkpoints().values()]
run = training_run(bundled, models.default_model_choice().partition(":")[2])
ids = list(choices)
c1, c2 = st.columns(2)
choice_a = c1.selectbox("Checkpoint A", ids, format_func=choices.get, key="cmp_ckpt_a",
                        index=first_index(ids, "bundled:" + run[0][1]) if run else 0)
choice_b = c2.selectbox("Checkpoint B", ids, format_func=choices.get, key="cmp_ckpt_b",
                        index=first_index(ids, models.default_model_choice()))
ckpt_a, ckpt_b = models.checkpoint_for(choice_a), models.checkpoint_for(choice_b)
text = target if target is not None else models.translation(
    ckpt_a.content_hash, source, ckpt_a).text
maps_a = models.attention_maps(ckpt_a.content_hash, source, text, ckpt_a)
maps_b = models.attention_maps(ckpt_b.content_hash, source, text, ckpt_b)
common = [label for label in labels_of(maps_a) if label in set(labels_of(maps_b))]
keep_valid("cmp_ckpt_head", common)
pair_label = st.selectbox("Head", common, key="cmp_ckpt_head",
                          index=first_index(common, "cross L0 H0"))
st.caption(f"Both checkpoints are teacher-forced on the same target text: `{text}`.")
(a, qa, ka), (b, qb, kb) = head_map(maps_a, pair_label), head_map(maps_b, pair_label)
st.plotly_chart(side_by_side_fig([a, b], [f"A: {choices[choice_a]}", f"B: {choices[choice_b]}"],
                                 [qa, qb], [ka, kb], title=pair_label), key="cmp_ckpt_side")
if (qa, ka) == (qb, kb):
    st.plotly_chart(difference_fig(a, b, qa, ka, title=f"{pair_label}: A − B"),
                    key="cmp_ckpt_diff")
else:
    st.warning(f"The two checkpoints tokenize this sentence differently (A: `{' '.join(qa)}` "
               f"/ `{' '.join(ka)}`; B: `{' '.join(qb)}` / `{' '.join(kb)}`), so their maps are "
               "shown side by side without a difference map.")

st.header("Attention over training")
active = st.session_state.get(state.MODEL, models.default_model_choice())
origin, _, name = active.partition(":")
run = training_run(bundled, name) if origin == "bundled" else []
if not run:
    st.info("The active model has no bundled per-epoch checkpoints (files named "
            "`<name>.epochNN.ckpt` next to it), so there is no training to follow.")
else:
    steps = {("final" if epoch is None else f"epoch {epoch}"): n for epoch, n in run}
    keep_valid("cmp_epoch", list(steps))
    epoch = st.select_slider("Checkpoint during training", list(steps), key="cmp_epoch")
    ckpt_e = models.checkpoint_for("bundled:" + steps[epoch])
    maps_e = models.attention_maps(ckpt_e.content_hash, source, target, ckpt_e)
    epoch_labels = labels_of(maps_e)
    keep_valid("cmp_train_head", epoch_labels)
    train_label = st.selectbox("Head", epoch_labels, key="cmp_train_head",
                               index=first_index(epoch_labels, "cross L0 H0"))
    translated = models.translation(ckpt_e.content_hash, source, ckpt_e).text
    st.markdown(f"At **{epoch}** the model translates the sentence as **`{translated or ' '}`**.")
    weights, q, k = head_map(maps_e, train_label)
    st.plotly_chart(attention_heatmap_fig(
        weights, q, k, title=f"{train_label} at {epoch}",
        blocked=~maps_e[f"{parse_head_label(train_label)[0]}_mask"]), key="cmp_train_map")
