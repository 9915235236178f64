"""What a checkpoint computes for the pages, cached across reruns and sessions.

Every cached function is st.cache_data with hash_funcs that key an OpenedModel by its content hash
(its files' digest, never its weights) and a GenerationSettings by its repr (`cached`). A helper
takes the checkpoint and its inputs and is cached itself; where an input comes from the session
(the shared translation's ids, the search settings), the public helper reads it and hands it to
the cached one (_attention, _decode, ...), so the key holds it. Changing a layer, head or kind
re-slices cached arrays and never re-runs the model, and no page handles hashes.

A model that computes NaN or infinity for the sentence (transformer.inference.numerics: only a
model built through the API can, the load-time bound refuses such files) raises a
NumericalError; every public helper shows it as the sentence it is (st.error) and ends the
page's run there (st.stop), so no page draws a map of NaN and none shows a traceback.
"""

from __future__ import annotations

import functools
import threading

import numpy as np
import streamlit as st

from transformer import OpenedModel
from transformer.analysis.head_stats import batch_statistics, head_similarity_matrix
from transformer.core.kinds import KIND_NAMES, head_masks, parse_head_label
from transformer.inference import batch
from transformer.inference.ablation import ablate, head_importance
from transformer.inference.compiled import Watch
from transformer.inference.forward import forward
from transformer.inference.generation_config import GenerationSettings
from transformer.inference.numerics import NumericalError, check_forward
from transformer.inference.search_ours import greedy_decode_batch
from transformer.tokenizers.base import TokenizerError

from . import models, state

MAX_RESULTS = 256
MAX_STOPPED = 32  # translations a user stopped, kept (over all sessions) until asked again
_STOPPED: dict[tuple, object] = {}  # (kind, content hash, source, options) -> the stopped decode


def cached(**options):
    """st.cache_data keyed by an OpenedModel's content hash and a GenerationSettings' repr."""
    return st.cache_data(hash_funcs={OpenedModel: lambda ckpt: ckpt.content_hash,
                                     GenerationSettings: repr}, **options)


def _said(function):
    """`function`, with a NumericalError (or a TokenizerError: a tokenizer that cannot read
    the typed text, its library's panic included) shown as its error where the caller draws
    (the sidebar, or the page), after which this run of the page stops: nothing below it draws
    the numbers. The error is not cached: the next run computes again, and says it again."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except (NumericalError, TokenizerError) as err:
            st.error(str(err), icon=":material/error:")
            st.stop()
    return wrapper


# ------------------------------------------------------------------ one sentence
@_said
def attention(ckpt: OpenedModel, source: str, target: str | None = None,
              details: bool = False) -> dict:
    """OpenedModel.attention (every map of one teacher-forced pass), cached. With target=None
    the decoder is fed the ids of `translation(ckpt, source)`: the translation the sidebar and
    every page show, never one decoded again (under the time budget it could stop elsewhere)."""
    output_ids = None if target is not None else _ids(translation(ckpt, source).token_ids)
    return _attention(ckpt, source, target, output_ids, details)


@cached(max_entries=MAX_RESULTS, show_spinner="Running the model…")
def _attention(ckpt: OpenedModel, source: str, target: str | None, output_ids: tuple | None,
               details: bool) -> dict:
    return ckpt.attention(source, target, details=details, output_ids=output_ids)


@_said
def current_attention(details: bool = False) -> dict:
    """Attention maps for the sidebar's model, source and target (see OpenedModel.attention)."""
    return attention(models.active_checkpoint(), state.current_source(), state.current_target(),
                     details)


@_said
def current_details(kind: str, layer: int) -> dict:
    """The sidebar's sentence's q, k, v and scores of one kind and layer, "<kind>_q", "_k",
    "_v", "_scores" (1, H, ...), and T5's "encoder_position_bias"/"decoder_position_bias"
    (H, len, len): what a page showing one layer needs (OpenedModel.attention with
    details=(kind, layer)), cached per layer without the maps, which current_attention holds."""
    ckpt, source = models.active_checkpoint(), state.current_source()
    target = state.current_target()
    output_ids = None if target is not None else _ids(translation(ckpt, source).token_ids)
    return _details(ckpt, source, target, output_ids, kind, int(layer))


