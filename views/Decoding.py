"""Step-by-step decoding: what the model saw and chose at every step, its beam, head ablations;
or a typed target stepped through with teacher forcing."""

import dataclasses
import inspect

import numpy as np
import streamlit as st

from explorer import heads, links, models, player, results, screen, show, state, stepping, tokens
from explorer.choices import clamp_choice, forget_if_not_offered, keep_offered
from explorer.widgets import export_buttons
from figures import decoding as figs
from figures import lens as lens_figs
from figures.contribution_maps import step_bars_fig
from transformer.inference.gradients import AUTO_STEPS, MAX_STEPS
from transformer.inference.search_ours import beam_search, length_normalised
from transformer.inference.search_transformers import GeneratedBeam

LENGTH_PENALTY = inspect.signature(beam_search).parameters["length_penalty"].default
OWN_SEARCH, OPTIONS_SEARCH = "As the sidebar's translation", "With the options here"
GRADIENTS = {m.label: m.name for m in show.GRADIENT_METHODS.values()}  # label: method

ckpt = models.active_checkpoint()
cfg, source, typed = ckpt.config, state.current_source(), state.current_target()
st.title("Step-by-step decoding")
st.markdown("The decoder writes one token per step: it reads the prefix so far, attends to the "
            "source and scores every next token. Pick a step to see what it saw and chose.")
forced = stepping.forced_mode(typed)
st.caption(stepping.what_is_decoded(source, typed, forced))
head_options = heads.labels_of_model(cfg)
keep_offered("dec_ablate", head_options)
limits = {"dec_max_len": (1, cfg.max_len, cfg.max_len), "dec_head": (0, cfg.num_heads - 1, 0),
          "dec_layer": (0, cfg.num_decoder_layers - 1, 0),
          "dec_grad_steps": (1, MAX_STEPS, AUTO_STEPS[0])}  # key: (lowest, highest, default)
for key, (low, high, default) in limits.items():
    clamp_choice(key, high, default, low=low)
beam = 1
generation = state.search_settings(ckpt)  # None: a model without a generation config
if forced:
    result = results.teacher_forced(ckpt, source, typed)
    stepping.show_text(st, "Your target, as the decoder is fed it", result,
                       tok=ckpt.target_tokenizer)
else:
    with st.expander("Decoding options", expanded=True):
        own = generation is not None and st.radio(
            "Decode", [OWN_SEARCH, OPTIONS_SEARCH], key="dec_search", horizontal=True,
            help="The sidebar's translation is decoded as the model's generation config says "
                 "(or greedily, as the sidebar's Search picks); the options decode with this "
                 "app's own greedy or beam search.") == OWN_SEARCH
        if own:
            st.caption("In force: " + "; ".join(generation.describe()) + ".")
            beam = generation.num_beams
        else:
            c1, c2, c3 = st.columns(3)
            max_len = c1.slider("Max length (tokens)", 1, cfg.max_len, key="dec_max_len")
            beam = c2.slider("Beam width (1 = greedy)", 1, 8, key="dec_beam_width")
            stop = c3.checkbox("Stop at the end token", True, key="dec_stop", disabled=beam > 1,
                               help="Unticked, greedy decoding runs to the max length. (Beam: "
                                    "always.)")
        ablate = st.multiselect("Silence heads (ablation)", head_options, key="dec_ablate")
    if own:
        def decoded(silenced=()):
            return results.generated(ckpt, source, generation, silenced=silenced)
    else:
        def decoded(silenced=()):
            return results.decode(ckpt, source, max_len, stop or beam > 1, beam,
                                  silenced=silenced)
    result = decoded(tuple(ablate))
    stepping.say_why_stopped(st, ckpt, result, where="decoding")
    if result.stopped_by == "length" and ckpt.stopped_by_budget(result) is None:
        n = len(result.token_ids)  # stopped at a length the settings chose (issue 38)
        if own:  # the sidebar's translation itself: as transformers' generate stops it
            st.info(f"This translation stopped after {n} token{'s' * (n != 1)} at the "
                    f"generation config's max length ({generation.max_new_tokens} new tokens), "
                    "before its end token, as transformers' generate stops it.",
                    icon=":material/straighten:")
        else:
            st.info(f"This decode stopped after {n} token{'s' * (n != 1)} at the Max length "
                    f"set above ({max_len} tokens), before its end token"
                    + ("" if stop or beam > 1 else " (Stop at the end token is off)")
                    + ". The sidebar's translation and the other pages are not cut by it.",
                    icon=":material/straighten:")
    if ablate:
        normal = decoded()
        left, right = st.columns(2)
        stepping.show_text(left, "With the silenced heads (used below)", result, normal,
                           tok=ckpt.target_tokenizer)
        stepping.show_text(right, "Normal: no head silenced", normal, result,
                           tok=ckpt.target_tokenizer)
    else:
        stepping.show_text(st, "Translation", result, tok=ckpt.target_tokenizer)


