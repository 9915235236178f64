"""What the runtime returns, as types: each result is a dict (result["cross"], .items(),
np.savez(path, **result), st.cache_data's pickling, every caller written against dicts) whose
keys are also attributes (result.cross), as transformers' ModelOutput is, with the keys every
result of its kind holds declared and checked when it is made.

    AttentionMaps        OpenedModel.attention, attention_batch, contributions("value_norm")
    TokenContributions   OpenedModel.contributions("alti", "saliency", "input_x_gradient",
                         "integrated_gradients")
    LayerPredictions     OpenedModel.layer_predictions
    ContextMixing        OpenedModel.contributions("value_zeroing")

A decoding is transformer.inference.decoded's Decoding (a dataclass of its own)."""

from __future__ import annotations

__all__ = ["Output", "AttentionMaps", "ContextMixing", "TokenContributions",
           "LayerPredictions"]


class Output(dict):
    """A dict whose keys are attributes too; FIELDS: the keys every result of the kind holds
    (the others a kind documents are optional: details, values, a method's extras)."""

    FIELDS: tuple[str, ...] = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        missing = [name for name in self.FIELDS if name not in self]
        if missing:
            raise KeyError(f"a {type(self).__name__} lacks {', '.join(missing)}")

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no {name!r}") from None

    def __dir__(self):
        return [*super().__dir__(), *(k for k in self if isinstance(k, str))]


class AttentionMaps(Output):
    """Every attention map of one teacher-forced pass (transformer.inference.maps lists the
    optional keys: details, values, hidden states; value norms add "<kind>_summed" and
    "<kind>_norms")."""

    FIELDS = (
        "encoder",  # (L_enc, H, N, N) float32
        "decoder",  # (L_dec, H, T, T)
        "cross",  # (L_dec, H, T, N)
        "encoder_mask", "decoder_mask", "cross_mask",  # bool, True = may attend
        "source_tokens", "target_tokens", "output_tokens",  # N, T (<s> first), T (</s> last)
        "source_ids", "target_ids", "output_ids",  # int32
        "log_probs",  # (T,) each output token's log-probability
    )


class TokenContributions(Output):
    """Each output token's contributions: "source" (T, N) and "target" (T, T), row t output
    token t's (target columns after t are 0); ALTI+ adds "source_share" (T,), each layer's own
    contributions and the rollouts; the gradient methods "scores"."""

    FIELDS = ("source_tokens", "target_tokens", "output_tokens", "source", "target")


class LayerPredictions(Output):
    """What each decoder layer's output predicts (the logit lens), per step: "top_ids",
    "top_probs" (L, T, k), "chosen_rank", "chosen_probs" (L, T), "layers" (each layer's top-k
    as (piece, probability) per step)."""

    FIELDS = ("source_tokens", "target_tokens", "output_tokens", "source_ids", "target_ids",
              "output_ids", "layers", "top_ids", "top_probs", "chosen_rank", "chosen_probs")


class ContextMixing(Output):
    """How much each layer mixes each key token into each query token, per attention kind,
    without a head dimension (value zeroing: transformer.inference.value_zeroing)."""

    FIELDS = (
        "encoder",  # (L_enc, N, N) float32
        "decoder",  # (L_dec, T, T), 0 above the diagonal
        "cross",  # (L_dec, T, N)
        "encoder_normalized", "decoder_normalized", "cross_normalized",  # rows summing to 1
        "source_tokens", "target_tokens", "output_tokens",
    )