@cached(max_entries=MAX_RESULTS, show_spinner="Running the model…")
def _details(ckpt: OpenedModel, source: str, target: str | None, output_ids: tuple | None,
             kind: str, layer: int) -> dict:
    maps = ckpt.attention(source, target, details=(kind, layer), output_ids=output_ids)
    return {name: value for name, value in maps.items()
            if name.startswith(f"{kind}_") or name.endswith("_position_bias")}


@_said
def translation(ckpt: OpenedModel, source: str):
    """The model's translation of `source`, every step's attention kept: one per (model,
    sentence, search), computed once and shared by the sidebar and every page. A model with a
    generation config (one imported from Hugging Face) decodes as it says, unless the
    sidebar's Search asks for greedy (generated(), with state.search_settings); any other
    model greedily (OpenedModel.translate up to the step budget: decode() with its defaults,
    the same cache entry)."""
    settings = state.search_settings(ckpt)
    if settings is None:
        return decode(ckpt, source)
    return generated(ckpt, source, settings)


@_said
def generated(ckpt: OpenedModel, source: str, settings, silenced: tuple[str, ...] = ()):
    """OpenedModel.generate with these GenerationSettings (transformers' greedy or beam search)
    and the heads labelled in `silenced` silenced, cached per (model, sentence, settings)."""
    silenced = tuple(sorted(silenced))
    key = ("generate", ckpt.content_hash, source, repr(settings), silenced)
    if key in _STOPPED:
        return _STOPPED[key]
    return _generated(ckpt, source, settings, silenced)


@cached(max_entries=64, show_spinner="Decoding as the model's generation config says…")
def _generated(ckpt: OpenedModel, source: str, settings: GenerationSettings, silenced: tuple):
    mask = head_masks(ckpt.config, silenced) if silenced else None
    return _watched(("generate", ckpt.content_hash, source, repr(settings), silenced), ckpt,
                    settings.max_new_tokens,
                    lambda seconds: ckpt.generate(source, settings, head_mask=mask,
                                                  seconds=seconds))


def _watched(key: tuple, ckpt: OpenedModel, most: int, run):
    """run(seconds) -> a decode. A named model's (no time budget: its translations may be as
    long as its generation config says) runs in a worker thread with a compiled.Watch, while
    this run of the page draws its progress; when the user stops the run (Streamlit's Stop, or
    any change that reruns the page), the decode ends at its next step and what it made is kept
    (stopped(): the pages show it, said stopped, until the user asks for the rest). An upload's
    has its time budget and runs here."""
    if not ckpt.budgets.named:
        return run(None)
    watch, done = Watch(), {}

    def work():
        try:
            done["result"] = run(watch)
        except BaseException as err:  # noqa: BLE001 - handed to the page's run below
            done["error"] = err

    worker = threading.Thread(target=work, name="translation", daemon=True)
    worker.start()
    bar = st.progress(0.0, text="Translating…")
    try:
        while worker.is_alive():
            worker.join(0.25)
            bar.progress(min(1.0, watch.steps / max(1, most)),
                         text=f"Translating: {watch.steps} of at most {most} tokens (Stop, at the "
                              "top right, ends it where it is)")
    except BaseException:  # the run was stopped or rerun: the decode ends with what it made
        watch.stop()
        worker.join()
        if "result" in done:
            _STOPPED[key] = done["result"]
            while len(_STOPPED) > MAX_STOPPED:
                _STOPPED.pop(next(iter(_STOPPED)))
        raise
    finally:
        bar.empty()
        watch.close()
    if "error" in done:
        raise done["error"]
    return done["result"]


def translate_to_the_end() -> None:
    """Forget every stopped translation: the next run decodes them whole (a button's
    on_click)."""
    _STOPPED.clear()