def layer_lens(ckpt, source: str, result, silenced: tuple, t: int, chosen: str) -> None:
    """The logit lens at step t: what every decoder layer's output would predict if it were the
    last (through the final norm and the output projection), beside the token the step chose."""
    if st.toggle("What each decoder layer predicts here (logit lens)", key="dec_lens_on",
                 help="One more pass over the decode, computed when this is on."):
        lens = results.layer_predictions(ckpt, source, result.token_ids, silenced)
        tgt_tok = ckpt.target_tokenizer
        top = [tokens.shown(tgt_tok, tgt_tok.ids_to_pieces(row)) for row in lens["top_ids"][:, t]]
        ranks = lens["chosen_rank"][:, t]
        screen.chart(st, lens_figs.layer_lens_fig(top, lens["top_probs"][:, t],
                                                 lens["chosen_probs"][:, t], ranks, chosen,
                                                 f"Step {t}: each layer's top "
                                                 f"{lens['top_ids'].shape[-1]} and the chosen "
                                                 "token"), key="dec_lens")
        first = int(np.argmax(ranks == 0)) if (ranks == 0).any() else None
        settled = (f"layer {first + 1} is the first whose own first choice it is"
                   if first is not None else "no layer ranks it first")
        st.caption(f"Every layer's output read as if it were the last: through the decoder's "
                   f"final norm and the output projection, then a softmax (nostalgebraist's "
                   f"logit lens). The step chose {chosen!r}: {settled}; the last layer's row is "
                   "the model's own distribution.")


def step_gradients(ckpt, source: str, result, typed, silenced: tuple, t: int,
                   source_tokens, prefix) -> None:
    """Gradient attributions of step t's chosen token: what each source token and each decoder
    input gave its log-probability (the Contributions page has every step at once)."""
    if not st.toggle("What each token gave this step's choice (gradients)", key="dec_grad_on",
                     help="Gradients of the chosen token's log-probability with respect to "
                          "every token's embedding, for the whole decode, computed when this "
                          "is on."):
        return
    if silenced:
        st.info("Gradients are computed for the model with every head working: clear "
                "**Silence heads** to see them for this decode.", icon=":material/info:")
        return
    forget_if_not_offered("dec_grad_method", list(GRADIENTS))
    c1, c2 = st.columns([3, 2])
    label = c1.radio("Gradient method", list(GRADIENTS), key="dec_grad_method",
                     horizontal=True)
    method = GRADIENTS[label]
    value_name = show.GRADIENT_METHODS[method].unit
    steps = show.steps_picker(c2, "dec_grad") if show.GRADIENT_METHODS[method].steps else None
    step = result.steps[t]
    shown = lambda pieces: tokens.shown(ckpt.target_tokenizer, pieces)  # noqa: E731
    foil = show.foil_picker(st, "dec_grad", ckpt.target_tokenizer,
                            [i for _, i, _ in step.top_k], step.token_id, shown=shown)
    if foil is not None:  # "why this token rather than that one": the steps up to t suffice
        grads = results.contributions(ckpt, source, None, method,
                                      output_ids=result.token_ids[:t + 1], steps=steps,
                                      foil=[None] * t + [foil])
    elif typed is not None:
        grads = results.contributions(ckpt, source, typed, method, steps=steps)
    else:
        grads = results.contributions(ckpt, source, None, method, output_ids=result.token_ids,
                                      steps=steps)
    title = f"{label} of step {t}'s token over the source and the prefix"
    if foil is not None:
        title = (f"{label}: why {shown([step.token])[0]!r} rather than "
                 f"{shown(grads['foil_tokens'][t:t + 1])[0]!r} (step {t})")
        show.contrast_caption(grads, t, shown([step.token])[0])
    screen.chart(st, step_bars_fig(source_tokens, grads["source"][t], prefix,
                                  grads["target"][t, :t + 1], value_name=value_name,
                                  title=title), key="dec_grads")
    strongest = int(np.argmax(np.abs(grads["source"][t]))) if len(source_tokens) else None
    st.caption(f"log p of the chosen token: {grads['log_probs'][t]:.3f}. "
               + (f"The source token with the largest attribution: "
                  f"{source_tokens[strongest]!r}. " if strongest is not None else "")
               + "The Contributions page shows every step, ALTI+ and raw attention beside.")


