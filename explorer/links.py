"""Links that reopen a view: the session's main state in the URL's query parameters.

restore_from_url() reads the parameters once per session, before any widget is drawn, and puts
every valid value into st.session_state (an invalid or stale one falls back to its default with
a short note in the sidebar, never an exception); write_to_url() sets the parameters from the
state at the end of every run, only the keys that differ from their defaults (finish(); or,
when a page's choices are drawn inside an st.fragment, at the end of that fragment:
follow_in_fragment()). The page itself is the URL's path (st.navigation).

Parameters: model (a bundled file name, or the first characters of an upload's sha256 when this
session has that upload), src (the sentence), tgt (the typed target; only in typed-target mode),
search=greedy (a model with a generation config translated greedily),
and each page's main choices under their session keys (attn_kind=cross, attn_layer=1, ...).
"""

from __future__ import annotations

import re
from urllib.parse import urlencode, urljoin

import streamlit as st

from transformer.core.kinds import KIND_NAMES, KINDS, kind_by_label

from . import models, show, state

RESTORED = "links_restored"  # True once this session has read its URL
SLOT = "links_slot"  # this run's link container and url path (begin)
MODEL, SOURCE, TARGET, SEARCH = "model", "src", "tgt", "search"
GREEDY = "greedy"  # search=greedy: the sidebar's Search set to greedy
DIGEST_CHARS = 12  # characters of an upload's sha256 written to the URL

# Each page's main choices: {url path: {session key: what it holds}}. "kind" is a kind picker's
# label (written as the kind's name: encoder, decoder, cross); "layer" a layer of the page's
# kind (of the <prefix>_kind key beside it, else of either stack); "decoder layer"; "head";
# "index" any position (the page clamps it to what the sentence has); "option" one of the
# named options of OPTIONS (a radio's label, written as its name in the link).
PAGE_KEYS: dict[str, dict[str, str]] = {
    "Masks": {"mask_kind": "kind", "mask_layer": "layer", "mask_head": "head"},
    "Attention_Maps": {"attn_kind": "kind", "attn_layer": "layer", "attn_head": "head",
                       "attn_show": "option"},
    "Linked_View": {"link_layer": "decoder layer", "link_head": "head", "link_target": "index",
                    "link_show": "option"},
    "Aggregations": {"agg_kind": "kind", "agg_flow_layer": "layer", "agg_show": "option"},
    "Token_View": {"tv_kind": "kind", "tv_layer": "layer", "tv_show": "option"},
    "Head_Arithmetic": {"arith_kind": "kind", "arith_layer": "layer", "arith_head": "head"},
    "Decoding": {"dec_step": "index", "dec_layer": "decoder layer", "dec_head": "head"},
    "Head_Statistics": {"stats_kind": "kind"},
    "Contributions": {"contrib_method": "option", "contrib_contrast": "option",
                      "contrib_layer": "decoder layer", "contrib_step": "index",
                      "contrib_vz_kind": "kind"},
    "Interventions": {"inter_lens_on": "flag", "inter_ko_step": "index",
                      "inter_ko_sources": "indices", "inter_ko_layers": "decoder layers",
                      "inter_ko_heads": "heads", "inter_patch_mode": "option",
                      "inter_patch_corrupted": "text", "inter_patch_noise": "indices",
                      "inter_patch_step": "index", "inter_patch_score": "option"},
}
# The named options of each "option" key: {name in a link: the widget's label}, the default
# first (never written).
OPTIONS: dict[str, dict[str, str]] = {
    **{key: {"weights": show.WEIGHTS, "value_norm": show.VALUE_NORM}
       for key in ("attn_show", "link_show", "agg_show", "tv_show")},
    "contrib_method": {name: m.label for name, m in show.PAGE_METHODS.items()},
    "contrib_contrast": {"token": show.NO_CONTRAST, "runner_up": show.RUNNER_UP},
    "inter_patch_mode": {"typed": show.CORRUPT_TYPED, "noise": show.CORRUPT_NOISE},
    "inter_patch_score": {"log_p": show.PATCH_LOG_P, "difference": show.PATCH_DIFFERENCE},
}
# "flag" keys (a toggle, written 1 or 0 when it differs from its default), "text" keys (any text,
# written when not empty), "indices" (a list of positions, written "2,5" when not empty; the
# page drops positions the sentence does not have), "decoder layers" and "heads" (lists,
# written when not all of them, as their multiselects start).
FLAG_DEFAULTS: dict[str, bool] = {"inter_lens_on": True}
LISTS = frozenset({"indices", "decoder layers", "heads"})
# Number choices that start unset (the page picks for itself): a link names any value, 0 included.
UNSET_BY_DEFAULT = frozenset({"inter_patch_step"})
# Number choices a page opens on the last decoder layer rather than 0: a link names any other
# value, the first layer included.
LAST_LAYER_BY_DEFAULT = frozenset({"agg_flow_layer", "contrib_layer"})
CHOICES: dict[str, str] = {key: what for keys in PAGE_KEYS.values() for key, what in keys.items()}
_NUMBER = re.compile(r"\d{1,6}")
_NUMBERS = re.compile(r"\d{1,6}(,\d{1,6}){0,999}")
TEXT_CHARS = 2000  # the longest text a link's parameter sets