@_said
def decode(ckpt: OpenedModel, source: str, max_len: int | None = None, stop: bool = True,
           beam_width: int = 1, silenced: tuple[str, ...] = ()):
    """OpenedModel.translate with these options and the heads labelled in `silenced` silenced
    (head labels such as "decoder L0 H1"), cached. The options are keyed as translate applies
    them (max_len cut to the step budget, beam search always stops at the end token), so equal
    settings share one decode whatever page asks."""
    budget = ckpt.step_budget(beam_width)
    max_len = budget if max_len is None else min(int(max_len), budget)
    key = ("decode", ckpt.content_hash, source, max_len, bool(stop) or beam_width > 1,
           int(beam_width), tuple(sorted(silenced)))
    if key in _STOPPED:
        return _STOPPED[key]
    return _decode(ckpt, *key[2:])


@cached(max_entries=64, show_spinner="Decoding…")
def _decode(ckpt: OpenedModel, source: str, max_len: int, stop: bool, beam_width: int,
            silenced: tuple):
    mask = head_masks(ckpt.config, silenced) if silenced else None
    return _watched(("decode", ckpt.content_hash, source, max_len, stop, beam_width, silenced),
                    ckpt, max_len,
                    lambda seconds: ckpt.translate(source, max_len=max_len, head_mask=mask,
                                                   beam_width=beam_width, stop_at_end=stop,
                                                   seconds=seconds))


# The Masks page's batch: rows 1.. are these sentences (its text box starts with them), each
# decoded together for at most MASK_OTHER_STEPS tokens (an untrained model never ends on its
# own); they do not depend on the sidebar's sentence, so a served app decodes them for each
# opened model in the background (explorer.warm).
MASK_OTHERS = ["5 Mar 2021", "Wednesday, September 22, 1999"]
MASK_OTHER_STEPS = 32


@_said
@cached(max_entries=64, show_spinner="Translating the batch's other sentences…")
def batch_translations(ckpt: OpenedModel, sources, max_len: int) -> list:
    """Greedy translations of several sentences decoded together (one batch, equal to decoding
    each alone), each cut at max_len tokens (at most the step budget), without their steps'
    attention (ids, tokens and text): the Masks page's other batch rows, cached."""
    if not sources:
        return []
    return greedy_decode_batch(ckpt.model, [ckpt.encode_source(s) for s in sources],
                               max_len=min(int(max_len), ckpt.step_budget()),
                               tokenizer=ckpt.target_tokenizer, capture=False,
                               seconds=ckpt.budgets.decode_seconds)


@_said
@cached(max_entries=64, show_spinner="Teacher-forcing the target…")
def teacher_forced(ckpt: OpenedModel, source: str, target: str):
    """transformer.inference.teacher_forcing.teacher_forced (a typed target stepped through as a
    Decoding, from one teacher-forced pass), cached."""
    from transformer.inference.teacher_forcing import teacher_forced as forced

    return forced(ckpt, source, target)


@_said
def layer_predictions(ckpt: OpenedModel, source: str, output_ids, silenced: tuple[str, ...] = (),
                      k: int = 5) -> dict:
    """OpenedModel.layer_predictions (the logit lens: what each decoder layer's output predicts,
    per step) on the given output ids (a decode's token_ids, or a typed target's as teacher
    forcing scores it) with the heads labelled in `silenced` silenced, cached."""
    return _layer_predictions(ckpt, source, _ids(output_ids), tuple(sorted(silenced)), int(k))


@cached(max_entries=64, show_spinner="Reading every decoder layer's prediction…")
def _layer_predictions(ckpt: OpenedModel, source: str, output_ids: tuple, silenced: tuple,
                       k: int) -> dict:
    mask = head_masks(ckpt.config, silenced) if silenced else None
    return ckpt.layer_predictions(source, k=k, head_mask=mask, output_ids=list(output_ids))


# ------------------------------------------------------------------ positions
@cached(max_entries=64, show_spinner=False)
def position_codes(ckpt: OpenedModel) -> np.ndarray:
    """The encoder's (max_len, d_model) position codes: its learned matrix or its sinusoids."""
    layer = ckpt.model.source_embedding
    if layer.position_embedding is not None:
        return layer.position_embedding.embeddings.numpy()
    return layer.sinusoids.numpy()


