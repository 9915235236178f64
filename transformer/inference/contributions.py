"""What each token contributed, beyond the attention weights: OpenedModel.contributions.

One Method record per method in METHODS (its name, label, unit, whether its values are signed,
its description and its compute: compute(ckpt, source, target, **options) returns a dict), which
the pages, their links and their exports read; `contributions` dispatches by name, so a new
method is one module and one record here:

- "value_norm" (Kobayashi et al. 2020, transformer.analysis.value_norm): the maps of
  OpenedModel.attention with every attention kind's weights replaced by ||alpha^h_ij f_h(x_j)||,
  plus the head-summed norms. This module gathers what the NumPy arithmetic needs (each kind's
  per-head values V from the teacher-forced pass, each layer's output projection W_O from the
  model's attention layers); the arithmetic is the analysis module's. A page that holds
  OpenedModel.attention(details=True) already gets the same from value_norm_maps(maps, model).
- "alti" (ALTI+, Ferrando et al. 2022: transformer.inference.alti_inputs, its arithmetic
  transformer.analysis.alti): each output token's contributions from each source token and
  each decoder input, and its source share.
- "alti_logit" (ALTI-Logit, Ferrando et al. 2023: transformer.inference.alti_inputs, its
  arithmetic transformer.analysis.alti_logit): each source and prefix token's contribution to
  each output token's logit, through every decoder layer; with foil=, to the logit difference.
- "value_zeroing" (Mohebbi et al. 2023: transformer.inference.value_zeroing, its arithmetic
  transformer.analysis.context_mixing): per layer and kind, how far each query token's layer
  output moves when each key token's value vectors are zeroed (cosine distance).
- "saliency", "input_x_gradient", "integrated_gradients" (transformer.inference.gradients):
  gradients of each output token's log-probability with respect to the token embeddings; with
  foil= (one id per output token, None for a step without one), of log p(token) - log p(foil):
  why this token rather than that one.

Any other name is a ValueError naming the methods there are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from transformer.analysis.value_norm import value_weighted
from transformer.core.kinds import KINDS, head_masks
from transformer.inference.alti_inputs import alti, alti_logit_attributions
from transformer.inference.gradients import gradient_attributions
from transformer.inference.maps import attention_maps, scored_ids
from transformer.inference.outputs import AttentionMaps, ContextMixing, Output, TokenContributions
from transformer.inference.value_zeroing import value_zeroing

__all__ = ["METHODS", "Method", "contributions", "output_projections", "value_norm",
           "value_norm_maps"]


def output_projections(model) -> dict[str, np.ndarray]:
    """Each attention kind's output projection kernels W_O, stacked over its layers:
    {kind: (layers, num_heads * head_dim, d_model) float32}. Row block h * head_dim ..
    (h + 1) * head_dim - 1 is head h's (MultiHeadAttention merges heads head-major)."""
    layers = {"encoder": [layer.self_attention for layer in model.encoder_layers],
              "decoder": [layer.self_attention for layer in model.decoder_layers],
              "cross": [layer.cross_attention for layer in model.decoder_layers]}
    return {name: np.stack([a.output_dense.kernel.numpy() for a in attention])
            for name, attention in layers.items()}


def value_norm_maps(maps: dict, model, head_mask=None, overwrite: bool = False) -> dict:
    """Maps holding each kind's per-head values "<kind>_v" (OpenedModel.attention(details=True),
    or attention_maps(values=True)) -> a new dict, `maps` untouched: the same keys with each
    kind's weights replaced by the value-weighted norms (see value_norm), "<kind>_summed" and
    "<kind>_norms" added, and Q, K, V, the scores and T5's position biases left out.
    head_mask: the one the maps were computed with ({kind: (layers, heads)}, any subset).
    overwrite: the maps' weights arrays may be overwritten (by a caller that owns them)."""
    w_o = output_projections(model)
    masks = head_masks(model.config, given=head_mask) if head_mask is not None else {}
    dropped = {f"{name}_{what}" for name in KINDS for what in ("q", "k", "v", "scores")}
    dropped |= {"encoder_position_bias", "decoder_position_bias"}
    out = {key: value for key, value in maps.items() if key not in dropped}
    for name in KINDS:
        norms = value_weighted(maps[name], maps[f"{name}_v"], w_o[name], masks.get(name),
                               overwrite=overwrite)
        out[name] = norms["weighted"]  # (layers, heads, queries, keys)
        out[f"{name}_summed"] = norms["summed"]  # (layers, queries, keys)
        out[f"{name}_norms"] = norms["norms"]  # (layers, heads, keys)
    return out


def value_norm(ckpt, source: str, target: str | None = None, *, head_mask=None,
               output_ids=None) -> dict:
    """OpenedModel.attention(source, target, head_mask, output_ids=output_ids)'s dict (tokens,
    ids, masks, log_probs) with each kind's weights replaced by the value-weighted norms:

        "encoder" (L_enc, H, N, N), "decoder" (L_dec, H, T, T), "cross" (L_dec, H, T, N):
            ||alpha^h_ij f_h(x_j)||, f_h(x) = (x W_V^h + b_V^h) W_O^h (W_O's bias left out);
        "<kind>_summed" (L, q_len, k_len): ||sum_h alpha^h_ij f_h(x_j)||, over the heads;
        "<kind>_norms" (L, H, k_len): ||f_h(x_j)||, each key's transformed value alone.

    A head silenced by head_mask contributes nothing (its terms are 0). One compiled pass that
    hands out the maps and V alone (forward(values=True)), then the NumPy arithmetic of
    transformer.analysis.value_norm."""
    ids = scored_ids(ckpt, source, target, output_ids, head_mask)
    maps = attention_maps(ckpt, [ckpt.encode_source(source)], [ids], head_mask,
                          values=True)[0]
    return value_norm_maps(maps, ckpt.model, head_mask, overwrite=True)


