"""Head ablation: silence attention heads and measure what the model's output loses.

A silenced head's output is multiplied by 0 before the layer's output projection (the model's
head_mask, see Transformer.call). Two measures:
- the new translation next to the original one (greedy, or as the model's generation config
  searches);
- the change in log-probability of the ORIGINAL output under teacher forcing: the output ids
  are fed to the ablated model exactly as the unablated one produced them, so a negative change
  means the silenced heads helped produce that output.

Imports NumPy and the model package only (no Streamlit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from transformer.core.kinds import KIND_NAMES as ATTENTION_KINDS
from transformer.core.kinds import head_masks, kind, layer_counts
from transformer.inference.forward import forward
from transformer.inference.numerics import check_forward

__all__ = ["ablate", "all_heads", "head_importance", "output_ids_for",
           "output_log_probs"]

Head = tuple[str, int, int]  # (kind, layer, head)


def all_heads(config, kinds: Sequence[str] = ATTENTION_KINDS) -> list[Head]:
    """Every (kind, layer, head) of the model, kind by kind, layer by layer."""
    counts = layer_counts(config)
    for name in kinds:
        kind(name)
    return [(name, layer, head) for name in kinds for layer in range(counts[name])
            for head in range(config.num_heads)]


def output_log_probs(ckpt, source_ids, output_ids, head_mask=None) -> np.ndarray:
    """(T,) log-probability of each output id under teacher forcing (one forward pass).

    The same computation as OpenedModel.attention's "log_probs", but scoring the given ids
    exactly (no re-tokenization of a text): the decoder is fed <s> + output_ids[:-1]."""
    output_ids = [int(i) for i in output_ids]
    if not output_ids:
        return np.zeros(0, np.float32)
    target_ids = [ckpt.config.start_id] + output_ids[:-1]  # teacher forcing: shifted right
    out = forward(ckpt.model, [list(source_ids)], [target_ids], [output_ids], head_mask)
    check_forward(out)  # NumericalError naming the layer and step, never a NaN change
    return out["log_probs"][0].astype(np.float32)  # (T,)


def output_ids_for(ckpt, target: str) -> list[int]:
    """A typed target's output ids as teacher forcing scores them (OpenedModel.encode_target, as
    OpenedModel.attention tokenizes a target text): its pieces then the end id, cut to the
    checkpoint's target_len (the model's max_len or the length budget of typed text)."""
    return ckpt.encode_target(target)


def _scored_ids(ckpt, source: str, target_ids) -> list[int]:
    """The output ids to score: the given ones, else the unablated greedy translation's."""
    if target_ids is None:
        return list(ckpt.translate(source).token_ids)
    return [int(i) for i in target_ids]


def _sum(log_probs: np.ndarray) -> float:
    return float(np.sum(log_probs, dtype=np.float64))


def ablate(ckpt, source: str, silenced: Iterable[Head], target_ids=None,
           original=None, settings=None) -> dict:
    """Silence the given heads and compare with the unablated model.

    target_ids: the output ids to score (ending with the end id, as Decoding.token_ids); by
    default the unablated model's own greedy translation. original: that translation when the
    caller has it (ckpt.translate(source), a Decoding), else it is decoded here. settings: a
    GenerationSettings both translations search with (OpenedModel.generate: a model's own
    generation config), None for greedy (OpenedModel.translate). Returns a dict:
    "silenced" [(kind, layer, head)], "text"/"tokens"/"token_ids" of the ablated translation,
    "original_text"/"original_tokens"/"original_ids" of the unablated one, "changed" (the
    translation's ids differ), "scored_tokens" (the output scored), "token_log_probs" and
    "original_token_log_probs" (T,) of those tokens with and without the ablation, "log_prob"
    and "original_log_prob" (their sums) and "delta_log_prob" = log_prob - original_log_prob.
    """
    silenced = [(str(k), int(layer), int(head)) for k, layer, head in silenced]
    mask = head_masks(ckpt.config, silenced)
    source_ids = ckpt.encode_source(source)
    if original is None:
        original = (ckpt.translate(source) if settings is None
                    else ckpt.generate(source, settings))
    scored = list(original.token_ids) if target_ids is None else [int(i) for i in target_ids]
    # Both passes use a full mask (ones where nothing is silenced): the same computation, so
    # silencing nothing changes the log-probability by exactly 0.
    before = output_log_probs(ckpt, source_ids, scored, head_masks(ckpt.config))
    if silenced:
        new = (ckpt.translate_plain(source, head_mask=mask)  # its ids and text: no maps kept
               if settings is None else ckpt.generate(source, settings, head_mask=mask))
        after = output_log_probs(ckpt, source_ids, scored, mask)
    else:  # silencing nothing is the model itself: nothing to decode or score again
        new, after = original, before
    return {
        "silenced": silenced,
        "text": new.text, "tokens": list(new.tokens), "token_ids": list(new.token_ids),
        "original_text": original.text, "original_tokens": list(original.tokens),
        "original_ids": list(original.token_ids),
        "changed": list(new.token_ids) != list(original.token_ids),
        "scored_tokens": ckpt.target_tokenizer.ids_to_pieces(scored),
        "token_log_probs": after, "original_token_log_probs": before,
        "log_prob": _sum(after), "original_log_prob": _sum(before),
        "delta_log_prob": _sum(after) - _sum(before),
    }


def head_importance(ckpt, source: str, kinds: Sequence[str] = ATTENTION_KINDS,
                    on_progress: Callable[[int, int], None] | None = None,
                    target_ids=None) -> list[dict]:
    """For each head of the given kinds silenced ALONE: the change in log-probability of the
    original output (see ablate; negative = the head helped). One teacher-forced pass per head.

    Returns [{"kind", "layer", "head", "delta_log_prob"}] in model order; on_progress(done,
    total) is called after each head."""
    heads = all_heads(ckpt.config, kinds)
    source_ids, scored = ckpt.encode_source(source), _scored_ids(ckpt, source, target_ids)
    baseline = _sum(output_log_probs(ckpt, source_ids, scored, head_masks(ckpt.config)))
    results = []
    for done, (name, layer, head) in enumerate(heads, start=1):
        mask = head_masks(ckpt.config, [(name, layer, head)])
        delta = _sum(output_log_probs(ckpt, source_ids, scored, mask)) - baseline
        results.append({"kind": name, "layer": layer, "head": head, "delta_log_prob": delta})
        if on_progress is not None:
            on_progress(done, len(heads))
    return results