@cached(max_entries=256, show_spinner="Embedding the sentence…")
def encoder_input(ckpt: OpenedModel, source: str) -> dict:
    """The source embedding layer on the sentence's ids, and the two parts it adds:
    "tokens", "token_part", "position_part", "total" (each (N, d_model)): total is the layer's
    output, LayerNorm(token part + position part) in a model with an embedding norm (BART's
    layernorm_embedding), whose own layer on their sum is "normed" (None without one). A
    model without absolute positions (T5) has a zero position part."""
    layer, ids = ckpt.model.source_embedding, np.asarray([ckpt.encode_source(source)])
    token_part = layer.token_embedding(ids)[0].numpy()
    if layer.scale_embeddings:
        token_part = token_part * np.sqrt(np.float32(layer.d_model))
    codes = layer.position_codes(ids.shape[1])
    position_part = np.zeros_like(token_part) if codes is None else codes.numpy()
    norm = layer.embedding_norm
    return {"tokens": ckpt.source_tokenizer.ids_to_pieces(ids[0]), "token_part": token_part,
            "position_part": position_part, "total": layer(ids)[0].numpy(),
            "normed": None if norm is None else norm(token_part + position_part).numpy()}


# ------------------------------------------------------------------ batches
@_said
@cached(max_entries=64, show_spinner="Running the model on the batch…")
def mask_batch(ckpt: OpenedModel, sources, translations) -> dict:
    """One padded batch (sources, and the start token + each translation as targets): its ids
    and tokens per side and the model's masks of every row. "padding" (B, 1, 1, N): the
    model's source_mask (encoder and cross keys); "decoder" (B, 1, T, T): its target_mask;
    "target_padding" (B, 1, 1, T): the target_mask's last query row (it sees every key but
    padding); "look_ahead" (T, T): the target_mask of a row without padding. Row 0's scores
    and weights: masked_row."""
    cfg, model = ckpt.config, ckpt.model
    rows = {"source": [ckpt.encode_source(s) for s in sources],
            "target": [[cfg.start_id] + ckpt.encode_target(t)[:-1]  # as attention() feeds it
                       for t in translations]}
    out = {}
    for side, tokenizer in (("source", ckpt.source_tokenizer), ("target", ckpt.target_tokenizer)):
        width = max(map(len, rows[side]))
        ids = np.array([r + [cfg.pad_id] * (width - len(r)) for r in rows[side]], np.int32)
        out[f"{side}_ids"], out[f"{side}_tokens"] = ids, [tokenizer.ids_to_pieces(r) for r in ids]
    # Every mask is the model's own (its call applies these very functions: no padding masked
    # by some configs, Marian's start token has the pad id), never recomputed here.
    out["padding"] = np.asarray(model.source_mask(out["source_ids"]))  # (B, 1, 1, N)
    out["decoder"] = np.asarray(model.target_mask(out["target_ids"]))  # (B, 1, T, T)
    out["target_padding"] = out["decoder"][:, :, -1:]  # (B, 1, 1, T): the last query's keys
    no_padding = np.full((1, out["target_ids"].shape[1]), cfg.pad_id + 1, np.int32)  # (1, T)
    out["look_ahead"] = np.asarray(model.target_mask(no_padding))[0, 0]  # (T, T)
    return out


@_said
def masked_row(ckpt: OpenedModel, batch: dict, kind: str, layer: int) -> dict:
    """Row 0 of a mask_batch, as padded in the batch (its padded keys blocked): the scores
    and weights of one kind and layer, "scores" and "attention" (H, Tq, Tk), from the compiled
    pass with the details of that layer (the Head arithmetic page's, prepared with the model:
    explorer.warm). The other rows' passes would cost as much again each and show nothing
    new; the other layers' are computed when picked."""
    source = tuple(int(i) for i in batch["source_ids"][0])
    target = tuple(int(i) for i in batch["target_ids"][0])
    return _masked_row(ckpt, source, target, kind, int(layer), batch["padding"][:1],
                       batch["decoder"][:1])