def _gradients(method: str) -> Callable[..., dict]:
    """The gradient method `method` (transformer.inference.gradients) on the output ids
    OpenedModel.attention would score; options: steps (integrated gradients), output_ids,
    foil (one id per output token, or None: the contrast), on_progress."""
    def run(ckpt, source: str, target: str | None = None, *, output_ids=None,
            head_mask=None, foil=None, **options) -> dict:
        ids = scored_ids(ckpt, source, target, output_ids, head_mask)
        return gradient_attributions(ckpt, source, ids, method=method, head_mask=head_mask,
                                     foil_ids=foil, **options)
    run.__name__ = method
    return run


@dataclass(frozen=True)
class Method:
    """One attribution method, as the pages, their links and their exports read it."""
    name: str  # OpenedModel.contributions' method=
    label: str  # a picker's label: "ALTI+"
    unit: str  # what one value is (a colour bar's or an axis's title): "‖∇ log p‖"
    compute: Callable[..., dict]  # (ckpt, source, target, **options) -> its result
    output: type[Output] = TokenContributions  # the result's type
    about: str = ""  # the method and its paper, in Markdown (the page's paragraph)
    signed: bool = False  # values of either sign
    share: bool = False  # each row shares 1 between the source and the prefix (ALTI+'s)
    steps: bool = False  # takes integrated gradients' path steps (options: steps)
    gradient: bool = False  # a gradient of the output token's log-probability
    contrastive: bool = False  # takes a foil per output token (options: foil): log p(token) -
    # log p(foil) is attributed
    contributions_page: bool = True  # offered on the Contributions page (value norms are the
    # attention pages' "Weight × value norm")


METHODS: dict[str, Method] = {method.name: method for method in (
    Method("value_norm", "Weight × value norm", "‖α f(x)‖", value_norm, AttentionMaps,
           about="**Weight × value norm** (Kobayashi et al. 2020): each head's weight times the "
                 "length of the key's value vector through the output projection.",
           contributions_page=False),
    Method("value_zeroing", "Value zeroing", "1 − cos", value_zeroing, ContextMixing,
           about="**Value zeroing** (Mohebbi et al. 2023, *Quantifying Context Mixing in "
                 "Transformers*): each layer run again with one token's value vectors zeroed "
                 "in every head; how far each other token's layer output moves (cosine "
                 "distance) is how much that layer mixed the token into it.",
           contributions_page=False),
    Method("alti", "ALTI+", "contribution", alti, share=True, about=(
        "**ALTI+** (Ferrando et al. 2022, *Towards Opening the Black Box of Neural Machine "
        "Translation: Source and Target Contributions of Each Token*): every attention "
        "sublayer's output is split into one term per token (the residual and the LayerNorm "
        "linearised), each term's share comes from how close it is to the output (L1 "
        "distance), and the shares are rolled out through the encoder and through the "
        "decoder with its cross-attention. Each row sums to 1 over the source and the "
        "prefix together.")),
    Method("alti_logit", "ALTI-Logit", "logit", alti_logit_attributions, signed=True,
           contrastive=True, about=(
        "**ALTI-Logit** (Ferrando et al. 2023, *Explaining How Transformers Use Context to "
        "Build Predictions*): what each attention sublayer adds for each key token, read out "
        "directly as the output token's logit (its norms linearised), then spread over the "
        "input tokens that key is made of by ALTI's rollout. Signed, in logits (red: the "
        "token lowers the logit, or the lead over the foil); the feed-forward sublayers and "
        "biases are not attributed.")),
    Method("saliency", "Saliency", "‖∇ log p‖", _gradients("saliency"), gradient=True,
           contrastive=True, about=(
        "**Saliency** (Simonyan et al. 2014): the length of the gradient of the output "
        "token's log-probability with respect to each token's embedding: how fast the "
        "prediction would move if that token's vector moved. Not a share: rows do not "
        "sum to 1.")),
    Method("input_x_gradient", "Input × gradient", "‖e ⊙ ∇ log p‖",
           _gradients("input_x_gradient"), gradient=True, contrastive=True, about=(
               "**Input × gradient** (Shrikumar et al. 2017): the length of the embedding times "
               "its gradient, element by element: the first-order estimate of what the token's "
               "vector adds to the log-probability.")),
    Method("integrated_gradients", "Integrated gradients", "attribution",
           _gradients("integrated_gradients"), signed=True, steps=True, gradient=True,
           contrastive=True, about=(
               "**Integrated gradients** (Sundararajan et al. 2017): the gradient averaged along "
               "the straight path from a baseline (every token the padding token) to the "
               "sentence, times the embedding's distance from the baseline; signed (red: the "
               "token lowers the log-probability). A row sums to log p(token) − log p(token | "
               "baseline), up to the path's steps.")),
)}


def contributions(ckpt, source: str, target: str | None = None, method: str = "value_norm",
                  **options) -> dict:
    """METHODS[method].compute(ckpt, source, target, **options); ValueError for another
    name."""
    try:
        record = METHODS[method]
    except (KeyError, TypeError):
        available = ", ".join(repr(m) for m in METHODS)
        raise ValueError(f"contribution method must be one of {available}, got "
                         f"{method!r}") from None
    result = record.compute(ckpt, source, target, **options)
    return result if isinstance(result, record.output) else record.output(result)