@st.fragment
def one_step(ckpt, result, forced: bool, beam: int, source: str, typed,
             silenced: tuple = ()) -> None:
    """One step of the decode and the alignment: the step, layer and head pickers and every tick
    of Play (explorer.player.advance) rerun them alone (a fragment), never the decode (it comes
    in from the page's run)."""
    cfg = ckpt.config
    src_tok, tgt_tok = ckpt.source_tokenizer, ckpt.target_tokenizer
    source_tokens = tokens.shown(src_tok, src_tok.ids_to_pieces(ckpt.encode_source(source)))
    out_tokens = tokens.shown(tgt_tok, result.tokens)  # as every page shows pieces
    steps, last = result.steps, len(result.steps) - 1
    player.apply_next_step()
    clamp_choice(player.STEP, last)
    st.subheader("One step")
    c0, c1, c2, c3 = st.columns([4, 1.3, 1, 1], vertical_alignment="bottom")
    t = c0.select_slider("Step", list(range(len(steps))), key=player.STEP,
                         format_func=lambda i: f"{i}: {out_tokens[i]}")
    playing = player.is_playing(t, last)
    player.buttons((c1, c2, c3), t, last, playing)
    step, chosen_p = steps[t], float(np.exp(steps[t].log_prob))
    prefix = tokens.shown(tgt_tok, tgt_tok.ids_to_pieces([cfg.start_id] + result.token_ids[:t]))
    st.markdown(figs.tokens_html(prefix + [out_tokens[t]], [len(prefix)]), unsafe_allow_html=True)
    top_names = tokens.shown(tgt_tok, [name for name, _, _ in step.top_k])
    top_k = [(name, i, p) for name, (_, i, p) in zip(top_names, step.top_k)]
    shown_step = dataclasses.replace(step, token=out_tokens[t], top_k=top_k)
    by_config = not forced and t in stepping.forced_steps(
        state.search_settings(ckpt) if st.session_state.get("dec_search") != OPTIONS_SEARCH
        else None, result)
    st.caption(stepping.step_caption(t, shown_step, forced, by_config))
    c1, c2, c3 = st.columns(3)
    layer = c1.selectbox("Layer", range(cfg.num_decoder_layers), key="dec_layer")
    all_heads = c3.toggle("All heads of the layer", key="dec_all_heads")
    head = c2.selectbox("Head", range(cfg.num_heads), key="dec_head", disabled=all_heads)
    where = f"layer {layer}" + ("" if all_heads else f", head {head}")
    pick = (lambda a: a[layer]) if all_heads else (lambda a: a[layer, head])  # (H, k) or (k,)
    left, right = st.columns(2)
    screen.chart(left, figs.top_k_fig(top_k, step.token_id, (out_tokens[t], step.token_id, chosen_p),
                                     f"Next-token probabilities at step {t}"), key="dec_top_k")
    screen.chart(right, figs.self_attention_row_fig(pick(step.self), prefix,
                                                   f"Self-attention over the prefix, {where}"),
                       key="dec_self")
    cross_fig = figs.heads_grid_fig if all_heads else figs.step_attention_fig
    screen.chart(st, cross_fig(pick(step.cross), source_tokens, f"Cross-attention of step {t} over "
                              f"the source, {where}"), key="dec_cross")
    weights = np.atleast_2d(pick(step.cross)).mean(axis=0)  # one head, or the mean over heads
    st.markdown(figs.highlighted_source_html(source_tokens, weights), unsafe_allow_html=True)
    shaded_by = "the mean over heads" if all_heads else "this head"
    st.caption(f"The source shaded by the weight of {shaded_by} (relative to the largest); bold: the 3 "
               "most attended. Hover for the weight.")
    layer_lens(ckpt, source, result, silenced, t, out_tokens[t])
    step_gradients(ckpt, source, result, typed if forced else None, silenced, t,
                   source_tokens, prefix)

    if beam > 1:
        left, right = st.columns(2)
        left.markdown(f"**The beam after step {t}** (hypotheses alive, log-probability)")
        alive = [(tokens.shown(tgt_tok, pieces), lp) for pieces, lp in result.beam_steps[t]]
        left.dataframe(figs.beam_table(alive), key="dec_beam_step", hide_index=True)
        if isinstance(result, GeneratedBeam):  # transformers' beam scorer's own scores
            right.markdown(f"**Final n-best** (score = log-prob / length^"
                           f"{state.search_settings(ckpt).length_penalty:g}, as transformers "
                           "scores a finished hypothesis)")
            rows = [(tokens.shown(tgt_tok, h.tokens), h.log_prob, score)
                    for h, score in zip(result.hypotheses, result.sequence_scores)]
        else:
            right.markdown(f"**Final n-best** (score = log-prob / ((5 + length) / 6)^"
                           f"{LENGTH_PENALTY})")
            rows = [(tokens.shown(tgt_tok, h.tokens), h.log_prob,
                     length_normalised(h.log_prob, len(h.token_ids), LENGTH_PENALTY))
                    for h in result.hypotheses]
        right.dataframe(figs.nbest_table(rows), key="dec_nbest", hide_index=True)

    st.subheader("Alignment: every step's cross-attention")
    cross = result.cross_attention()[layer]  # (H, T, N)
    matrix = cross.mean(axis=0) if all_heads else cross[head]  # as "All heads of the layer" says
    which = f"layer {layer}, " + (f"mean of its {len(cross)} heads" if all_heads else f"head {head}")
    screen.chart(st, figs.alignment_fig(matrix, out_tokens, source_tokens, f"Alignment, {which}"),
                    key="dec_alignment")
    export_buttons(matrix, result.tokens, source_tokens, f"alignment {which}",
                   results.attention(ckpt, source, typed if forced else None), key="dec_export")
    st.caption("NPZ: every map of the teacher-forced pass on " + (
        "your target." if forced else "the sidebar's translation (no head silenced)."))
    links.follow_in_fragment()
    player.advance(t, playing)  # last, so the step stays on screen while it waits


one_step(ckpt, result, forced, beam, source, typed, () if forced else tuple(ablate))
