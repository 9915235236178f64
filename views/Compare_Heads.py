"""Compare heads: several side by side, one head in two checkpoints, one head over training."""

from itertools import combinations

import streamlit as st

from explorer import models, results, screen, state, tokens
from explorer.choices import forget_if_not_offered
from explorer.heads import head_map, labels_of_maps
from explorer.widgets import quoted
from figures.attention_maps import attention_heatmap_fig
from figures.compare import difference_fig, side_by_side_fig
from transformer.analysis.head_stats import cosine_similarity, head_divergence
from transformer.core.kinds import KINDS, parse_head_label


def first_index(options: list, wanted: str) -> int:
    return options.index(wanted) if wanted in options else 0


@st.fragment
def side_by_side(maps: dict, labels: list[str]) -> None:
    """Several heads of the sentence: the head picker reruns this part alone (a fragment)."""
    st.header("Side by side")
    forget_if_not_offered("cmp_heads", labels)
    chosen = st.multiselect("Heads (kind, layer L, head H)", labels, key="cmp_heads",
                            default=[x for x in ("cross L0 H0", "cross L0 H1") if x in labels])
    parts = [head_map(maps, label) for label in chosen]
    if parts:
        screen.chart(st, side_by_side_fig([p[0] for p in parts], chosen, [p[1] for p in parts],
                                         [p[2] for p in parts], title="One colour scale for all"),
                        key="cmp_side")
    if len(chosen) < 2:
        st.info("Pick two or more heads to compare them.")
    else:
        (a, qa, ka), (b, _, _) = parts[:2]
        if a.shape == b.shape:
            screen.chart(st, difference_fig(a, b, qa, ka, title=f"{chosen[0]} − {chosen[1]}"),
                            key="cmp_diff")
        else:
            st.info(f"No difference map: {chosen[0]} is {a.shape[0]} × {a.shape[1]} and "
                    f"{chosen[1]} is {b.shape[0]} × {b.shape[1]}.")
        rows = [{"head A": x, "head B": y,
                 "JS divergence (bits, mean over query rows)": head_divergence(m, n) if same else None,
                 "cosine similarity": cosine_similarity(m, n) if same else None}
                for (x, (m, _, _)), (y, (n, _, _)) in combinations(zip(chosen, parts), 2)
                for same in [m.shape == n.shape]]
        st.dataframe(rows, hide_index=True, key="cmp_table", placeholder="")  # empty, not "None"
        st.caption("JS divergence: 0 = the same attention, 1 = disjoint keys. Empty cells: the two "
                   "maps have different shapes.")


def partner(active: str) -> str | None:
    """Another model to compare the active one with, of the same vocabulary (tokens.same_vocabulary:
    the maps then line up cell by cell): another checkpoint of its training run, else another
    upload, else the bundled default; None when none reads its vocabulary. Only these are
    opened to be compared (bundled checkpoints of one run share their tokenizers)."""
    run = list(models.training_checkpoints(active).values())
    uploads = [c for c in models.model_choices() if c.startswith(f"{state.UPLOADED}:")]
    candidates = dict.fromkeys([*run, *uploads, state.default_model_choice()])
    ckpt = models.checkpoint_for(active)
    return next((c for c in candidates if c != active
                 and tokens.same_vocabulary(ckpt, models.checkpoint_for(c))), None)


def round_trips(ckpt, text: str) -> bool:
    """Whether `text` is what ckpt's target tokenizer gives back from its own ids (so that
    teacher-forcing the model on the text feeds it those ids): not where a byte-level model's
    output is bytes that make no whole characters (U+FFFD), nor where the tokenizer changes it."""
    if "\ufffd" in text:
        return False
    ids = ckpt.target_tokenizer.encode(text)
    return ckpt.target_tokenizer.decode(ids) == text