@cached(max_entries=64, show_spinner="Running the model on the batch's first row…")
def _masked_row(ckpt: OpenedModel, source: tuple, target: tuple, kind: str, layer: int,
                _padding: np.ndarray, _decoder: np.ndarray) -> dict:
    result = forward(ckpt.model, np.array([source], np.int32), np.array([target], np.int32),
                     details=True, detail_of=(kind, layer))
    row = {"scores": result[f"{kind}_scores"][0, 0],  # (H, Tq, Tk)
           "attention": result[f"{kind}_attention"][layer, 0]}
    check_forward({f"{kind}_attention": row["attention"][None, None],
                   f"{kind}_scores": row["scores"][None, None]}, 0)
    for name, shown in (("source_mask", _padding), ("target_mask", _decoder)):
        if not np.array_equal(result[name], shown):  # the pass applied the masks shown
            raise AssertionError(f"row 0's {name} differs from the model's mask of the batch")
    return row


@_said
@cached(max_entries=16, show_spinner=False)
def batch_attention(ckpt: OpenedModel, sources) -> list[dict]:
    """transformer.inference.batch.attention_batch (each source with the model's own translation),
    cached; a progress bar shows only while it computes."""
    bar = st.progress(0.0, text=f"Running the model on {len(sources)} sentences…")
    maps = batch.attention_batch(ckpt, list(sources), batch_size=16, on_progress=lambda done,
                                 total: bar.progress(done / total, text=f"{done} of {total}"))
    bar.empty()
    return maps


@_said
def sentence_maps(ckpt: OpenedModel, sentences, target: str | None = None,
                  batched: bool = False) -> list[dict]:
    """The maps of each sentence: run as one batch (each with its own translation), or one by
    one with `target` (None: the model's translation)."""
    if batched:
        return batch_attention(ckpt, sentences)
    return [attention(ckpt, sentence, target) for sentence in sentences]


@_said
@cached(max_entries=64, show_spinner=False)
def statistics(ckpt: OpenedModel, sentences, target: str | None = None,
               batched: bool = False) -> dict:
    """{kind: batch_statistics} of the maps sentence_maps gives, cached."""
    maps_list = sentence_maps(ckpt, sentences, target, batched)
    return {kind: batch_statistics(maps_list, kind) for kind in KIND_NAMES}


@_said
@cached(max_entries=64, show_spinner=False)
def similarity(ckpt: OpenedModel, sentences, kind: str, target: str | None = None,
               batched: bool = False) -> np.ndarray:
    """head_similarity_matrix of one kind over the maps sentence_maps gives, cached."""
    return head_similarity_matrix(sentence_maps(ckpt, sentences, target, batched), kind)


# ------------------------------------------------------------------ ablation
@_said
def ablation(ckpt: OpenedModel, source: str, target_ids, silenced) -> dict:
    """transformer.inference.ablation.ablate with the heads labelled in `silenced`, scoring `target_ids`
    (None: the model's own translation), cached; the unablated translation is the shared one."""
    heads = tuple(parse_head_label(label) for label in silenced)
    settings = state.search_settings(ckpt)  # the ablated model searches as the shared one did
    return _ablation(ckpt, source, _scored(ckpt, source, target_ids), heads, settings,
                     translation(ckpt, source))


@cached(max_entries=64, show_spinner="Running the model with those heads silenced…")
def _ablation(ckpt: OpenedModel, source: str, target_ids, silenced: tuple,
              settings: GenerationSettings | None, _original) -> dict:
    return ablate(ckpt, source, list(silenced), target_ids=target_ids, original=_original,
                  settings=settings)


@_said
def importance(ckpt: OpenedModel, source: str, target_ids) -> list:
    """transformer.inference.ablation.head_importance (each head silenced alone), cached; a progress bar
    shows only while it computes. The bar is made inside the cached function (as
    _batch_attention's is), so a cache hit replays it whole: a bar made by the page and updated
    from inside would be a closure Streamlit cannot replay (CacheReplayClosureError)."""
    return _importance(ckpt, source, _scored(ckpt, source, target_ids))


