"""What the attention views draw: the attention weights, or weight × value norm (issue 27).

Every attention view (Attention maps and its model view, Linked view, Aggregations, Token view)
offers the same choice, a horizontal radio with its own key per page ("attn_show", ...).
Weight × value norm is Kobayashi et al.'s measure (EMNLP 2020, "Attention is not only a
weight"): per head ||alpha^h_ij f_h(x_j)||, f_h(x) = (x W_V^h + b_V^h) W_O^h, the size of what
key j adds to query i's output, from explorer.results.current_value_norms (the same shapes as
the weights, on a scale of its own: not a probability, rows do not sum to 1).
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from transformer.core.text import BYTE_LEVEL_START, WORD_START
from transformer.inference.contributions import METHODS

from . import results
from .choices import forget_if_not_offered

WEIGHTS, VALUE_NORM = "Weights", "Weight × value norm"
# The contribution methods the Contributions page offers (their records: label, unit, signed,
# about), and those the Decoding page's gradients offer
PAGE_METHODS = {m.name: m for m in METHODS.values() if m.contributions_page}
GRADIENT_METHODS = {m.name: m for m in METHODS.values() if m.gradient}
OPTIONS = (WEIGHTS, VALUE_NORM)
NORM_NAME = "‖α f(x)‖"  # a colour bar's title, a hover's name for one head's value
SUMMED_NAME = "‖Σₕ α f(x)‖"  # the same of the head-summed map
PAPER = ("Kobayashi et al. 2020, *Attention is not only a weight: analyzing Transformers with "
         "vector norms*")
CAPTION = (
    "**Weight × value norm** ({paper}): each cell is ‖αᵢⱼ f(xⱼ)‖ = αᵢⱼ ‖f(xⱼ)‖, with "
    "f(x) = (x W_V + b_V) W_O the key's value vector through this head's slice of the output "
    "projection: how much key *j* actually adds to query *i*'s output, not only how much it is "
    "looked at. A large weight on a key whose transformed value is short adds little. The "
    "numbers are lengths in the model's hidden space, on their own colour scale (not 0 to 1; "
    "rows do not sum to 1).")


def picker(key: str, container=st) -> bool:
    """The page's "Show" radio (Weights | Weight × value norm); True when value norms are
    picked. A stale value under the key (a link, an old session) starts it on Weights again."""
    forget_if_not_offered(key, OPTIONS)
    return container.radio("Show", OPTIONS, horizontal=True, key=key,
                           help="Weights: the attention α (rows sum to 1). Weight × value norm: "
                                "‖α f(x)‖, the size of what each key adds to the query's "
                                "output (Kobayashi et al. 2020).") == VALUE_NORM


def maps(weights: dict, value_norm: bool) -> dict:
    """The maps a view draws: `weights` (results.current_attention's) as they are, or the
    sidebar's sentence's value norms (results.current_value_norms) when value_norm."""
    return results.current_value_norms() if value_norm else weights


def caption(container=st) -> None:
    """What value-norm maps are, in words, citing the paper."""
    container.caption(CAPTION.format(paper=PAPER))


def largest(values) -> float:
    """The top of a value-norm colour scale: the largest value (a positive number, 1e-9 for an
    all-zero map, so Plotly has a range)."""
    values = np.asarray(values, dtype=float)
    top = float(np.nanmax(values)) if values.size else 0.0
    return top if np.isfinite(top) and top > 0 else 1e-9


def npz_name(value_norm: bool) -> str:
    """The file name of a view's NPZ export of every map it draws from."""
    return "value_norm_maps.npz" if value_norm else "attention_maps.npz"


# ------------------------------------------------------------------ integrated gradients' steps
def steps_picker(container, prefix: str) -> int | None:
    """Integrated gradients' steps, as the Contributions and Decoding pages offer them: "until
    complete" (None: transformer.inference.gradients.AUTO_STEPS in turn until every row's
    completeness gap is small; the default, so that the answer is not mostly error), or a
    number the user types. Keys: <prefix>_steps_auto (the toggle), <prefix>_steps (which the
    page clamps to 1 .. MAX_STEPS on every run, drawn or not)."""
    from transformer.inference.gradients import AUTO_STEPS, COMPLETE_WITHIN, MAX_STEPS

    auto = container.toggle("Steps until complete", value=True, key=f"{prefix}_steps_auto",
                            help=f"Double the steps ({', '.join(map(str, AUTO_STEPS))}) until "
                                 "every output token's attributions sum to its change in "
                                 f"log-probability within {COMPLETE_WITHIN:.0%}; off, type "
                                 "the steps.")
    if auto:
        return None
    return container.number_input("Integrated gradients' steps", 1, MAX_STEPS, step=1,
                                  key=f"{prefix}_steps",
                                  help="Points on the path from the baseline to the sentence, "
                                       "all computed in one batch; more steps, a smaller "
                                       "completeness gap.")


NO_CONTRAST = "log p(token)"  # the contrast pickers' first option: no foil
RUNNER_UP = "log p(token) − log p(runner-up)"  # every step against its most probable other

# Activation patching's choices (the Interventions page): how the corrupted source is made, and
# what is scored.
CORRUPT_TYPED = "Type the corrupted source"
CORRUPT_NOISE = "Add noise to source tokens"
PATCH_LOG_P = "log p(token)"
PATCH_DIFFERENCE = "log p(token) − log p(the corrupted run's token)"


def runner_ups(top_ids: np.ndarray, output_ids) -> list[int]:
    """Each step's most probable token other than the one it output: top_ids (T, k), the
    model's own top-k of each step, most probable first (k >= 2)."""
    return [int(next(i for i in row if int(i) != int(chosen)))
            for row, chosen in zip(top_ids, output_ids)]


def foil_picker(container, prefix: str, tokenizer, alternatives, chosen: int,
                shown=lambda pieces: pieces) -> int | None:
    """The foil of one output step, for a contrastive attribution ("why this token rather than
    that one"): None (the token's log-probability alone), one of the step's most probable other
    tokens (alternatives: ids, most probable first; the chosen one left out), or a token typed
    (its first piece). Keys <prefix>_foil (the pick) and <prefix>_foil_typed (the text, which
    wins when it names a token). shown: how pieces are written on the pages."""
    options = [None] + [int(i) for i in alternatives if int(i) != int(chosen)]
    forget_if_not_offered(f"{prefix}_foil", options)
    left, right = container.columns(2)
    names = dict(zip(options[1:], shown(tokenizer.ids_to_pieces(options[1:]))))
    picked = left.selectbox(
        "Rather than", options, key=f"{prefix}_foil",
        format_func=lambda i: "— (no contrast)" if i is None else f"{names[i]!r} (id {i})",
        help="A contrastive attribution explains log p(token) − log p(this one): what made the "
             "model write its token rather than the other (Yin & Neubig 2022). The options are "
             "the step's most probable other tokens.")
    typed = right.text_input("…or type one", key=f"{prefix}_foil_typed", max_chars=64,
                             help="A word or piece of the target language: its first piece "
                                  "(after a bare word-start mark) is the foil.").strip()
    if not typed:
        return picked
    ids = tokenizer.encode(typed)
    while len(ids) > 1 and tokenizer.ids_to_pieces(ids[:1])[0] in (WORD_START, BYTE_LEVEL_START):
        ids = ids[1:]  # a bare word-start piece ("▁" before "2"): the piece after it
    if not ids:
        right.warning("That text gives no piece of the target vocabulary.",
                      icon=":material/warning:")
        return picked
    if int(ids[0]) == int(chosen):
        right.warning(f"{shown(tokenizer.ids_to_pieces(ids[:1]))[0]!r} is the step's own "
                      "token: type another.", icon=":material/warning:")
        return picked
    if len(ids) > 1:
        right.caption(f"It is {len(ids)} pieces; the foil is the first, "
                      f"{shown(tokenizer.ids_to_pieces(ids[:1]))[0]!r}.")
    return int(ids[0])


def contrast_caption(result: dict, t: int, out_token: str, container=st) -> None:
    """What a contrastive row t attributes: the two log-probabilities and their difference."""
    foil = result["foil_tokens"][t]
    container.caption(
        f"Why {out_token!r} rather than {foil!r}: log p({out_token!r}) = "
        f"{result['log_probs'][t]:.3f}, log p({foil!r}) = {result['foil_log_probs'][t]:.3f}; "
        f"the attributions explain their difference, {result['scores'][t]:.3f} (the difference "
        "of their logits). Positive: the token pushed towards the model's choice.")


def completeness_caption(result: dict, out_tokens, container=st) -> None:
    """What an integrated-gradients result's sums miss (its completeness gap), and with how
    many steps; a warning when even the most steps left a row's gap large."""
    from transformer.inference.gradients import COMPLETE_WITHIN

    gaps = np.abs(result["completeness_gap"])
    worst = int(np.argmax(gaps))
    contrast = "scores" in result  # of log p(token) - log p(foil)
    now, before = ("scores", "baseline_scores") if contrast else ("log_probs",
                                                                  "baseline_log_probs")
    change = result[now][worst] - result[before][worst]
    tried = result.get("steps_tried")
    how = (f"with {result['steps']} steps" if not tried or len(tried) == 1 else
           f"with {result['steps']} steps (after {', '.join(map(str, tried[:-1]))}, whose "
           f"gaps were larger)")
    text = (f"Completeness: {how} each row's sum is within {gaps[worst]:.2g} of "
            + ("the difference's change from the baseline" if contrast else
               "log p(token) − log p(token | baseline)") + "; the farthest is step "
            f"{worst} ({out_tokens[worst]!r}), whose change is {change:.3g}. The path's steps "
            "are a midpoint rule: where the log-probability turns sharply along the path, more "
            "steps shrink the gap.")
    if result.get("complete", True) or not tried:
        container.caption(text)
    else:
        container.warning(text + f" Even {result['steps']} steps leave a gap above "
                          f"{COMPLETE_WITHIN:.0%} of the change: read the attributions of that "
                          "row as approximate.", icon=":material/warning:")