def restore_from_url() -> None:
    """Put the URL's state into st.session_state, once per session (later reruns keep what the
    user changed). Call at the start of the run, before any widget is drawn."""
    if st.session_state.get(RESTORED):
        return
    st.session_state[RESTORED] = True
    params = {key: st.query_params.get(key) for key in st.query_params}
    notes = []
    choice = _model_choice(params.get(MODEL), notes)
    if choice is not None:
        st.session_state[state.MODEL] = choice
    if params.get(SOURCE) is not None:
        st.session_state[state.SOURCE] = params[SOURCE]
    if params.get(TARGET) is not None:
        st.session_state[state.TARGET_MODE] = state.TARGET_TYPED
        st.session_state[state.TARGET] = params[TARGET]
        st.session_state[state.TARGET_STARTED] = True  # the box keeps the linked target
    if params.get(SEARCH) == GREEDY:
        st.session_state[state.SEARCH] = state.SEARCH_GREEDY
    elif params.get(SEARCH) is not None:
        notes.append(f"{SEARCH}={params[SEARCH]!r} is not a search this link can set (only "
                     f"{SEARCH}={GREEDY}): the model's generation config is used.")
    config = _config(st.session_state.get(state.MODEL, state.default_model_choice()))
    kinds = {}
    for key in (k for k, what in CHOICES.items() if what == "kind" and k in params):
        if params[key] in KINDS:
            kinds[key] = st.session_state[key] = KINDS[params[key]].label
        else:
            notes.append(f"{key}={params[key]!r} is not an attention kind "
                         f"({', '.join(KIND_NAMES)}): the first kind is shown.")
    for key in (k for k, what in CHOICES.items() if what == "option" and k in params):
        if params[key] in OPTIONS[key]:
            st.session_state[key] = OPTIONS[key][params[key]]
        else:
            notes.append(f"{key}={params[key]!r} is not one of {', '.join(OPTIONS[key])}: "
                         "the first one is shown.")
    for key in (k for k, what in CHOICES.items() if what == "flag" and k in params):
        if params[key] in ("0", "1"):
            st.session_state[key] = params[key] == "1"
        else:
            notes.append(f"{key}={params[key]!r} is not 1 or 0: it starts as it does.")
    for key in (k for k, what in CHOICES.items() if what == "text" and k in params):
        st.session_state[key] = params[key][:TEXT_CHARS]
    for key in (k for k, what in CHOICES.items() if what in LISTS and k in params):
        _restore_list(key, params[key], config, notes)
    for key in (k for k, what in CHOICES.items() if what in ("layer", "decoder layer", "head",
                                                            "index") and k in params):
        value, high = params[key], _highest(key, config, kinds)
        if not _NUMBER.fullmatch(value or ""):
            notes.append(f"{key}={value!r} is not a whole number: the first one is shown.")
        elif high is not None and int(value) > high:
            notes.append(f"{key}={value} is out of range for this model (0 to {high}): "
                         "the first one is shown.")
        else:
            st.session_state[key] = int(value)
    if notes:
        st.sidebar.info("This link's view could not be reopened exactly. " + " ".join(notes),
                        icon=":material/link_off:")


def _restore_list(key: str, value: str, config, notes: list[str]) -> None:
    """A list parameter ("2,5") into the session, each value checked against the model."""
    what = CHOICES[key]
    high = {"heads": config.num_heads - 1,
            "decoder layers": config.num_decoder_layers - 1}.get(what)
    if not _NUMBERS.fullmatch(value or ""):
        notes.append(f"{key}={value!r} is not whole numbers separated by commas: it starts as "
                     "it does.")
        return
    values = sorted({int(v) for v in value.split(",")})
    if high is not None and values[-1] > high:
        notes.append(f"{key}={value} is out of range for this model (0 to {high}): it starts "
                     "as it does.")
        return
    st.session_state[key] = values


def _model_choice(value: str | None, notes: list[str]) -> str | None:
    """The model choice a URL's model parameter names, or None (with a note when it names none
    this session can open)."""
    if value is None:
        return None
    choices = models.model_choices()
    bundled = f"{state.BUNDLED}:{value}"
    if bundled in choices:
        return bundled
    uploads = [c for c in choices if c.startswith(state.UPLOADED + ":")
               and len(value) >= 8 and c.partition(":")[2].startswith(value)]
    if len(uploads) == 1:
        return uploads[0]
    notes.append(f"model={value!r} is neither a bundled model nor an upload of this session "
                 "(an uploaded model has to be uploaded again): the default model is shown.")
    return None


def _config(choice: str):
    return models.checkpoint_for(choice).config


def _highest(key: str, config, kinds: dict[str, str]) -> int | None:
    """The highest value a number parameter may have with this model (None: no upper bound
    here; the page clamps it)."""
    what = CHOICES[key]
    if what == "head":
        return config.num_heads - 1
    if what == "decoder layer":
        return config.num_decoder_layers - 1
    if what == "layer":
        kind_key = key.split("_")[0] + "_kind"
        if kind_key in CHOICES:
            picked = kinds.get(kind_key) or KINDS[KIND_NAMES[0]].label
            return kind_by_label(picked).num_layers(config) - 1
        return max(config.num_encoder_layers, config.num_decoder_layers) - 1
    return None