@cached(max_entries=16, show_spinner=False)
def _importance(ckpt: OpenedModel, source: str, target_ids) -> list:
    bar = st.progress(0.0, text="Silencing one head at a time…")
    entries = head_importance(ckpt, source, target_ids=target_ids, on_progress=lambda done,
                              total: bar.progress(done / total, text=f"Silenced {done} of {total}"))
    bar.empty()
    return entries


def _scored(ckpt: OpenedModel, source: str, target_ids) -> tuple:
    """The output ids ablation scores: the given ones, else the shared translation's."""
    if target_ids is None:
        target_ids = translation(ckpt, source).token_ids
    return _ids(target_ids)


def _ids(target_ids):
    """Hashable output ids (a tuple), or None."""
    return None if target_ids is None else tuple(int(i) for i in target_ids)


# ------------------------------------------------------------------ value norms (issue 27)
@_said
def value_norms(ckpt: OpenedModel, source: str, target: str | None = None) -> dict:
    """OpenedModel.contributions(method="value_norm"): the maps of `attention(ckpt, source,
    target)` (the same output ids: the shared translation's when target is None) with each
    kind's weights replaced by ||alpha^h_ij f_h(x_j)|| (Kobayashi et al. 2020), plus
    "<kind>_summed" (layers, queries, keys) and "<kind>_norms" (layers, heads, keys), cached."""
    output_ids = None if target is not None else _ids(translation(ckpt, source).token_ids)
    return _value_norms(ckpt, source, target, output_ids)


@cached(max_entries=MAX_RESULTS, show_spinner="Computing weight × value norms…")
def _value_norms(ckpt: OpenedModel, source: str, target: str | None, output_ids: tuple | None
                 ) -> dict:
    return ckpt.contributions(source, target, method="value_norm",
                               output_ids=None if output_ids is None else list(output_ids))


@_said
def current_value_norms() -> dict:
    """value_norms for the sidebar's model, source and target."""
    return value_norms(models.active_checkpoint(), state.current_source(),
                       state.current_target())


@cached(max_entries=64, show_spinner=False)
def output_projections(ckpt: OpenedModel) -> dict[str, np.ndarray]:
    """transformer.inference.contributions.output_projections (each kind's W_O kernels,
    (layers, heads * head_dim, d_model)), cached per checkpoint."""
    from transformer.inference.contributions import output_projections as projections

    return projections(ckpt.model)


# ------------------------------------------------------------------ contributions (issue 27)
@_said
def contributions(ckpt: OpenedModel, source: str, target: str | None, method: str,
                  output_ids=None, steps: int | None = None, foil=None) -> dict:
    """OpenedModel.contributions(method=...) for "alti" and the gradient methods: each output
    token's contributions from the source tokens and the decoder inputs, cached. The output ids
    are the typed target's, else output_ids (a decode's token_ids), else the shared
    translation's (as `attention` picks them). steps: integrated gradients' steps. foil: one id
    (or None) per output token, a gradient method's contrast."""
    if target is None and output_ids is None:
        output_ids = translation(ckpt, source).token_ids
    return _contributions(ckpt, source, target, _ids(output_ids), method,
                          None if steps is None else int(steps),
                          None if foil is None else tuple(
                              None if f is None else int(f) for f in foil))


@cached(max_entries=MAX_RESULTS, show_spinner=False)
def _contributions(ckpt: OpenedModel, source: str, target: str | None, output_ids: tuple | None,
                   method: str, steps: int | None, foil: tuple | None = None) -> dict:
    ids = None if output_ids is None else list(output_ids)
    if method == "alti":  # one pass and NumPy: a spinner
        with st.spinner("Computing ALTI+ contributions…"):
            return ckpt.contributions(source, target, method=method, output_ids=ids)
    options = {} if steps is None else {"steps": steps}
    if foil is not None:
        options["foil"] = list(foil)
    if method == "value_zeroing":  # one batch of layer runs per layer and kind
        what, counted = "Zeroing each token's values…", "layer runs (layer x kind)"
    elif method == "alti_logit":  # one pass, then NumPy per decoder layer
        what, counted = "Computing ALTI-Logit…", "steps (the pass, then each decoder layer)"
    else:
        what, counted = "Computing gradients…", "rows (output token x step)"
    bar = st.progress(0.0, text=what)  # made here: a cache hit replays it
    result = ckpt.contributions(
        source, target, method=method, output_ids=ids, **options,
        on_progress=lambda done, total: bar.progress(
            done / total, text=f"{done} of {total} {counted}"))
    bar.empty()
    return result


