"""A model's generation_config.json read as untrusted data: GenerationSettings.

transformers decodes an encoder-decoder with the settings of the model's generation_config.json
(num_beams, length_penalty, early_stopping, no_repeat_ngram_size, bad_words_ids, forced BOS/EOS,
max_length, ...). `read_generation_config(data, config)` reads that file as data from a
stranger and returns the settings transformer.inference.search_transformers.generate decodes with:

- bytes: at most limits.MAX_JSON_BYTES, UTF-8 JSON at most MAX_JSON_DEPTH deep, integers of at most
  20 digits (transformer.checkpoint.jsons), a JSON object at the top; every refusal is a
  CheckpointError naming the key;
- every value's type is checked (a bool is not a number) and its range bounded; nothing is
  allocated by a number (a max_length of 10**9 is capped to the step budget before anything is
  made; the lengths and counts of bad_words_ids are bounded before they are copied);
- what is capped, changed or not applied is said in `notes` (one sentence each): num_beams above
  MAX_NUM_BEAMS, a max_length beyond the model's step budget (limits.step_budget),
  num_return_sequences above num_beams, sampling (do_sample: the greedy or beam search
  equivalent is used), transformers' options that would change the output but are not
  implemented here (repetition_penalty, ...);
- keys transformers does not know are ignored and listed in `ignored`.

Lengths follow transformers: max_length counts the decoder start token (so at most
max_length - 1 tokens are generated), max_new_tokens (when given) wins over it, and a file that
gives neither gets transformers' default of 20 new tokens, at most the model's max_len.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from transformer.checkpoint.errors import CheckpointError
from transformer.checkpoint.jsons import bounded_json
from transformer.core import limits
from transformer.core.text import quoted

MAX_NUM_BEAMS = 16  # beams one search may keep (a bigger num_beams is capped, and said)
MAX_BAD_WORDS = 1024  # sequences in bad_words_ids
MAX_BAD_WORD_LENGTH = 64  # ids in one of them
MAX_TOKEN_LIST = 4096  # ids in eos_token_id, forced_eos_token_id, suppress_tokens lists
MAX_LENGTH_PENALTY = 100.0  # |length_penalty|: 512 ** 100 is still a float (transformers overflows)
DEFAULT_NEW_TOKENS = 20  # transformers' default max_length when the file gives none

# transformers' options that would change a greedy or beam search result, with the value that
# changes nothing: another value is said in a note ("not applied").
_NOT_APPLIED = {
    "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0,
    "encoder_no_repeat_ngram_size": 0, "sequence_bias": None,
    "exponential_decay_length_penalty": None, "constraints": None, "force_words_ids": None,
    "num_beam_groups": 1, "diversity_penalty": 0.0, "guidance_scale": None, "dola_layers": None,
    "stop_strings": None, "remove_invalid_values": False, "watermarking_config": None,
    "penalty_alpha": None, "max_time": None, "token_healing": False,
    "prompt_lookup_num_tokens": None, "assistant_early_exit": None, "use_mtp": False,
}
# Keys transformers knows that change nothing here (sampling only, outputs, caching, metadata).
_NO_EFFECT = {
    "temperature", "top_k", "top_p", "typical_p", "min_p", "top_h", "epsilon_cutoff", "eta_cutoff",
    "output_scores", "output_logits", "output_attentions", "output_hidden_states",
    "return_dict_in_generate", "use_cache", "cache_implementation", "cache_config",
    "return_legacy_cache", "transformers_version", "_from_model_config", "low_memory",
    "num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold",
    "assistant_lookbehind", "target_lookbehind", "is_assistant", "compile_config",
    "disable_compile", "prefill_chunk_size", "trust_remote_code", "generation_kwargs",
    "base_model_paths", "max_matching_ngram_size", "assistant_ensemble_weight",
}
_APPLIED = {
    "num_beams", "do_sample", "max_length", "max_new_tokens", "min_length", "min_new_tokens",
    "length_penalty", "early_stopping", "no_repeat_ngram_size", "bad_words_ids",
    "forced_bos_token_id", "forced_eos_token_id", "decoder_start_token_id", "bos_token_id",
    "eos_token_id", "pad_token_id", "num_return_sequences", "suppress_tokens",
    "begin_suppress_tokens", "renormalize_logits",
}


@dataclass(frozen=True)
class GenerationSettings:
    """How generate decodes, resolved against one model (ids within its target vocabulary,
    lengths within its step budget). Lengths count as transformers counts them: max_length and
    min_length include the decoder start token."""

    num_beams: int = 1  # 1: greedy search; more: beam search
    max_length: int = DEFAULT_NEW_TOKENS + 1  # the decoder start token included
    min_length: int = 0  # </s> (every eos id) is banned while the sequence is shorter
    length_penalty: float = 1.0  # a finished hypothesis scores sum_logprobs / length ** this
    early_stopping: bool | str = False  # True, False or "never" (transformers' three rules)
    no_repeat_ngram_size: int = 0
    bad_words_ids: tuple[tuple[int, ...], ...] = ()
    forced_bos_token_id: int | None = None
    forced_eos_token_id: tuple[int, ...] = ()
    decoder_start_token_id: int = 0
    eos_token_id: tuple[int, ...] = ()
    pad_token_id: int | None = None
    num_return_sequences: int = 1
    suppress_tokens: tuple[int, ...] = ()
    begin_suppress_tokens: tuple[int, ...] = ()
    renormalize_logits: bool = False
    notes: tuple[str, ...] = ()  # what was capped, changed or not applied, one sentence each
    ignored: tuple[str, ...] = ()  # keys transformers does not know (ignored)
    given: dict = field(default_factory=dict, compare=False, repr=False)  # the values read

    @property
    def max_new_tokens(self) -> int:
        """The most tokens generated (max_length less the decoder start token)."""
        return self.max_length - 1

    @property
    def method(self) -> str:
        return "greedy search" if self.num_beams == 1 else f"beam search of width {self.num_beams}"

    def greedy(self) -> GenerationSettings:
        """The same settings decoding greedily (num_beams 1), as transformers would with
        num_beams=1."""
        return replace(self, num_beams=1, num_return_sequences=1)

    def describe(self) -> list[str]:
        """The settings in force, one short phrase each (for a sidebar)."""
        parts = [self.method, f"at most {self.max_new_tokens} new tokens"]
        if self.num_beams > 1:
            parts.append(f"length penalty {self.length_penalty:g}")
            parts.append(f"early stopping {self.early_stopping}")
        if self.min_length > 1:
            parts.append(f"at least {self.min_length - 1} new tokens")
        if self.no_repeat_ngram_size:
            parts.append(f"no repeated {self.no_repeat_ngram_size}-gram")
        if self.bad_words_ids:
            parts.append(f"{len(self.bad_words_ids)} banned sequence(s)")
        if self.forced_bos_token_id is not None:
            parts.append(f"first token forced to id {self.forced_bos_token_id}")
        if self.forced_eos_token_id:
            parts.append("</s> forced at the length limit")
        if self.suppress_tokens:
            parts.append(f"{len(self.suppress_tokens)} suppressed id(s)")
        if self.renormalize_logits:
            parts.append("scores renormalised")
        return parts


def read_generation_config(data, config, *, label: str = "'generation_config.json'",
                           beam_budget=None) -> GenerationSettings:
    """generation_config.json's bytes (None or b"": no file, transformers' defaults with the
    model's ids) -> GenerationSettings for the model of `config` (a TransformerConfig: its
    target vocabulary, start, end and pad ids and max_len). CheckpointError names what is
    refused. beam_budget(num_beams) -> the most tokens one translation may emit (by default
    limits.step_budget(config, num_beams))."""
    if data is None or len(data) == 0:
        return generation_settings({}, config, label=label, beam_budget=beam_budget)
    if len(data) > limits.MAX_JSON_BYTES:
        raise CheckpointError(f"{label} is {len(data):,} bytes; a generation config is at most "
                              f"{limits.MAX_JSON_BYTES:,} (they are a few hundred).")
    values = bounded_json(data, label)
    return generation_settings(values, config, label=label, beam_budget=beam_budget)


def generation_settings(values, config, *, label: str = "'generation_config.json'",
                        beam_budget=None) -> GenerationSettings:
    """The settings of a parsed generation config (a dict, as json.loads gives it), checked
    and bounded as read_generation_config says."""
    if not isinstance(values, dict):
        raise CheckpointError(f"{label} must hold a JSON object of settings, not "
                              f"{_kind(values)}.")
    reader = _Reader(values, config, label)
    notes = []
    vocab = config.tgt_vocab_size

    num_beams = reader.integer("num_beams", 1, low=1)
    if num_beams > MAX_NUM_BEAMS:
        notes.append(f"num_beams {_shown(num_beams)} is capped to {MAX_NUM_BEAMS} (the most beams one "
                     "search may keep here).")
        num_beams = MAX_NUM_BEAMS
    if reader.boolean("do_sample", False):
        notes.append("Sampling (do_sample) is not supported: the "
                     + ("greedy search" if num_beams == 1 else "beam search")
                     + " it would sample from is used instead.")

    budget = (beam_budget or (lambda beams: limits.step_budget(config, beams)))(num_beams)
    max_new = reader.integer("max_new_tokens", None, low=1)
    max_length = reader.integer("max_length", None, low=2)
    if max_new is not None:
        wanted, source = max_new, f"max_new_tokens {_shown(max_new)}"
    elif max_length is not None:
        wanted, source = max_length - 1, f"max_length {_shown(max_length)}"
    else:  # transformers: 20 new tokens, at most max_position_embeddings in all
        wanted, source = min(DEFAULT_NEW_TOKENS, config.max_len - 1), None
    if wanted > budget:
        if source is not None:
            notes.append(f"{source} is capped to {budget} new tokens (the step budget of one "
                         "translation with this model).")
        wanted = budget
    max_length = wanted + 1

    min_new = reader.integer("min_new_tokens", None, low=0)
    min_length = reader.integer("min_length", 0, low=0)
    if min_new is not None:
        min_length = min_new + 1
    if min_length > max_length:
        notes.append(f"The minimum length ({_shown(min_length)} with the start token) is beyond the "
                     f"maximum ({max_length}): </s> is never allowed before the maximum.")
        min_length = max_length

    length_penalty = reader.number("length_penalty", 1.0)
    if abs(length_penalty) > MAX_LENGTH_PENALTY:
        raise CheckpointError(f"{label}: length_penalty {length_penalty:g} is beyond "
                              f"+-{MAX_LENGTH_PENALTY:g}; real models use about -2 to 2.")
    early = values.get("early_stopping", False)
    if early is None:
        early = False
    if not (early is True or early is False or early == "never"):
        raise CheckpointError(f"{label}: early_stopping must be true, false or \"never\", "
                              f"not {_shown(early)}.")

    ngram = reader.integer("no_repeat_ngram_size", 0, low=0)
    if ngram >= max_length:  # no n-gram of that size fits: no ban, as with 0
        ngram = 0

    eos = reader.ids("eos_token_id", vocab)
    if not eos:  # absent, null or []: the model's own end id
        eos = (config.end_id,)
    bos = reader.id("bos_token_id", vocab)
    start = reader.id("decoder_start_token_id", vocab)
    if start is None:
        start = bos if bos is not None else config.start_id
    pad = reader.integer("pad_token_id", None)
    if pad is not None and not 0 <= pad < vocab:
        notes.append(f"pad_token_id {_shown(pad)} is not an id of the target vocabulary; it is not used.")
        pad = None
    if pad is None:
        pad = config.pad_id

    bad_words = reader.bad_words("bad_words_ids", vocab)
    forced_bos = reader.id("forced_bos_token_id", vocab)
    forced_eos = reader.ids("forced_eos_token_id", vocab) or ()
    suppress = reader.ids("suppress_tokens", vocab) or ()
    begin_suppress = reader.ids("begin_suppress_tokens", vocab) or ()
    renormalize = reader.boolean("renormalize_logits", False)

    if num_beams > 1 and max(2, 1 + len(eos)) > vocab:
        notes.append(f"eos_token_id lists {len(eos):,} ids: beam search keeps (1 + that) x "
                     f"num_beams candidates a step, more than the {vocab:,} x num_beams there "
                     "are (transformers' top-k fails on it); every candidate is kept here.")
    banned = set(suppress) | {word[0] for word in bad_words if len(word) == 1}
    if len(banned) >= vocab:
        notes.append("suppress_tokens and bad_words_ids ban every id of the target vocabulary: "
                     "no token can be generated, and the search stops at its first step.")
    returned = reader.integer("num_return_sequences", 1, low=1)
    if returned > num_beams:
        notes.append(f"num_return_sequences {_shown(returned)} is capped to num_beams ({num_beams}).")
        returned = num_beams

    for key, neutral in _NOT_APPLIED.items():
        value = values.get(key, neutral)
        if value is not None and value != neutral and not (
                key in ("num_beam_groups",) and value == 1):
            notes.append(f"{key} ({_shown(value)}) is not applied here: the output may differ "
                         "from transformers'.")
    ignored = tuple(sorted(k for k in values if k not in _APPLIED and k not in _NOT_APPLIED
                           and k not in _NO_EFFECT))
    if ignored:
        shown = ", ".join(quoted(k) for k in ignored[:10])
        more = f" and {len(ignored) - 10} more" if len(ignored) > 10 else ""
        notes.append(f"Unknown keys are ignored: {shown}{more}.")
    return GenerationSettings(
        num_beams=num_beams, max_length=max_length, min_length=min_length,
        length_penalty=float(length_penalty), early_stopping=early, no_repeat_ngram_size=ngram,
        bad_words_ids=bad_words, forced_bos_token_id=forced_bos, forced_eos_token_id=forced_eos,
        decoder_start_token_id=start, eos_token_id=eos, pad_token_id=pad,
        num_return_sequences=returned, suppress_tokens=suppress,
        begin_suppress_tokens=begin_suppress, renormalize_logits=renormalize,
        notes=tuple(notes), ignored=ignored[:100],
        given={k: values[k] for k in values if k in _APPLIED and _small(values[k])})


class _Reader:
    """Typed, bounded reads of one key each; a refusal names the key."""

    def __init__(self, values, config, label):
        self.values, self.config, self.label = values, config, label

    def _refuse(self, key, what, value):
        raise CheckpointError(f"{self.label}: {key} must be {what}, not {_shown(value)}.")

    def integer(self, key, default, low=None):
        value = self.values.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self._refuse(key, "a whole number", value)
        if low is not None and value < low:
            self._refuse(key, f"at least {low}", value)
        return value

    def number(self, key, default):
        value = self.values.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self._refuse(key, "a number", value)
        value = float(value)
        if not math.isfinite(value):
            self._refuse(key, "a finite number", value)
        return value

    def boolean(self, key, default):
        value = self.values.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self._refuse(key, "true or false", value)
        return value

    def id(self, key, vocab):
        value = self.integer(key, None)
        if value is not None and not 0 <= value < vocab:
            self._refuse(key, f"an id of the target vocabulary (0 to {vocab - 1:,})", value)
        return value

    def ids(self, key, vocab):
        """An id or a list of ids (transformers accepts both), as a tuple; None when absent."""
        value = self.values.get(key)
        if value is None:
            return None
        items = value if isinstance(value, list) else [value]
        if len(items) > MAX_TOKEN_LIST:
            raise CheckpointError(f"{self.label}: {key} lists {len(items):,} ids; at most "
                                  f"{MAX_TOKEN_LIST:,} are read.")
        out = []
        for item in items:
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < vocab:
                self._refuse(key, f"ids of the target vocabulary (0 to {vocab - 1:,})", item)
            out.append(item)
        return tuple(dict.fromkeys(out))

    def bad_words(self, key, vocab):
        value = self.values.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or any(not isinstance(w, list) for w in value):
            self._refuse(key, "a list of lists of ids", value)
        if len(value) > MAX_BAD_WORDS:
            raise CheckpointError(f"{self.label}: {key} lists {len(value):,} sequences; at most "
                                  f"{MAX_BAD_WORDS:,} are read.")
        out = []
        for word in value:
            if not word or len(word) > MAX_BAD_WORD_LENGTH:
                raise CheckpointError(f"{self.label}: each sequence of {key} must hold 1 to "
                                      f"{MAX_BAD_WORD_LENGTH} ids, not {len(word):,}.")
            for item in word:
                if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < vocab:
                    self._refuse(key, f"ids of the target vocabulary (0 to {vocab - 1:,})", item)
            out.append(tuple(word))
        return tuple(dict.fromkeys(out))


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true or false",
            type(None): "null"}.get(type(value), "a number")


def _shown(value) -> str:
    """A value from the file, short, for a sentence."""
    if isinstance(value, (dict, list)):
        return _kind(value)
    if isinstance(value, str):
        return quoted(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        if abs(value) < 10**24:
            return f"{value:,}"
        return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"
    return _kind(value)


def _small(value) -> bool:
    """Whether a read value is kept in GenerationSettings.given (not a long list)."""
    return not isinstance(value, (list, dict)) or len(value) <= 64


__all__ = ["GenerationSettings", "MAX_NUM_BEAMS", "generation_settings", "read_generation_config"]