def view_params(url_path: str) -> dict[str, str]:
    """The query parameters of the current view (the page at `url_path`): only the values that
    differ from their defaults."""
    params = {}
    choice = state.model_choice()
    origin, _, name = choice.partition(":")
    if choice != state.default_model_choice():
        params[MODEL] = name if origin == state.BUNDLED else name[:DIGEST_CHARS]
    source = st.session_state.get(state.SOURCE, state.DEFAULT_SOURCE)
    if source != state.DEFAULT_SOURCE:
        params[SOURCE] = source
    if st.session_state.get(state.TARGET_MODE) == state.TARGET_TYPED:
        params[TARGET] = st.session_state.get(state.TARGET, "")
    if (st.session_state.get(state.SEARCH) == state.SEARCH_GREEDY
            and models.active_checkpoint().generation is not None):
        params[SEARCH] = GREEDY
    for key, what in PAGE_KEYS.get(url_path, {}).items():
        value = st.session_state.get(key)
        if what == "kind":
            if value is not None and value != KINDS[KIND_NAMES[0]].label:
                params[key] = kind_by_label(value).name
        elif what == "option":
            names = [name for name, label in OPTIONS[key].items() if label == value]
            if names and names[0] != next(iter(OPTIONS[key])):
                params[key] = names[0]
        elif what == "flag":
            if isinstance(value, bool) and value != FLAG_DEFAULTS[key]:
                params[key] = "1" if value else "0"
        elif what == "text":
            if isinstance(value, str) and value:
                params[key] = value
        elif what in LISTS:
            if isinstance(value, list) and value and value != _all(what):
                params[key] = ",".join(str(v) for v in sorted(value))
        elif isinstance(value, int) and not isinstance(value, bool) and value != _default(key):
            params[key] = str(value)
    return params


def _all(what: str) -> list[int] | None:
    """Every value a list of decoder layers or heads may hold (None for positions)."""
    config = models.active_checkpoint().config
    return {"heads": list(range(config.num_heads)),
            "decoder layers": list(range(config.num_decoder_layers))}.get(what)


def _default(key: str) -> int | None:
    """The value a page's number choice starts on: 0, the active model's last decoder
    layer for LAST_LAYER_BY_DEFAULT, None (unset) for UNSET_BY_DEFAULT."""
    if key in UNSET_BY_DEFAULT:
        return None
    if key in LAST_LAYER_BY_DEFAULT:
        return models.active_checkpoint().config.num_decoder_layers - 1
    return 0


def begin(container, url_path: str) -> None:
    """Before the page runs (app.py): where this view's link is drawn (a sidebar container) and
    the page's url path, for finish() and for the page's fragments (follow_in_fragment)."""
    st.session_state[SLOT] = {"container": container, "url_path": url_path, "drawn": False}


def follow_in_fragment() -> None:
    """At the end of an st.fragment that draws some of the page's PAGE_KEYS widgets: write the
    URL and draw the link from inside it. A fragment rerun runs neither app.py nor the rest of
    the page, so this is what keeps both current when one of its widgets changes; Streamlit
    redraws a fragment's writes to an outside container (the sidebar's slot) in place. Does
    nothing when the page runs without app.py (no slot)."""
    slot = st.session_state.get(SLOT)
    if slot is None:
        return
    write_to_url(slot["url_path"])
    show_link(slot["container"], slot["url_path"])
    slot["drawn"] = True


def finish() -> None:
    """After the page (app.py): write the URL, and draw the link unless a fragment drew it."""
    slot = st.session_state[SLOT]
    write_to_url(slot["url_path"])
    if not slot["drawn"]:
        show_link(slot["container"], slot["url_path"])


def write_to_url(url_path: str) -> None:
    """Set st.query_params to the current view's parameters. Call at the end of the run."""
    params = view_params(url_path)
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)


def relative_link(url_path: str) -> str:
    """The current view as a link relative to the app's address: `./Attention_Maps?...`."""
    query = urlencode(view_params(url_path))
    return f"./{url_path}" + (f"?{query}" if query else "")


def show_link(container, url_path: str) -> None:
    """The "Copy link to this view" control: the link in a fenced code block (its copy button;
    markdown, so that a page's own st.code blocks stay the only code elements), whole
    when the browser's address is known, else relative to the app's address."""
    link, address = relative_link(url_path), st.context.url
    with container:
        if address:
            st.caption("Copy this link to reopen this page with this model, sentence and "
                       "choices in any browser.")
            link = urljoin(address, link)
        else:
            st.caption("Copy this link (relative to the app's address) to reopen this page "
                       "with this model, sentence and choices in any browser.")
        st.markdown(f"```text\n{link}\n```")


__all__ = ["PAGE_KEYS", "begin", "finish", "follow_in_fragment", "relative_link",
           "restore_from_url", "show_link", "view_params", "write_to_url"]