@st.fragment
def two_checkpoints(source: str, target) -> None:
    """One head in two checkpoints: its pickers rerun this part alone (a fragment). A is the
    active model and B, at first, another of its vocabulary (partner); both start over when the
    active model changes."""
    st.header("The same head in two checkpoints")
    choices = models.model_choices()
    ids = list(choices)
    active = state.model_choice() if state.model_choice() in choices else state.default_model_choice()
    if st.session_state.get("cmp_ckpt_active") != active:  # another model: its own defaults
        st.session_state["cmp_ckpt_active"] = active
        for key in ("cmp_ckpt_a", "cmp_ckpt_b"):
            st.session_state.pop(key, None)
    for key in ("cmp_ckpt_a", "cmp_ckpt_b"):
        forget_if_not_offered(key, ids)
    other = partner(active)
    if other is None:
        st.info(f"No other model here reads the vocabulary of {choices[active]}. This view "
                "compares one head cell by cell, so both checkpoints must cut the sentence into "
                "the same tokens: two checkpoints of one model (its training epochs, or a copy "
                "trained further) with the same tokenizers. Upload another checkpoint of this "
                "model to compare it here; two models of different vocabularies are shown side "
                "by side, without a difference map.")
    c1, c2 = st.columns(2)
    choice_a = c1.selectbox("OpenedModel A", ids, format_func=choices.get, key="cmp_ckpt_a",
                            index=first_index(ids, active))
    choice_b = c2.selectbox("OpenedModel B", ids, format_func=choices.get, key="cmp_ckpt_b",
                            index=first_index(ids, other or active))
    ckpt_a, ckpt_b = models.checkpoint_for(choice_a), models.checkpoint_for(choice_b)
    if target is not None:  # the typed target, for both
        text, own = target, False
        maps_a = tokens.shown_maps(results.attention(ckpt_a, source, text), ckpt_a)
        maps_b = tokens.shown_maps(results.attention(ckpt_b, source, text), ckpt_b)
    else:  # A's translation, on its own ids; B on its text where the text survives B's
        text = results.translation(ckpt_a, source).text  # tokenizer, else on B's own (issue 38)
        own = not (round_trips(ckpt_a, text) and round_trips(ckpt_b, text))
        maps_a = tokens.shown_maps(results.attention(ckpt_a, source), ckpt_a)
        maps_b = tokens.shown_maps(results.attention(ckpt_b, source, None if own else text),
                                   ckpt_b)
    common = [label for label in labels_of_maps(maps_a) if label in set(labels_of_maps(maps_b))]
    forget_if_not_offered("cmp_ckpt_head", common)
    pair_label = st.selectbox("Head", common, key="cmp_ckpt_head",
                              index=first_index(common, "cross L0 H0"))
    if own:
        translated_b = results.translation(ckpt_b, source).text
        st.caption(f"Each checkpoint is teacher-forced on its own translation: A's, "
                   f"{quoted(text)}, is not text that B's tokenizer gives back as it is (its "
                   "tokens are bytes that make no whole characters, or B cuts it otherwise), "
                   f"so B is fed its own, {quoted(translated_b)}.")
    else:
        st.caption(f"Both checkpoints are teacher-forced on the same target text: `{text}`.")
    (a, qa, ka), (b, qb, kb) = head_map(maps_a, pair_label), head_map(maps_b, pair_label)
    screen.chart(st, side_by_side_fig([a, b], [f"A: {choices[choice_a]}", f"B: {choices[choice_b]}"],
                                     [qa, qb], [ka, kb], title=pair_label), key="cmp_ckpt_side")
    if (qa, ka) == (qb, kb):
        screen.chart(st, difference_fig(a, b, qa, ka, title=f"{pair_label}: A − B"),
                        key="cmp_ckpt_diff")
    else:
        st.warning(f"The two checkpoints tokenize this sentence differently (A: `{' '.join(qa)}` "
                   f"/ `{' '.join(ka)}`; B: `{' '.join(qb)}` / `{' '.join(kb)}`), so their maps are "
                   "shown side by side without a difference map.")


@st.fragment
def over_training(source: str, target) -> None:
    """One head over training: its pickers rerun this part alone (a fragment)."""
    st.header("Attention over training")
    steps = models.training_checkpoints(state.model_choice())
    if not steps:
        st.info("The active model has no bundled per-epoch checkpoints (files named "
                "`<name>.epochNN.ckpt` next to it), so there is no training to follow.")
    else:
        forget_if_not_offered("cmp_epoch", list(steps))
        epoch = st.select_slider("OpenedModel during training", list(steps), key="cmp_epoch")
        ckpt_e = models.checkpoint_for(steps[epoch])
        maps_e = tokens.shown_maps(results.attention(ckpt_e, source, target), ckpt_e)
        epoch_labels = labels_of_maps(maps_e)
        forget_if_not_offered("cmp_train_head", epoch_labels)
        train_label = st.selectbox("Head", epoch_labels, key="cmp_train_head",
                                   index=first_index(epoch_labels, "cross L0 H0"))
        translated = results.translation(ckpt_e, source).text
        st.markdown(f"At **{epoch}** the model translates the sentence as **`{translated or ' '}`**.")
        weights, q, k = head_map(maps_e, train_label)
        screen.chart(st, attention_heatmap_fig(
            weights, q, k, title=f"{train_label} at {epoch}",
            blocked=~maps_e[KINDS[parse_head_label(train_label)[0]].mask]), key="cmp_train_map")


source, target = state.current_source(), state.current_target()
maps = tokens.shown_maps(results.current_attention(), models.active_checkpoint())
labels = labels_of_maps(maps)
st.title("Compare heads")
st.markdown("Put heads next to each other on one colour scale to see where they attend alike: "
            "several heads of the sentence, one head in two checkpoints, or one head over "
            "training.")

side_by_side(maps, labels)
two_checkpoints(source, target)
over_training(source, target)