# ------------------------------------------------------------------ interventions
LENS_STEPS = 10  # tokens a layer's greedy decode may emit beyond the model's own translation


def scored_output_ids(ckpt: OpenedModel, source: str, typed: str | None) -> list[int]:
    """The output ids an intervention scores: the typed target's, or (typed None) the
    translation's (translation: the one every page shows)."""
    return ckpt.encode_target(typed) if typed is not None else translation(ckpt, source).token_ids


def sentence_lens(ckpt: OpenedModel, source: str, typed: str | None) -> dict:
    """The Interventions page's DecoderLens of `source` on scored_output_ids, each layer's
    greedy decode at most LENS_STEPS tokens past them (within the step budget); cached
    (decoder_lens). The warm start computes the default sentence's in the background
    (explorer.warm)."""
    output_ids = scored_output_ids(ckpt, source, typed)
    return decoder_lens(ckpt, source, typed, output_ids,
                        max_steps=min(ckpt.step_budget(), len(output_ids) + LENS_STEPS))


def decoder_lens(ckpt: OpenedModel, source: str, target: str | None, output_ids,
                 max_steps: int) -> dict:
    """OpenedModel.decoder_lens on the given output ids (the translation's, or the typed
    target's), each layer's greedy decode at most max_steps tokens, cached."""
    return _decoder_lens(ckpt, source, target, _ids(output_ids), int(max_steps))


@cached(max_entries=MAX_RESULTS, show_spinner=False)
def _decoder_lens(ckpt: OpenedModel, source: str, target: str | None, output_ids: tuple,
                  max_steps: int) -> dict:
    bar = st.progress(0.0, text="Decoding from every encoder layer…")
    result = ckpt.decoder_lens(source, None, output_ids=list(output_ids), max_steps=max_steps,
                               on_progress=lambda done, total: bar.progress(
                                   done / total, text=f"Step {done} of at most {total}"))
    bar.empty()
    return result


def knockout(ckpt: OpenedModel, source: str, target: str | None, output_ids, step: int,
             layers, heads, positions) -> dict:
    """OpenedModel.knockout on the given output ids, cached."""
    return _knockout(ckpt, source, _ids(output_ids), int(step), tuple(sorted(layers)),
                     tuple(sorted(heads)), tuple(sorted(positions)))


def patch(ckpt: OpenedModel, source: str, output_ids, corrupted: str | None, positions,
          step: int | None, foil: str | None) -> dict:
    """OpenedModel.patch of every site kind on the given output ids (the translation's, or the
    typed target's), the corrupted source typed or the noised positions, cached."""
    return _patch(ckpt, source, _ids(output_ids), corrupted,
                  None if positions is None else tuple(sorted(positions)),
                  None if step is None else int(step), foil)


@cached(max_entries=MAX_RESULTS, show_spinner=False)
def _patch(ckpt: OpenedModel, source: str, output_ids: tuple, corrupted: str | None,
           positions: tuple | None, step: int | None, foil: str | None) -> dict:
    bar = st.progress(0.0, text="Restoring each site from the clean run…")
    result = ckpt.patch(source, corrupted, output_ids=list(output_ids),
                        corrupt_positions=None if positions is None else list(positions),
                        step=step, foil=foil, on_progress=lambda done, total: bar.progress(
                            done / total, text=f"{done} of {total} passes (layers, heads)"))
    bar.empty()
    return result


@cached(max_entries=MAX_RESULTS, show_spinner="Blocking the edges and decoding on…")
def _knockout(ckpt: OpenedModel, source: str, output_ids: tuple, step: int, layers: tuple,
              heads: tuple, positions: tuple) -> dict:
    return ckpt.knockout(source, output_ids=list(output_ids), step=step, layers=list(layers),
                         heads=list(heads), source_positions=list(positions))
